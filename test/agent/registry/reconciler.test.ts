/**
 * The reconciler's pure checks of a PluginInfo: which handler and version, where the endpoint is,
 * and every reason to refuse; and, fuzzed, that no endpoint a plugin can write resolves outside
 * the plugins directory and is still accepted, whatever `..`, slashes or symlinks it uses.
 */
import assert from 'node:assert/strict';
import { mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join, sep } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { checkInfo, resolveEndpoint } from '../../../src/agent/registry/info-check.ts';
import type { PluginHandler } from '../../../src/agent/registry/handler.ts';
import type { PluginInfo } from '../../../src/api/plugins/wire.ts';
import { removeDir, tempDir } from '../../helpers/processes.ts';

const handler: PluginHandler = {
  type: 'warren.event-source',
  versions: ['v1'],
  validate: (info) => (info.name === 'forbidden' ? 'that name is reserved' : undefined),
  register: async () => undefined,
  unregister: async () => undefined,
};
const handlers = new Map([[handler.type, handler]]);
const info = (over: Partial<PluginInfo> = {}): PluginInfo => ({
  type: handler.type,
  name: 'podman',
  endpoint: '',
  supportedVersions: ['v1'],
  ...over,
});

describe('checkInfo', () => {
  const dir = '/run/warren/plugins';
  const socket = `${dir}/podman/reg.sock`;

  it('accepts a good PluginInfo: its handler, the version, the endpoint resolved against the socket’s directory', () => {
    const check = checkInfo(info({ endpoint: 'events.sock' }), socket, dir, handlers);
    assert.deepEqual(check, { ok: true, handler, endpoint: `${dir}/podman/events.sock`, version: 'v1' });
  });

  it('an empty endpoint is the registration socket itself', () => {
    const check = checkInfo(info(), socket, dir, handlers);
    assert.ok(check.ok);
    assert.equal(check.endpoint, socket);
  });

  it('an absolute endpoint inside the directory, and a .. that stays inside, are accepted', () => {
    assert.equal(resolveEndpoint(`${dir}/other/e.sock`, socket, dir), `${dir}/other/e.sock`);
    assert.equal(resolveEndpoint('../e.sock', socket, dir), `${dir}/e.sock`);
  });

  const refusals: ReadonlyArray<readonly [string, Partial<PluginInfo>, RegExp]> = [
    ['an unknown type', { type: 'kubelet.csi' }, /unknown plugin type/],
    ['an empty name', { name: '' }, /empty name/],
    ['a blank name', { name: '  ' }, /empty name/],
    ['no common version', { supportedVersions: ['v9'] }, /no version in common/],
    ['a .. escape', { endpoint: '../../e.sock' }, /outside the plugins directory/],
    ['an absolute path elsewhere', { endpoint: '/tmp/e.sock' }, /outside the plugins directory/],
    [
      'a sibling directory sharing the prefix',
      { endpoint: '/run/warren/plugins2/e.sock' },
      /outside the plugins directory/,
    ],
    ['a NUL byte', { endpoint: 'e\0.sock' }, /NUL/],
    ['the handler’s own reason', { name: 'forbidden' }, /that name is reserved/],
  ];
  for (const [why, over, reason] of refusals) {
    it(`refuses ${why}`, () => {
      const check = checkInfo(info(over), socket, dir, handlers);
      assert.equal(check.ok, false);
      assert.match(check.ok ? '' : check.reason, reason);
    });
  }

  it('a handler whose check throws refuses, saying so, rather than failing the registry', () => {
    const throwing = new Map([
      [
        handler.type,
        {
          ...handler,
          validate: () => {
            throw new Error('boom');
          },
        },
      ],
    ]);
    const check = checkInfo(info(), socket, dir, throwing);
    assert.deepEqual(check, { ok: false, reason: 'the warren.event-source handler could not check it: boom' });
  });
});

describe('resolveEndpoint against a real directory with symlinks', () => {
  const root = tempDir('warren-endpoint-');
  after(() => removeDir(root));
  const dir = join(root, 'plugins');
  const outside = join(root, 'outside');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  mkdirSync(outside);
  symlinkSync(outside, join(dir, 'out'));
  symlinkSync(join(dir, 'sub'), join(dir, 'in'));
  const socket = join(dir, 'reg.sock');

  it('refuses a symlink that leads out, accepts one that stays in', () => {
    assert.deepEqual(resolveEndpoint('out/e.sock', socket, dir), {
      refusal: `endpoint "out/e.sock" (${join(dir, 'out/e.sock')}) is outside the plugins directory ${dir}`,
    });
    assert.equal(resolveEndpoint('in/e.sock', socket, dir), join(dir, 'in/e.sock'));
  });

  it('never accepts an endpoint that resolves outside the directory (fuzzed)', () => {
    const segment = fc.constantFrom('..', '.', 'out', 'in', 'sub', '', 'x', 'e.sock', '..', 'out');
    const endpoint = fc.oneof(
      fc.array(segment, { maxLength: 6 }).map((parts) => parts.join('/')),
      fc.array(segment, { maxLength: 6 }).map((parts) => `/${parts.join('/')}`),
      fc.array(segment, { maxLength: 6 }).map((parts) => `${dir}/${parts.join('/')}`),
      fc.string(),
    );
    const realDir = realpathSync(dir);
    fc.assert(
      fc.property(endpoint, (e) => {
        const result = resolveEndpoint(e, socket, dir);
        if (typeof result !== 'string') return;
        assert.ok(result.startsWith(dir + sep) || result === socket, `${JSON.stringify(e)} → ${result}`);
        // Followed through the filesystem, as far as it exists, it is still inside.
        const real = realUpTo(result);
        assert.ok(real.startsWith(realDir + sep), `${JSON.stringify(e)} → ${real}`);
      }),
      { numRuns: 2_000 },
    );
  });
});

function realUpTo(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = join(path, '..');
    return parent === path ? path : join(realUpTo(parent), path.slice(path.lastIndexOf('/') + 1));
  }
}
