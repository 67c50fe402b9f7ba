/**
 * Fuzzed plugin input, in process: random environments and stdin (valid-looking configs, broken
 * JSON, hostile container IDs) never crash the plugin; every failure is a CNI error object with a
 * spec or Warren code; a DEL that cannot reach the agent lands in the journal under a safe name.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { runPlugin } from '../../src/plugin/plugin.ts';
import { MAX_CONFIG_DEPTH } from '../../src/api/limits.ts';
import { decodeEntry } from '../../src/cni/journal-entry.ts';
import { readFileSync } from 'node:fs';
import { tempDir } from '../helpers/processes.ts';

const CODES = new Set([1, 2, 3, 4, 5, 6, 7, 11, 50, 100, 101, 102, 103]);

const containerID = fc.oneof(
  fc.constantFrom('abc123', 'a'.repeat(255), 'a'.repeat(256), '../x', '..', 'a/b', 'a\0b', '', ' sp', 'ok.id-1_2'),
  fc.string({ maxLength: 300 }),
);
const ifname = fc.oneof(
  fc.constantFrom('eth0', 'net1', '', '../x', 'a/b', 'x'.repeat(16), 'e\0'),
  fc.string({ maxLength: 20 }),
);
const command = fc.constantFrom('ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION', 'BOGUS', '', 'add');
const ipam = fc.record(
  {
    type: fc.constant('warren'),
    range: fc.constantFrom('10.9.0.0/24', 'fd00::/64', '10.9.0.5/24', 'nope', '10.9.0.10-10.9.0.20/24'),
    range_start: fc.constantFrom('10.9.0.5', 'fd00::5', 'x'),
    exclude: fc.array(fc.constantFrom('10.9.0.0/28', 'fd00::/120', 7), { maxLength: 2 }),
    gateway: fc.constantFrom('10.9.0.1', '10.10.0.1'),
    unknown_key: fc.jsonValue(),
  },
  { requiredKeys: ['type'] },
);
const config = fc.record(
  {
    cniVersion: fc.constantFrom('0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0', '0.2.0', '9.9.9'),
    name: fc.constantFrom('net', 'bad name', '', 'n.e-t_1'),
    ipam,
    runtimeConfig: fc.record({ ips: fc.array(fc.constantFrom('10.9.0.7/24', 'fd00::7', 'junk'), { maxLength: 2 }) }),
    'cni.dev/valid-attachments': fc.array(fc.record({ containerID: fc.string(), ifname: fc.string() }), {
      maxLength: 2,
    }),
  },
  { requiredKeys: ['cniVersion', 'name', 'ipam'] },
);
/** A config with arrays or objects nested around and past the plugin's depth limit. */
const deep = fc
  .tuple(config, fc.integer({ min: MAX_CONFIG_DEPTH - 10, max: 50_000 }), fc.boolean())
  .map(
    ([c, depth, arrays]) =>
      `${JSON.stringify(c).slice(0, -1)},"x":${arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`}}`,
  );
const stdin = fc.oneof(
  config.map((c) => JSON.stringify(c)),
  deep,
  fc.string({ maxLength: 200 }),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  config.map((c) => JSON.stringify(c).slice(0, 40)),
);

describe('plugin fuzz', () => {
  it('answers every input with a CNI outcome and never throws', async () => {
    const journal = join(tempDir(), 'journal');
    const socket = join(tempDir(), 'no-agent.sock');
    await fc.assert(
      fc.asyncProperty(
        command,
        containerID,
        ifname,
        fc.constantFrom('/var/run/netns/x', '', undefined),
        fc.string({ maxLength: 60 }),
        stdin,
        async (cmd, id, ifn, netns, args, input) => {
          const env: NodeJS.ProcessEnv = {
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: id,
            CNI_IFNAME: ifn,
            CNI_ARGS: args,
            WARREN_SOCKET: socket,
            WARREN_JOURNAL_DIR: journal,
          };
          if (netns !== undefined) env.CNI_NETNS = netns;
          let out = '';
          const code = await runPlugin({ env, stdin: async () => input, write: (t) => (out += t) });
          assert.ok(code === 0 || code === 1);
          if (code === 1) {
            const error = JSON.parse(out) as { code: number; msg: string; cniVersion: string };
            assert.ok(CODES.has(error.code), `unknown code ${error.code}`);
            assert.equal(typeof error.msg, 'string');
            assert.ok(error.msg.length > 0);
          } else if (cmd === 'VERSION') {
            assert.ok(Array.isArray(JSON.parse(out).supportedVersions));
          } else {
            // Without an agent only DEL can succeed, by journaling.
            assert.equal(cmd, 'DEL', `${cmd} succeeded without an agent: ${out}`);
          }
        },
      ),
      { numRuns: 400 },
    );
    for (const name of (existsSync(journal) ? readdirSync(journal) : []).filter(
      (n) => !n.startsWith('.') && n !== 'rejected',
    )) {
      assert.equal(
        decodeEntry(name, readFileSync(join(journal, name), 'utf8')).kind,
        'entry',
        `${name} is a valid intent`,
      );
    }
  });

  it('journals a valid DEL when the agent is unreachable', async () => {
    const journal = join(tempDir(), 'journal');
    let out = '';
    const code = await runPlugin({
      env: {
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: 'c1',
        CNI_IFNAME: 'eth0',
        WARREN_SOCKET: '/nonexistent/w.sock',
        WARREN_JOURNAL_DIR: journal,
      },
      stdin: async () =>
        JSON.stringify({ cniVersion: '1.0.0', name: 'n', ipam: { type: 'warren', range: '10.9.0.0/24' } }),
      write: (t) => (out += t),
    });
    assert.equal(code, 0, out);
    assert.equal(readdirSync(journal).filter((n) => n.endsWith('.release')).length, 1);
  });

  const nested = (top: Record<string, unknown>, depth: number): string =>
    `${JSON.stringify(top).slice(0, -1)},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`;
  const deepEnv = (command: string, journal: string): NodeJS.ProcessEnv => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'deep1',
    CNI_IFNAME: 'eth0',
    CNI_NETNS: '/var/run/netns/x',
    WARREN_SOCKET: '/nonexistent/w.sock',
    WARREN_JOURNAL_DIR: journal,
  });

  it('journals a DEL whose config is nested 100000 levels deep instead of overflowing the stack', async () => {
    const journal = join(tempDir(), 'journal');
    let out = '';
    const stdin = nested(
      { cniVersion: '1.0.0', name: 'deepnet', ipam: { type: 'warren', range: '10.9.0.0/24' } },
      100_000,
    );
    const code = await runPlugin({ env: deepEnv('DEL', journal), stdin: async () => stdin, write: (t) => (out += t) });
    assert.equal(code, 0, out);
    const [name] = readdirSync(journal).filter((n) => n.endsWith('.release'));
    assert.ok(name !== undefined);
    const decoded = decodeEntry(name, readFileSync(join(journal, name), 'utf8'));
    assert.equal(decoded.kind, 'entry');
    if (decoded.kind === 'entry') {
      assert.deepEqual(
        [decoded.entry.network, decoded.entry.containerID, decoded.entry.ifname],
        ['deepnet', 'deep1', 'eth0'],
      );
      assert.match(decoded.entry.reason, /levels deep/);
    }
  });

  it('answers a deeply nested DEL whose top-level name is unusable with code 7, not a stack overflow', async () => {
    for (const name of [undefined, 'bad name', ['x']]) {
      const journal = join(tempDir(), 'journal');
      let out = '';
      const stdin = nested(
        { cniVersion: '1.0.0', ...(name === undefined ? {} : { name }), ipam: { type: 'warren' } },
        100_000,
      );
      const code = await runPlugin({
        env: deepEnv('DEL', journal),
        stdin: async () => stdin,
        write: (t) => (out += t),
      });
      assert.equal(code, 1);
      const error = JSON.parse(out) as { code: number; msg: string };
      assert.equal(error.code, 7, out);
      assert.match(error.msg, /levels deep, and its name/);
      assert.equal(existsSync(journal), false);
    }
  });

  it('answers every other command with a deeply nested config with code 7 naming the nesting', async () => {
    const stdin = nested({ cniVersion: '1.1.0', name: 'deepnet', ipam: { type: 'warren' } }, 100_000);
    for (const command of ['ADD', 'CHECK', 'GC', 'STATUS']) {
      let out = '';
      const code = await runPlugin({
        env: deepEnv(command, join(tempDir(), 'journal')),
        stdin: async () => stdin,
        write: (t) => (out += t),
      });
      assert.equal(code, 1, command);
      assert.equal(JSON.parse(out).code, 7, out);
      assert.match(JSON.parse(out).msg, new RegExp(`more than ${MAX_CONFIG_DEPTH} levels deep`));
    }
  });
});
