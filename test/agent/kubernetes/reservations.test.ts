/**
 * ClusterReservations (src/agent/kubernetes/reservations.ts) on a manual clock over a real SQLite
 * store: the watch fills the allocator's reservations, a status-only change is no change, and each
 * node writes its own entry of what it still holds only when the object does not show it already.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { ClusterReservations, type NodeInUse } from '../../../src/agent/kubernetes/reservations.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { parseIP } from '../../../src/ipam/address.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { ReservedAddresses } from '../../../src/ipam/reserved.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { flush } from '../../helpers/event-loop.ts';

const NODE = 'n1';
const allocation = (address: string, containerID: string, o: Partial<Allocation> = {}): Allocation => ({
  pool: 'net/10.0.0.0/24',
  address,
  network: 'net',
  containerID,
  ifname: 'eth0',
  node: NODE,
  createdAt: 1,
  ...o,
});

const object = (name: string, addresses: string[], inUse?: Record<string, NodeInUse>) => ({
  metadata: { name, resourceVersion: '1' },
  spec: { addresses },
  ...(inUse === undefined ? {} : { status: { inUse } }),
});

async function setup(held: Allocation[] = []) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  for (const a of held) {
    const read = await store.readLedger(a.pool);
    await store.commit(a.pool, read.revision, [{ op: 'allocate', allocation: a }]);
  }
  let lists = 0;
  const counted = {
    list: (filter?: Parameters<SqliteStore['list']>[0]) => {
      lists += 1;
      return store.list(filter);
    },
  };
  const writes: Array<[string, NodeInUse | null]> = [];
  let failNext = false;
  const reserved = new ReservedAddresses();
  const cluster = new ClusterReservations({
    reserved,
    store: counted,
    node: NODE,
    clock,
    logger: pino({ level: 'silent' }),
    writer: {
      write: async (name, entry) => {
        if (failNext) {
          failNext = false;
          throw new Error('the API server is away');
        }
        writes.push([name, entry]);
        return 'written';
      },
    },
    intervalMs: 30_000,
    settleMs: 2_000,
  });
  return {
    clock,
    store,
    reserved,
    cluster,
    writes,
    lists: () => lists,
    failOnce: () => {
      failNext = true;
    },
  };
}

describe('ClusterReservations', () => {
  it('fills the reservations from the watch; a change of status only is no change', async () => {
    const { cluster, reserved, clock, lists } = await setup();
    cluster.observe({ kind: 'listed', objects: [object('a', ['10.0.0.5']), { metadata: {} }] });
    assert.equal(reserved.covering(parseIP('10.0.0.5') as never)?.name, 'a');
    const version = reserved.version;
    cluster.observe({ kind: 'modified', object: object('a', ['10.0.0.5'], { n2: { count: 0, addresses: [] } }) });
    assert.equal(reserved.version, version, 'the allocator sees nothing new');
    cluster.observe({ kind: 'deleted', object: object('a', ['10.0.0.5']) });
    assert.equal(reserved.empty, true, 'a reservation deleted frees its addresses at once');
    await cluster.look();
    assert.equal(lists(), 0, 'nothing is read while nothing is reserved');
    clock.advance(60_000);
  });

  it("writes this node's entry of what it holds (placeholders aside) once, and removes it after the release", async () => {
    const held = [
      allocation('10.0.0.5', 'c5', { podNamespace: 'ns', podName: 'web-0' }),
      allocation('10.0.0.6', 'c6'),
      allocation('10.0.0.7', 'lent', { network: 'warren.dev/lent' }),
    ];
    const { cluster, clock, writes, store } = await setup(held);
    cluster.observe({
      kind: 'listed',
      objects: [object('r', ['10.0.0.5', '10.0.0.7']), object('q', ['10.1.0.0/16'])],
    });
    assert.deepEqual(writes, [], 'not before the settle time');
    clock.advance(2_000);
    await flush(3);
    assert.deepEqual(writes, [
      ['r', { count: 1, addresses: [{ address: '10.0.0.5', pod: 'ns/web-0', containerID: 'c5', network: 'net' }] }],
    ]);
    assert.equal(cluster.status().inUseHere, 1);
    await cluster.look();
    assert.equal(writes.length, 1, 'written once: not again before the watch shows it');
    cluster.observe({
      kind: 'modified',
      object: object('r', ['10.0.0.5', '10.0.0.7'], { [NODE]: writes[0]?.[1] as unknown as NodeInUse }),
    });
    await cluster.look();
    assert.equal(writes.length, 1, 'nor once the object shows it');
    cluster.released([allocation('10.0.0.6', 'c6')]);
    assert.equal(clock.pendingTimers, 0, 'an address nobody reserved calls for no look');
    const pool = (await store.readLedger('net/10.0.0.0/24')).revision;
    await store.commit('net/10.0.0.0/24', pool, [{ op: 'release', address: '10.0.0.5' }]);
    cluster.released([allocation('10.0.0.5', 'c5')]);
    assert.equal(clock.pendingTimers, 1, 'a reserved one does');
    clock.advance(2_000);
    await flush(3);
    assert.deepEqual(writes[1], ['r', null], 'nothing in use here: the entry is removed');
  });

  it('tries a failed write again at the next look, and says why meanwhile', async () => {
    const { cluster, writes, failOnce } = await setup([allocation('10.0.0.5', 'c5')]);
    cluster.observe({ kind: 'listed', objects: [object('r', ['10.0.0.5'])] });
    failOnce();
    await assert.rejects(cluster.look(), /the API server is away/);
    assert.equal(cluster.status().statusWrites, 0);
    await cluster.look();
    assert.equal(writes.length, 1);
    assert.equal(cluster.status().lastError, undefined);
  });

  it('reports entries that are neither addresses nor CIDRs', async () => {
    const { cluster } = await setup();
    cluster.observe({ kind: 'listed', objects: [object('r', ['10.0.0.5', 'ten.zero'])] });
    assert.deepEqual(cluster.status().malformed, ['r: ten.zero']);
  });
});
