/**
 * Blocks with node affinity: several allocators (one per node) on one store. The block logic lives
 * in the allocator and is store-agnostic, so it is exercised here on a SQLite file quickly and with
 * an injected clock; test/e2e/cluster.test.ts runs the same through agents on a real etcd cluster.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseIP } from '../../src/ipam/address.ts';
import { type Block, blockAt, blockOfKey, firstUnclaimedBlock } from '../../src/ipam/blocks.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { capacityOf } from '../../src/ipam/range.ts';
import { Allocator, attachmentKey } from '../../src/allocator/allocator.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';
import { tempDir } from '../helpers/processes.ts';

const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const rangesOf = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

function cluster(
  nodes: number,
  clock = new ManualClock(1_000_000),
  store: Store = new SqliteStore({ path: join(tempDir(), 'w.db') }),
) {
  const allocators = Array.from(
    { length: nodes },
    (_, i) => new Allocator({ store, clock, node: `n${i + 1}`, blocks: true }),
  );
  return { store, clock, allocators };
}

function addressValue(text: string): bigint {
  const ip = parseIP(text);
  assert.ok(ip);
  return ip.value;
}

describe('block math', () => {
  it('clips edge blocks to range_start/range_end and skips fully excluded blocks', () => {
    const [range] = rangesOf({
      range: '10.0.0.0/24',
      range_start: '10.0.0.10',
      range_end: '10.0.0.100',
      exclude: ['10.0.0.16/28'],
      block_size: 28,
    });
    assert.ok(range);
    const first = firstUnclaimedBlock(range, []);
    assert.equal(first?.cidr, '10.0.0.0/28');
    assert.equal(first?.span.first, addressValue('10.0.0.10'));
    assert.equal(first?.span.last, addressValue('10.0.0.15'));
    // 10.0.0.16/28 is wholly excluded: the next free block after the first is 10.0.0.32/28.
    assert.equal(firstUnclaimedBlock(range, [first])?.cidr, '10.0.0.32/28');
    const last = blockAt(range, addressValue('10.0.0.99'));
    assert.equal(last.cidr, '10.0.0.96/28');
    assert.equal(last.span.last, addressValue('10.0.0.100'));
    assert.equal(blockOfKey(range, last.key)?.key, last.key);
    assert.equal(blockOfKey(range, `${range.pool}#10.0.0.97/28`), undefined, 'not a block boundary');
    assert.equal(blockOfKey(range, `${range.pool}#10.0.0.0/27`), undefined, 'another block size');
  });

  it('finds a free block in a /64 without walking its blocks', () => {
    const [range] = rangesOf({ range: 'fd00::/64', exclude: ['fd00::/80'] });
    assert.ok(range);
    assert.equal(range.blockPrefix, 122);
    assert.equal(firstUnclaimedBlock(range, [])?.cidr, 'fd00::1:0:0:0/122');
  });

  it('tiles every allocatable address into exactly one block (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 30 }),
        fc.integer({ min: 1, max: 254 }),
        fc.integer({ min: 1, max: 254 }),
        (blockSize, a, b) => {
          const [lo, hi] = a <= b ? [a, b] : [b, a];
          const [range] = rangesOf({
            range: '10.9.0.0/24',
            range_start: `10.9.0.${lo}`,
            range_end: `10.9.0.${hi}`,
            block_size: blockSize,
          });
          if (range === undefined) return;
          const claimed: Block[] = [];
          let total = 0n;
          for (
            let block = firstUnclaimedBlock(range, claimed);
            block !== undefined;
            block = firstUnclaimedBlock(range, claimed)
          ) {
            claimed.push(block);
            total += capacityOf(block.span);
            assert.ok(claimed.length <= 256);
          }
          assert.equal(total, capacityOf(range));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('Allocator with blocks', () => {
  it('gives each node addresses from its own block', async () => {
    const { store, allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.1.0.0/24', block_size: 28 });
    const a1 = await n1.allocate({ owner: owner('a1'), ranges: r });
    const a2 = await n1.allocate({ owner: owner('a2'), ranges: r });
    const b1 = await n2.allocate({ owner: owner('b1'), ranges: r });
    assert.equal(a1[0]?.allocation.pool, `${r[0]?.pool}#10.1.0.0/28`);
    assert.equal(a2[0]?.allocation.pool, a1[0]?.allocation.pool);
    assert.equal(b1[0]?.allocation.pool, `${r[0]?.pool}#10.1.0.16/28`);
    const blocks = await store.pools(`${r[0]?.pool}#`);
    assert.deepEqual(
      blocks.map((p) => [p.pool.split('#')[1], p.affinity, p.allocated]),
      [
        ['10.1.0.0/28', 'n1', 2],
        ['10.1.0.16/28', 'n2', 1],
      ],
    );
    assert.deepEqual((await store.list({ rangePool: r[0]?.pool })).map((a) => a.address).sort(), [
      '10.1.0.1',
      '10.1.0.16',
      '10.1.0.2',
    ]);
  });

  it('returns the same address when a retried ADD reaches another node', async () => {
    const { allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.2.0.0/24', block_size: 28 });
    const first = await n1.allocate({ owner: owner('x'), ranges: r });
    const retry = await n2.allocate({ owner: owner('x'), ranges: r });
    assert.equal(retry[0]?.allocation.address, first[0]?.allocation.address);
    assert.equal(retry[0]?.fresh, false);
  });

  it('serves a pool with fewer blocks than nodes until it is truly full, borrowing, then reports exhaustion', async () => {
    const { store, allocators } = cluster(3);
    const r = rangesOf({ range: '10.3.0.0/28', block_size: 29 }); // two blocks, .1-.7 and .8-.14
    const results = await Promise.allSettled(
      Array.from({ length: 18 }, (_, i) =>
        (allocators[i % 3] as Allocator).allocate({ owner: owner(`c${i}`), ranges: r }),
      ),
    );
    const ok = results.flatMap((x) => (x.status === 'fulfilled' ? [x.value[0]?.allocation] : []));
    const failed = results.flatMap((x) => (x.status === 'rejected' ? [x.reason] : []));
    assert.equal(ok.length, 14);
    assert.equal(new Set(ok.map((a) => a?.address)).size, 14);
    assert.equal(failed.length, 4);
    for (const error of failed) assert.ok(isWarrenError(error, 'POOL_EXHAUSTED'), String(error));
    assert.ok(
      ok.some((a) => a?.node === 'n3'),
      'the node without a block borrowed',
    );
    const affinities = (await store.pools(`${r[0]?.pool}#`)).map((p) => p.affinity);
    assert.equal(affinities.filter((x) => x === 'n3').length, 0);
  });

  it('never hands one address to two containers when nodes race (many interleavings)', async () => {
    const { store, allocators } = cluster(3);
    const r = rangesOf({ range: '10.4.0.0/25', range_start: '10.4.0.5', exclude: ['10.4.0.40/29'], block_size: 28 });
    const capacity = Number(capacityOf(r[0] as never));
    const results = await Promise.allSettled(
      Array.from({ length: capacity + 6 }, (_, i) =>
        (allocators[(i * 7) % 3] as Allocator).allocate({ owner: owner(`r${i}`), ranges: r }),
      ),
    );
    const ok = results.flatMap((x) => (x.status === 'fulfilled' ? [x.value[0]?.allocation.address as string] : []));
    assert.equal(ok.length, capacity);
    assert.equal(new Set(ok).size, capacity);
    for (const address of ok) {
      const v = addressValue(address);
      assert.ok(v >= addressValue('10.4.0.5') && v <= addressValue('10.4.0.126'));
      assert.ok(v < addressValue('10.4.0.40') || v > addressValue('10.4.0.47'), `${address} is excluded`);
    }
    assert.equal((await store.list({ rangePool: r[0]?.pool })).length, capacity);
  });

  it("honours a requested address in another node's block", async () => {
    const { allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.5.0.0/24', block_size: 28 });
    await n1.allocate({ owner: owner('a'), ranges: r });
    const got = await n2.allocate({ owner: owner('b'), ranges: r, requested: [parseIP('10.5.0.9') as never] });
    assert.equal(got[0]?.allocation.address, '10.5.0.9');
    await assert.rejects(
      n2.allocate({ owner: owner('c'), ranges: r, requested: [parseIP('10.5.0.9') as never] }),
      (e: unknown) => isWarrenError(e, 'ADDRESS_UNAVAILABLE'),
    );
  });

  it('gives an empty block back only after the grace period, and not while it holds an address', async () => {
    const { store, clock, allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.6.0.0/24', block_size: 28 });
    await n1.allocate({ owner: owner('a'), ranges: r });
    assert.deepEqual((await n1.returnEmptyBlocks(60_000)).returned, [], 'held');
    await n1.release(owner('a'));
    assert.deepEqual((await n1.returnEmptyBlocks(60_000)).returned, [], 'empty, grace starts');
    clock.advance(59_999);
    assert.deepEqual((await n1.returnEmptyBlocks(60_000)).returned, []);
    clock.advance(1);
    assert.deepEqual((await n1.returnEmptyBlocks(60_000)).returned, [`${r[0]?.pool}#10.6.0.0/28`]);
    assert.deepEqual(
      (await store.pools(`${r[0]?.pool}#`)).map((p) => p.affinity),
      [undefined],
    );
    // The returned block is the lowest free one again: the next node to need a block claims it.
    const b = await n2.allocate({ owner: owner('b'), ranges: r });
    assert.equal(b[0]?.allocation.pool, `${r[0]?.pool}#10.6.0.0/28`);
    // n1 finds out its cached block is gone and claims another.
    const c = await n1.allocate({ owner: owner('c'), ranges: r });
    assert.equal(c[0]?.allocation.pool, `${r[0]?.pool}#10.6.0.16/28`);
  });

  it('refuses a config that splits a range differently from the store', async () => {
    const { allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    await n1.allocate({ owner: owner('a'), ranges: rangesOf({ range: '10.7.0.0/24', block_size: 28 }) });
    for (const node of [n1, n2]) {
      await assert.rejects(
        node.allocate({ owner: owner('b'), ranges: rangesOf({ range: '10.7.0.0/24', block_size: 27 }) }),
        (e: unknown) => isWarrenError(e, 'INVALID_CONFIG') && /split into \/28 blocks/.test(e.message),
      );
    }
  });

  it("lets CNI GC on one node release only that node's allocations", async () => {
    const { store, allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.9.0.0/24', block_size: 28 });
    await n1.allocate({ owner: owner('a'), ranges: r });
    await n1.allocate({ owner: owner('stale-on-n1'), ranges: r });
    await n2.allocate({ owner: owner('b'), ranges: r });
    const outcome = await n1.gc('net', new Set([attachmentKey('a', 'eth0')]));
    assert.deepEqual(
      outcome.released.map((a) => a.containerID),
      ['stale-on-n1'],
    );
    assert.deepEqual((await store.list()).map((a) => a.containerID).sort(), ['a', 'b']);
  });

  it('forgets a node: its allocations are released and its blocks freed, borrowed addresses stay', async () => {
    const { store, allocators } = cluster(2);
    const [n1, n2] = allocators as [Allocator, Allocator];
    const r = rangesOf({ range: '10.8.0.0/28', block_size: 28 });
    await n1.allocate({ owner: owner('a'), ranges: r });
    await n2.allocate({ owner: owner('b'), ranges: r }); // borrows from n1's only block
    const outcome = await n2.forgetNode('n1');
    assert.deepEqual(
      outcome.released.map((a) => a.containerID),
      ['a'],
    );
    assert.equal(outcome.blocks.length, 1);
    assert.deepEqual(
      (await store.list()).map((a) => [a.containerID, a.node]),
      [['b', 'n2']],
    );
    assert.deepEqual(
      (await store.pools(`${r[0]?.pool}#`)).map((p) => p.affinity),
      [undefined],
    );
  });
});
