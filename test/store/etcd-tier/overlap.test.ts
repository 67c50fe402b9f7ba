/**
 * Overlapping ranges of one network_name across nodes, on real etcd (issue 10, defect #1; issue 37:
 * nested ranges are served, not refused): an address is unique within a network_name whatever the
 * ranges of each node's configs say. Two
 * Allocators on two stores as `--store etcd` opens them (each node's SQLite file beside the etcd
 * tier, one prefix) act as two agents on two nodes; each admits a range on its own and caches that,
 * so only what the cluster keeps (admission records, the claims, and the guard every claim carries)
 * can keep them apart. What each node hands out is in its own file: both are looked at.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { rangePoolOfKey } from '../../../src/ipam/blocks.ts';
import { parsePoolKey } from '../../../src/ipam/pool-key.ts';
import type { EtcdTieredStore } from '../../../src/store/etcd-tier/tiered.ts';
import type { AddressSpaces } from '../../../src/store/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { openTieredOnEtcd } from '../../helpers/etcd-tiered.ts';

describe('etcd: overlapping ranges of one network_name on two nodes', () => {
  let etcd: EtcdCluster;
  let serial = 0;
  const stores: EtcdTieredStore[] = [];

  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    for (const s of stores) await s.close().catch(() => undefined);
    await etcd?.stop();
  });

  /** Two nodes on one fresh prefix, each with its own etcd client and allocator. */
  const twoNodes = async () => {
    serial += 1;
    const prefix = `/overlap-${serial}/`;
    const clock = new ManualClock(1_000_000);
    const node = async (name: string) => {
      const store = await openTieredOnEtcd({ endpoints: etcd.endpoints, prefix, node: name, clock });
      stores.push(store);
      return { store, allocator: new Allocator({ store, clock, node: name, blocks: true }) };
    };
    const n1 = await node('n1');
    const n2 = await node('n2');
    const all = async () => [...(await n1.store.list()), ...(await n2.store.list())];
    /** Gives back a node's empty blocks at once (the upkeep does after a grace). */
    const giveBack = async (allocator: Allocator) => {
      await allocator.returnEmptyBlocks(1_000);
      clock.advance(2_000);
      assert.notDeepEqual((await allocator.returnEmptyBlocks(1_000)).returned, [], 'an empty block was given back');
    };
    return { n1, n2, all, giveBack };
  };

  const ranges = (range: string, network_name?: string) =>
    parseIpamConfig({ type: 'warren', range, ...(network_name === undefined ? {} : { network_name }) }).ranges;
  const owner = (containerID: string, network = 'net') => ({ network, containerID, ifname: 'eth0' });
  /** No address is held twice within one network_name (an address space of its own). */
  const assertNoAddressTwice = (all: readonly Allocation[]) => {
    const seen = new Map<string, string>();
    for (const a of all) {
      const key = `${parsePoolKey(rangePoolOfKey(a.pool))?.networkName ?? ''} ${a.address}`;
      const earlier = seen.get(key);
      assert.equal(earlier, undefined, `${a.address} handed out twice: in ${earlier} and in ${a.pool}`);
      seen.set(key, a.pool);
    }
  };

  it('serves the range a second node uses inside the range the first node allocated in, from that range’s pool', async () => {
    const { n1, n2, all } = await twoNodes();
    const [a] = await n1.allocator.allocate({ owner: owner('a'), ranges: ranges('10.232.2.0/24') });
    assert.equal(a?.allocation.address, '10.232.2.1');
    const [b] = await n2.allocator.allocate({ owner: owner('b', 'other-conf'), ranges: ranges('10.232.2.0/25') });
    assert.equal(rangePoolOfKey(b?.allocation.pool ?? ''), '10.232.2.0/24');
    assert.notEqual(b?.allocation.address, a?.allocation.address);
    assertNoAddressTwice(await all());
  });

  it('of two nodes using nested ranges for the first time at once, serves both and hands out no address twice', async () => {
    const { n1, n2, all } = await twoNodes();
    // Each round is a fresh network_name, so both nodes meet an empty address space at once.
    for (let round = 0; round < 12; round++) {
      const name = `race-${round}`;
      const [wide, narrow] = round % 2 === 0 ? [n1, n2] : [n2, n1];
      const outcomes = await Promise.allSettled([
        wide.allocator.allocate({ owner: owner(`w${round}`), ranges: ranges('10.232.2.0/24', name) }),
        narrow.allocator.allocate({ owner: owner(`n${round}`), ranges: ranges('10.232.2.0/25', name) }),
      ]);
      const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [String(o.reason)] : []));
      assert.deepEqual(refused, [], `round ${round}: both nodes are served`);
    }
    assertNoAddressTwice(await all());
  });

  it('carves a range around a range another node drained, which keeps its pool, and hands out no address twice', async () => {
    const { n1, n2, all, giveBack } = await twoNodes();
    const wide = ranges('10.232.2.0/24');
    const narrow = ranges('10.232.2.0/25');
    // Node 2 admits the /25 and caches that; it drains and gives its empty block back.
    await n2.allocator.allocate({ owner: owner('a'), ranges: narrow });
    await n2.allocator.release(owner('a'));
    await giveBack(n2.allocator);
    // Node 1 uses the /24: the /25 stays admitted (a pool is never retired), the /24 is carved around it.
    const [b] = await n1.allocator.allocate({ owner: owner('b'), ranges: wide });
    assert.ok(b !== undefined);
    // Node 2's cached cover still stands: it is served from the /25's own pool.
    const [c] = await n2.allocator.allocate({ owner: owner('c'), ranges: narrow });
    assert.equal(rangePoolOfKey(c?.allocation.pool ?? ''), '10.232.2.0/25');
    assert.notEqual(c?.allocation.address, b?.allocation.address);
    assert.deepEqual([...(await n1.store.cluster.spaces.read('v4')).admitted].sort(), [
      '10.232.2.0/25',
      '10.232.2.128/25',
    ]);
    assertNoAddressTwice(await all());
  });

  it('carves a range around an inner range another node holds addresses in, and hands out no address twice', async () => {
    const { n1, n2, all } = await twoNodes();
    await n2.allocator.allocate({ owner: owner('a'), ranges: ranges('10.232.2.64/26') });
    const got: string[] = [];
    for (let i = 0; i < 40; i++) {
      const [x] = await n1.allocator.allocate({ owner: owner(`w${i}`), ranges: ranges('10.232.2.0/24') });
      got.push(x?.allocation.address ?? '');
    }
    const admitted = (await n1.store.cluster.spaces.read('v4')).admitted;
    assert.deepEqual([...admitted].sort(), ['10.232.2.0/26', '10.232.2.128/25', '10.232.2.64/26']);
    assertNoAddressTwice(await all());
  });

  it('admits ranges that do not overlap, or overlap in another network_name, side by side on two nodes', async () => {
    const { n1, n2, all } = await twoNodes();
    await n1.allocator.allocate({ owner: owner('a'), ranges: ranges('10.232.2.0/25') });
    await n2.allocator.allocate({ owner: owner('b'), ranges: ranges('10.232.2.128/25') });
    await n1.allocator.allocate({ owner: owner('c', 'red'), ranges: ranges('10.232.2.0/24', 'red') });
    // Both /25s keep serving: neither admission retired the other.
    await n1.allocator.allocate({ owner: owner('d'), ranges: ranges('10.232.2.0/25') });
    await n2.allocator.allocate({ owner: owner('e'), ranges: ranges('10.232.2.128/25') });
    assert.equal((await all()).length, 5);
  });

  it('does not admit a range on a reading older than a write to a block of the range it would retire', async () => {
    const { n1, n2 } = await twoNodes();
    const spaces = n2.store.cluster.spaces as AddressSpaces;
    await n1.allocator.allocate({ owner: owner('a'), ranges: ranges('10.232.2.0/24') });
    await n1.allocator.release(owner('a'));
    const reading = await spaces.read('v4');
    assert.deepEqual(reading.admitted, ['10.232.2.0/24']);
    // After the reading, node 1 allocates again, in a block it had not used: a key the reading never saw.
    const requested = { family: 4 as const, value: 0x0ae802c8n }; // 10.232.2.200
    await n1.allocator.allocate({ owner: owner('b'), ranges: ranges('10.232.2.0/24'), requested: [requested] });
    assert.equal(await spaces.admit(reading, '10.232.2.0/25', ['10.232.2.0/24']), undefined);
    assert.deepEqual((await spaces.read('v4')).admitted, ['10.232.2.0/24'], 'the /24 stays admitted');
  });
});
