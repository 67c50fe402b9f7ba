/**
 * The one optimistic commit loop: a conflict is retried, anything else ends the loop, and a store
 * that keeps changing ends it with TRY_AGAIN naming what changed and what was being done. Then the
 * same through the allocator, over a store that refuses commits on demand.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { WarrenError, isWarrenError } from '../../src/core/errors.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { Allocator } from '../../src/allocator/allocator.ts';
import { CONFLICT, retryOnConflict } from '../../src/allocator/commit-loop.ts';
import { ForwardingStore } from '../../src/store/forwarding-store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp, Revision, Store } from '../../src/store/store.ts';
import { tieredStore } from '../store/tiered/nodes.ts';

describe('retryOnConflict', () => {
  const target = { subject: 'pool 10.0.0.0/24', action: 'allocate' };

  it('runs the round again after a conflict and returns what the first clean round returns', async () => {
    const attempts: number[] = [];
    const value = await retryOnConflict(target, 5, async (attempt) => {
      attempts.push(attempt);
      return attempt < 3 ? CONFLICT : 'committed';
    });
    assert.equal(value, 'committed');
    assert.deepEqual(attempts, [1, 2, 3]);
  });

  it('gives up with TRY_AGAIN after exactly maxAttempts conflicts, naming the pool and the action', async () => {
    let rounds = 0;
    await assert.rejects(
      retryOnConflict(target, 4, async () => {
        rounds += 1;
        return CONFLICT;
      }),
      (e: unknown) =>
        isWarrenError(e, 'TRY_AGAIN') &&
        e.message === 'pool 10.0.0.0/24 kept changing under 4 attempts to allocate; try again',
    );
    assert.equal(rounds, 4);
  });

  it('ends at once on an error a round throws, without another round', async () => {
    let rounds = 0;
    const refusal = new WarrenError('POOL_EXHAUSTED', 'full');
    await assert.rejects(
      retryOnConflict(target, 4, async () => {
        rounds += 1;
        throw refusal;
      }),
      (e: unknown) => e === refusal,
    );
    assert.equal(rounds, 1);
  });

  it('returns falsy values as values, not as conflicts', async () => {
    assert.equal(await retryOnConflict(target, 2, async () => undefined), undefined);
    assert.equal(await retryOnConflict(target, 2, async () => 0), 0);
  });
});

/** A store whose commits conflict while `refuse` says so; everything else is SQLite's. */
function contendedStore(
  refuse: (pool: string, ops: readonly LedgerOp[]) => boolean,
  inner: Store = new SqliteStore({ path: ':memory:' }),
): Store & { commits: number } {
  return new (class extends ForwardingStore {
    commits = 0;
    override async commit(pool: string, expected: Revision, ops: readonly LedgerOp[]): Promise<CommitResult> {
      this.commits += 1;
      if (refuse(pool, ops)) return { kind: 'conflict', reason: `pool ${pool} moved (test)` };
      return inner.commit(pool, expected, ops);
    }
  })(inner);
}

const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const ranges = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

describe('the allocator under contention', () => {
  it('retries an allocation whose commit conflicted and hands out one address', async () => {
    let conflicts = 2;
    const store = contendedStore(() => conflicts-- > 0);
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'n1', maxAttempts: 3 });
    const [got] = await allocator.allocate({ owner: owner('a'), ranges: ranges({ range: '10.0.0.0/24' }) });
    assert.equal(got?.allocation.address, '10.0.0.1');
    assert.equal(store.commits, 3);
    assert.equal((await store.list()).length, 1);
  });

  it('gives up an allocation with TRY_AGAIN naming the pool after maxAttempts conflicts', async () => {
    const store = contendedStore(() => true);
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'n1', maxAttempts: 3 });
    await assert.rejects(
      allocator.allocate({ owner: owner('a'), ranges: ranges({ range: '10.0.0.0/24', network_name: 'blue' }) }),
      (e: unknown) =>
        isWarrenError(e, 'TRY_AGAIN') &&
        e.message === 'pool 10.0.0.0/24@blue kept changing under 3 attempts to allocate; try again',
    );
    assert.equal(store.commits, 3);
  });

  it('gives up a release with TRY_AGAIN naming the block it could not commit in', async () => {
    let contended = false;
    const clock = new ManualClock(0);
    const store = contendedStore(() => contended, tieredStore(clock)); // blocks: on two tiers
    const allocator = new Allocator({ store, clock, node: 'n1', blocks: true, maxAttempts: 5 });
    const [got] = await allocator.allocate({
      owner: owner('a'),
      ranges: ranges({ range: '10.0.0.0/24', block_size: 28 }),
    });
    contended = true;
    await assert.rejects(
      allocator.release(owner('a')),
      (e: unknown) =>
        isWarrenError(e, 'TRY_AGAIN') &&
        e.message === `pool ${got?.allocation.pool} kept changing under 5 attempts to release; try again`,
    );
    contended = false;
    assert.equal((await allocator.release(owner('a'))).length, 1, 'released once the store settles');
  });

  // Forgetting a node's blocks used to be a commit loop of `unclaim`s on the one store every node
  // shared, with its own TRY_AGAIN ("the blocks of node gone kept changing ... to give them back").
  // On the two-tier store, the only one with blocks, the cluster frees them (BlockOwners.forgetNode,
  // each claim removed as it was read): no such loop, so that half of this test has nothing to hold.
  it('gives up recording a block size with a message of its own', async () => {
    const clock = new ManualClock(0);
    const store = contendedStore(
      (_pool, ops) => ops.some((op) => op.op === 'describe' && op.description.blockPrefix !== undefined),
      tieredStore(clock),
    );
    const allocator = new Allocator({ store, clock, node: 'n1', blocks: true, maxAttempts: 2 });
    await assert.rejects(
      allocator.allocate({ owner: owner('a'), ranges: ranges({ range: '10.0.0.0/24', block_size: 28 }) }),
      (e: unknown) =>
        isWarrenError(e, 'TRY_AGAIN') &&
        e.message === 'pool 10.0.0.0/24 kept changing under 2 attempts to record its block size; try again',
    );
  });
});
