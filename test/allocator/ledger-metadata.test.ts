/**
 * Operator metadata (a pool's description and its cooldown attribute) is written when a pool or
 * block is first used and when its config changes, not on every ADD; a release whose caller has no
 * config (a journaled DEL, a runtime event) rests the address for the pool's cooldown attribute,
 * without reading descriptions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { Allocator } from '../../src/allocator/allocator.ts';
import { ForwardingStore } from '../../src/store/forwarding-store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp, Revision, Store } from '../../src/store/store.ts';
import { tieredStore } from '../store/tiered/nodes.ts';

/**
 * SQLite in memory (or `inner`: the two-tier store for blocks), recording the metadata ops of every
 * commit and counting pool listings.
 */
function recordingStore(inner: Store = new SqliteStore({ path: ':memory:' })) {
  const log = { metadata: [] as Array<[string, LedgerOp['op']]>, listings: 0 };
  const store: Store = new (class extends ForwardingStore {
    override async ledgers(prefix?: string) {
      log.listings += 1;
      return inner.ledgers(prefix);
    }
    override async commit(pool: string, expected: Revision, ops: readonly LedgerOp[]): Promise<CommitResult> {
      for (const op of ops) if (op.op === 'describe' || op.op === 'cooldown') log.metadata.push([pool, op.op]);
      return inner.commit(pool, expected, ops);
    }
  })(inner);
  return { store, log, inner };
}

const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const ranges = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

describe('pool metadata', () => {
  it('is written with the first allocation in a pool and not again while the config stays the same', async () => {
    const { store, log } = recordingStore();
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'n1' });
    for (const id of ['a', 'b', 'c', 'd'])
      await allocator.allocate({ owner: owner(id), ranges: ranges({ range: '10.0.0.0/24' }), cooldownSeconds: 30 });
    assert.deepEqual(log.metadata, [
      ['10.0.0.0/24', 'describe'],
      ['10.0.0.0/24', 'cooldown'],
    ]);
    const [summary] = await store.ledgers();
    assert.deepEqual(summary?.description, {
      subnet: '10.0.0.0/24',
      first: '10.0.0.1',
      last: '10.0.0.254',
      capacity: '254',
      cooldownSeconds: 30,
    });
  });

  it('is written again when the cooldown or the span of the config changes', async () => {
    const { store, log } = recordingStore();
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'n1' });
    await allocator.allocate({ owner: owner('a'), ranges: ranges({ range: '10.0.0.0/24' }), cooldownSeconds: 30 });
    await allocator.allocate({ owner: owner('b'), ranges: ranges({ range: '10.0.0.0/24' }), cooldownSeconds: 60 });
    await allocator.allocate({
      owner: owner('c'),
      ranges: ranges({ range: '10.0.0.0/24', range_end: '10.0.0.99' }),
      cooldownSeconds: 60,
    });
    await allocator.allocate({
      owner: owner('d'),
      ranges: ranges({ range: '10.0.0.0/24', range_end: '10.0.0.99' }),
      cooldownSeconds: 60,
    });
    assert.equal(log.metadata.length, 6, JSON.stringify(log.metadata));
    const [summary] = await store.ledgers();
    assert.equal(summary?.description?.last, '10.0.0.99');
    assert.equal(summary?.description?.capacity, '99');
    assert.equal(summary?.description?.cooldownSeconds, 60);
  });

  it('is written by a new process once, at its first allocation in the pool', async () => {
    const { store, log } = recordingStore();
    const r = ranges({ range: '10.0.0.0/24' });
    await new Allocator({ store, clock: new ManualClock(0), node: 'n1' }).allocate({ owner: owner('a'), ranges: r });
    const restarted = new Allocator({ store, clock: new ManualClock(0), node: 'n1' });
    for (const id of ['b', 'c']) await restarted.allocate({ owner: owner(id), ranges: r });
    assert.equal(log.metadata.length, 4);
  });

  it('is written for a block when it is claimed, and not again by the allocations in it', async () => {
    const clock = new ManualClock(0);
    const { store, log } = recordingStore(tieredStore(clock)); // blocks: on two tiers, as agents run them
    const allocator = new Allocator({ store, clock, node: 'n1', blocks: true });
    const r = ranges({ range: '10.0.0.0/24', block_size: 28 });
    for (const id of ['a', 'b', 'c']) await allocator.allocate({ owner: owner(id), ranges: r, cooldownSeconds: 5 });
    const block = `${r[0]?.pool}#10.0.0.0/28`;
    assert.deepEqual(log.metadata, [
      ['10.0.0.0/24', 'describe'], // the block size, pinned at first use
      ['10.0.0.0/24', 'cooldown'],
      [block, 'describe'],
      [block, 'cooldown'],
    ]);
    const blocks = await store.ledgers(`${r[0]?.pool}#`);
    assert.deepEqual(
      blocks.map((p) => [p.description?.first, p.description?.last, p.description?.cooldownSeconds]),
      [['10.0.0.1', '10.0.0.15', 5]],
    );
  });
});

describe('the cooldown of a release', () => {
  it('comes from the caller when it has the config, and from the pool attribute when it has not', async () => {
    const { store, log } = recordingStore();
    const clock = new ManualClock(1_000_000);
    const r = ranges({ range: '10.0.0.0/30' }); // .1 and .2
    const allocator = new Allocator({ store, clock, node: 'n1' });
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 60 });
    // A journaled DEL after a restart: no config, so the pool's attribute (60 s) applies.
    const restarted = new Allocator({ store, clock, node: 'n1' });
    const listings = log.listings;
    await restarted.release(owner('a'));
    assert.equal(log.listings, listings, 'a release reads no pool listing (no description) for its cooldown');
    const read = await store.readLedger('10.0.0.0/30');
    // On both clocks: the monotonic one times the rest (the manual clock's starts where its wall clock does).
    assert.deepEqual(read.kind === 'snapshot' && read.resting, [
      { address: '10.0.0.1', reusableAt: 1_060_000, reusableStamp: { boot: 'manual-boot', at: 1_060_000 } },
    ]);
    // A DEL with the config: its cooldown wins (0: reusable at once).
    await restarted.release(owner('b'), 0);
    const [c] = await restarted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 });
    assert.equal(c?.allocation.address, '10.0.0.2');
    await assert.rejects(
      restarted.allocate({ owner: owner('d'), ranges: r, cooldownSeconds: 60 }),
      (e: unknown) => isWarrenError(e, 'POOL_EXHAUSTED') && /1 resting/.test(e.message),
    );
  });

  it('follows the pool attribute when a later config changed it', async () => {
    const { store } = recordingStore();
    const clock = new ManualClock(0);
    const r = ranges({ range: '10.0.0.0/24' });
    const allocator = new Allocator({ store, clock, node: 'n1' });
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 0 });
    await allocator.release(owner('a'));
    const read = await store.readLedger('10.0.0.0/24');
    assert.deepEqual(read.kind === 'snapshot' && [read.cooldownSeconds, read.resting], [0, []]);
  });
});
