/**
 * Overlapping ranges of one network_name, served as whereabouts serves them (issue 37): two configs
 * whose ranges nest (a /24 and a /26 inside it) are both served, and no address is handed out twice
 * across them, whichever range is used first, on the SQLite store of one node and on the two-tier
 * store of two nodes (the MemoryTier; the Kubernetes tier is overlap-kube.test.ts). Before, the
 * second range was refused with INVALID_CONFIG ("range … overlaps range …").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Allocator } from '../../src/allocator/allocator.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';

const owner = (containerID: string, network = 'net') => ({ network, containerID, ifname: 'eth0' });
const ranges = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

function setup() {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  return { store, clock, allocator: new Allocator({ store, clock, node: 'n1' }) };
}

/** Every address `ipam` hands out to new owners `<prefix><i>` of network `network`, until it is full. */
async function fill(allocator: Allocator, ipam: Record<string, unknown>, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < 1_000; i++) {
    try {
      const [a] = await allocator.allocate({ owner: owner(`${prefix}${i}`, prefix), ranges: ranges(ipam) });
      out.push(a?.allocation.address ?? '');
    } catch (error) {
      if (isWarrenError(error, 'POOL_EXHAUSTED')) return out;
      throw error;
    }
  }
  throw new Error(`${prefix} never filled`);
}

/** The addresses `from`..`to` of 10.232.<third>.x. */
function span(third: number, from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => `10.232.${third}.${from + i}`);
}

const sorted = (addresses: readonly string[]) =>
  [...addresses].sort((a, b) => Number(a.split('.')[3]) - Number(b.split('.')[3]));

