/**
 * The agent's CNI handler in process, over an in-memory SQLite store and a manual clock: what it
 * says about whereabouts' own keys, and which allocations a GC may take.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { CniHandler } from '../../src/cni/handler.ts';
import { Allocator } from '../../src/store/allocator.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';

function setup(gcGraceMs = 60_000) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const ignored: Array<{ network: string; keys: readonly string[] }> = [];
  const handler = new CniHandler({ allocator, readiness: async () => undefined, clock, gcGraceMs, onIgnoredKeys: (network, keys) => ignored.push({ network, keys }) });
  return { clock, store, handler, ignored };
}

const config = (ipam: Record<string, unknown> = {}, version = '1.1.0') => ({ cniVersion: version, name: 'wnet', ipam: { type: 'warren', range: '10.240.0.0/24', ...ipam } });
const add = (handler: CniHandler, containerID: string, cfg = config()) => handler.handle({ command: 'ADD', containerID, netns: '/var/run/netns/x', ifname: 'eth0', config: cfg });

describe('CniHandler', () => {
  it('reports whereabouts keys it ignores once per network, not on every call', async () => {
    const { handler, ignored } = setup();
    const cfg = config({ etcd_host: 'https://etcd:2379', datastore: 'etcd' });
    for (const id of ['a', 'b', 'c']) assert.equal((await add(handler, id, cfg)).kind, 'result');
    assert.equal(ignored.length, 1);
    assert.equal(ignored[0]?.network, 'wnet');
    assert.ok(ignored[0]?.keys.some((k) => k.startsWith('ipam.etcd_host')));
    assert.ok(ignored[0]?.keys.some((k) => k.startsWith('ipam.datastore')));
  });

  it('GC spares an allocation younger than the grace and takes it once older', async () => {
    const { clock, store, handler } = setup(60_000);
    assert.equal((await add(handler, 'young')).kind, 'result');
    const gc = () => handler.handle({ command: 'GC', config: { ...config(), 'cni.dev/valid-attachments': [] } });
    assert.equal((await gc()).kind, 'silent');
    assert.equal((await store.list()).length, 1, 'the runtime may have listed its attachments before this ADD committed');
    clock.advance(60_001);
    assert.equal((await gc()).kind, 'silent');
    assert.deepEqual(await store.list(), []);
  });
});
