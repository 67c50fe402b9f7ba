/**
 * The agent's CNI service in process, over an in-memory SQLite store and a manual clock: what it
 * says about whereabouts' own keys, which allocations a GC may take, and that it refuses the CNI
 * variables exactly as the plugin does.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { parseCniEnv } from '../../../src/cni/args.ts';
import { toCniError } from '../../../src/api/errors.ts';

function setup(gcGraceMs = 60_000) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const ignored: Array<{ network: string; keys: readonly string[] }> = [];
  const service = new CniService({
    allocator,
    readiness: async () => undefined,
    clock,
    gcGraceMs,
    onIgnoredKeys: (network, keys) => ignored.push({ network, keys }),
  });
  return { clock, store, service, ignored };
}

const config = (ipam: Record<string, unknown> = {}, version = '1.1.0') => ({
  cniVersion: version,
  name: 'wnet',
  ipam: { type: 'warren', range: '10.240.0.0/24', ...ipam },
});
const add = (service: CniService, containerID: string, cfg = config()) =>
  service.handle({ command: 'ADD', containerID, netns: '/var/run/netns/x', ifname: 'eth0', config: cfg });

describe('CniService', () => {
  it('reports whereabouts keys it ignores once per network, not on every call', async () => {
    const { service, ignored } = setup();
    const cfg = config({ etcd_host: 'https://etcd:2379', datastore: 'etcd' });
    for (const id of ['a', 'b', 'c']) assert.equal((await add(service, id, cfg)).kind, 'result');
    assert.equal(ignored.length, 1);
    assert.equal(ignored[0]?.network, 'wnet');
    assert.ok(ignored[0]?.keys.some((k) => k.startsWith('ipam.etcd_host')));
    assert.ok(ignored[0]?.keys.some((k) => k.startsWith('ipam.datastore')));
  });

  it('GC spares an allocation younger than the grace and takes it once older', async () => {
    const { clock, store, service } = setup(60_000);
    assert.equal((await add(service, 'young')).kind, 'result');
    const gc = () => service.handle({ command: 'GC', config: { ...config(), 'cni.dev/valid-attachments': [] } });
    assert.equal((await gc()).kind, 'silent');
    assert.equal(
      (await store.list()).length,
      1,
      'the runtime may have listed its attachments before this ADD committed',
    );
    clock.advance(60_001);
    assert.equal((await gc()).kind, 'silent');
    assert.deepEqual(await store.list(), []);
  });

  it('refuses the CNI variables with the code and message the plugin gives for the same environment', async () => {
    const { service } = setup();
    const cases: Array<Record<string, string | undefined>> = [
      { CNI_COMMAND: undefined },
      { CNI_COMMAND: '' },
      { CNI_COMMAND: 'add' },
      { CNI_CONTAINERID: undefined },
      { CNI_CONTAINERID: '../../etc/passwd' },
      { CNI_CONTAINERID: 'a'.repeat(256) },
      { CNI_CONTAINERID: 'ok\u001b[2J' },
      { CNI_IFNAME: '' },
      { CNI_IFNAME: 'x'.repeat(16) },
      { CNI_IFNAME: '..' },
      { CNI_NETNS: undefined },
    ];
    for (const change of cases) {
      const env: Record<string, string | undefined> = {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'c1',
        CNI_IFNAME: 'eth0',
        CNI_NETNS: '/var/run/netns/c1',
        ...change,
      };
      let plugin: unknown;
      try {
        parseCniEnv(env);
        assert.fail(`the plugin took ${JSON.stringify(change)}`);
      } catch (error) {
        plugin = toCniError(error, '1.1.0');
      }
      const request = {
        ...(env.CNI_COMMAND === undefined ? {} : { command: env.CNI_COMMAND }),
        ...(env.CNI_CONTAINERID === undefined ? {} : { containerID: env.CNI_CONTAINERID }),
        ...(env.CNI_IFNAME === undefined ? {} : { ifname: env.CNI_IFNAME }),
        ...(env.CNI_NETNS === undefined ? {} : { netns: env.CNI_NETNS }),
        config: config(),
      };
      // A missing command is a missing field on the wire: the request is malformed, not the env.
      if (env.CNI_COMMAND === undefined) {
        assert.deepEqual(await service.handle(request as never), {
          kind: 'error',
          output: { cniVersion: '1.1.0', code: 7, msg: 'request field command must be a string' },
        });
        continue;
      }
      assert.deepEqual(
        await service.handle(request as never),
        { kind: 'error', output: plugin },
        JSON.stringify(change),
      );
    }
  });
});