describe('Allocator: nested ranges of one network_name on one node (SQLite)', () => {
  for (const first of ['outer', 'inner'] as const) {
    it(`serves a /24 and a /26 inside it, the ${first} used first, each address once across both`, async () => {
      const { allocator, store } = setup();
      const outer = { range: '10.232.2.0/24', network_name: 'blue' };
      const inner = { range: '10.232.2.64/26', network_name: 'blue' };
      const [start] = await allocator.allocate({
        owner: owner('first', 'x'),
        ranges: ranges(first === 'outer' ? outer : inner),
      });
      const innerGot = await fill(allocator, inner, 'in');
      const outerGot = await fill(allocator, outer, 'out');
      const all = [start?.allocation.address ?? '', ...innerGot, ...outerGot];
      assert.equal(new Set(all).size, all.length, 'no address handed out twice');
      assert.deepEqual(sorted(all), span(2, 1, 254), 'every address of the /24, once');
      for (const a of innerGot) assert.ok(span(2, 65, 126).includes(a), `${a} is in the /26's span`);
      assert.equal((await store.list()).length, 254);
    });
  }

  it('answers a retried ADD of the inner range with the address it holds in the outer pool, and reports the inner prefix', async () => {
    const { allocator } = setup();
    await allocator.allocate({ owner: owner('o', 'wide'), ranges: ranges({ range: '10.232.3.0/24' }) });
    const narrow = ranges({ range: '10.232.3.0/25' });
    const [a] = await allocator.allocate({ owner: owner('n', 'narrow'), ranges: narrow });
    const [again] = await allocator.allocate({ owner: owner('n', 'narrow'), ranges: narrow });
    assert.equal(a?.allocation.pool, '10.232.3.0/24', 'served from the pool admitted first');
    assert.equal(a?.range.prefixLength, 25, 'the result carries the config’s own prefix');
    assert.equal(again?.allocation.address, a?.allocation.address);
    assert.equal(again?.fresh, false);
    assert.deepEqual(await allocator.held(owner('n', 'narrow')), [a?.allocation]);
  });

  it('carves the outer range around an inner one that holds addresses, into pools of their own', async () => {
    const { allocator, store } = setup();
    await allocator.allocate({ owner: owner('i', 'narrow'), ranges: ranges({ range: '10.232.4.64/26' }) });
    const outerGot = await fill(allocator, { range: '10.232.4.0/24' }, 'out');
    assert.equal(outerGot.length, 253);
    const pools = new Set((await store.list()).map((a) => a.pool));
    assert.deepEqual([...pools].sort(), ['10.232.4.0/26', '10.232.4.128/25', '10.232.4.64/26']);
  });

  it('carves the outer range around an inner pool that holds nothing now: a pool, once admitted, stays', async () => {
    const { allocator } = setup();
    const narrow = ranges({ range: '10.232.5.0/25' });
    await allocator.allocate({ owner: owner('a', 'narrow'), ranges: narrow });
    await allocator.release(owner('a', 'narrow'));
    const [wide] = await allocator.allocate({ owner: owner('b', 'wide'), ranges: ranges({ range: '10.232.5.0/24' }) });
    const [inner] = await allocator.allocate({ owner: owner('c', 'narrow'), ranges: narrow });
    assert.equal(wide?.allocation.pool, '10.232.5.0/25', 'the /24 is served from the /25 first, then its piece');
    assert.equal(inner?.allocation.pool, '10.232.5.0/25', 'the /25 keeps its own pool');
    assert.notEqual(inner?.allocation.address, wide?.allocation.address);
  });

  it('after a restart, keeps the pool a kept cover names though it drained, so a range around it never shares its addresses', async () => {
    const { store, clock } = setup();
    const inner = ranges({ range: '10.232.9.8/29', network_name: 'm' });
    const before = new Allocator({ store, clock, node: 'n1' });
    await before.allocate({ owner: owner('r0', 'inner'), ranges: inner });
    // A restart: what the old process admitted in memory is gone; the /29 holds an address.
    const allocator = new Allocator({ store, clock, node: 'n1' });
    await allocator.allocate({ owner: owner('r1', 'inner'), ranges: inner });
    await allocator.release(owner('r0', 'inner'));
    await allocator.release(owner('r1', 'inner'));
    // The /29 holds nothing now, and its cover is kept: the /27 must not be admitted whole over it.
    await allocator.allocate({
      owner: owner('s0', 'outer'),
      ranges: ranges({ range: '10.232.9.0/27', network_name: 'm' }),
    });
    const [again] = await allocator.allocate({ owner: owner('r2', 'inner'), ranges: inner });
    assert.equal(again?.allocation.pool, '10.232.9.8/29@m');
    await fill(allocator, { range: '10.232.9.0/27', network_name: 'm' }, 'outer');
    const all = (await store.list()).map((a) => a.address);
    assert.equal(new Set(all).size, all.length, `no address twice: ${all.join(' ')}`);
    assert.equal(all.length, 30, 'every address of the /27 once');
  });

  it('keeps a range with enable_overlapping_ranges false apart, as whereabouts does: its own pool, not checked', async () => {
    const { allocator } = setup();
    const [wide] = await allocator.allocate({ owner: owner('a', 'wide'), ranges: ranges({ range: '10.232.6.0/24' }) });
    const [apart] = await allocator.allocate({
      owner: owner('b', 'apart'),
      ranges: ranges({ range: '10.232.6.0/25', enable_overlapping_ranges: false }),
    });
    assert.equal(apart?.allocation.pool, '10.232.6.0/25@@');
    assert.equal(apart?.allocation.address, wide?.allocation.address, 'not checked against the /24');
    const [same] = await allocator.allocate({
      owner: owner('c', 'apart-too'),
      ranges: ranges({ range: '10.232.6.0/25', enable_overlapping_ranges: false }),
    });
    assert.notEqual(same?.allocation.address, apart?.allocation.address, 'one range kept apart is still one pool');
  });

  it('refuses, naming the pool, an attachment whose two ranges are served from one pool', async () => {
    const { allocator, store } = setup();
    await allocator.allocate({ owner: owner('a', 'wide'), ranges: ranges({ range: '10.232.7.0/24' }) });
    const two = ranges({ ipRanges: [{ range: '10.232.7.0/25' }, { range: '10.232.7.128/25' }] });
    await assert.rejects(
      allocator.allocate({ owner: owner('b', 'two'), ranges: two }),
      (e) =>
        isWarrenError(e, 'INVALID_CONFIG') &&
        /in pool 10\.232\.7\.0\/24, which also serves range 10\.232\.7\.128\/25/.test(e.message),
    );
    assert.deepEqual(await allocator.held(owner('b', 'two')), [], 'the first range’s address was released again');
    assert.equal((await store.list()).length, 1);
  });

  it('refuses an inner range served from a full outer pool with the figures of the pool', async () => {
    const { allocator } = setup();
    await fill(allocator, { range: '10.232.8.0/28' }, 'out');
    await assert.rejects(
      allocator.allocate({ owner: owner('n', 'narrow'), ranges: ranges({ range: '10.232.8.0/29' }) }),
      (e) =>
        isWarrenError(e, 'POOL_EXHAUSTED') &&
        /^pool 10\.232\.8\.0\/29 has no free address in any of the 1 pools .*pool 10\.232\.8\.0\/28 has no free address \(14 allocated/.test(
          e.message,
        ),
    );
  });
});
