/**
 * The allocator commits an ADD durable later (CommitOptions.durableLater) and answers it only once
 * the store says it is durable: the range's lock is let go before the sync, so the ADDs behind it
 * commit meanwhile (and share the sync), yet none is answered early, a retried ADD that finds the
 * address held waits as well, and a sync that fails fails the ADD and gives its address back.
 * The store is the real SQLite store; the wrapper only holds each commit's durability until the
 * test lets it go (the one moment a test cannot otherwise choose).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { WarrenError, isWarrenError } from '../../src/core/errors.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { Allocator } from '../../src/allocator/allocator.ts';
import { MeasuredStore } from '../../src/agent/metrics/measured-store.ts';
import { NO_TELEMETRY } from '../../src/agent/metrics/telemetry.ts';
import { CommitHealth } from '../../src/agent/server/commit-health.ts';
import { ForwardingStore } from '../../src/store/forwarding-store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { AdmissionGuard, CommitOptions, CommitResult, LedgerOp, Revision, Store } from '../../src/store/store.ts';
import { tempDir } from '../helpers/processes.ts';
import { tieredStore } from '../store/tiered/nodes.ts';

/** SQLite at FULL (or the two-tier store on it), each durability held until `settle` (resolve or reject them all). */
class HeldDurability extends ForwardingStore {
  readonly held: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  commits = 0;

  constructor(inner: Store = new SqliteStore({ path: join(tempDir(), 'w.db') })) {
    super(inner);
  }

  override async commit(
    pool: string,
    expected: Revision,
    ops: readonly LedgerOp[],
    guard?: AdmissionGuard,
    options?: CommitOptions,
  ): Promise<CommitResult> {
    const result = await this.inner.commit(pool, expected, ops, guard, options);
    if (result.kind !== 'committed') return result;
    this.commits++;
    if (result.durable === undefined) return result;
    const synced = result.durable;
    const durable = new Promise<void>((resolve, reject) =>
      this.held.push({ resolve: () => synced.then(resolve, reject), reject }),
    );
    durable.catch(() => undefined);
    return { ...result, durable };
  }

  settle(error?: Error): void {
    for (const h of this.held.splice(0)) error === undefined ? h.resolve() : h.reject(error);
  }
}

const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const ranges = parseIpamConfig({ type: 'warren', range: '10.9.0.0/24' }).ranges;

/** Whether `p` settled by now (after the turns already queued). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

/** Polls `condition` through the event loop's turns, up to a bound. */
async function until(condition: () => boolean): Promise<void> {
  for (let turn = 0; turn < 1000 && !condition(); turn++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(condition(), 'never happened');
}

describe('the allocator answers an ADD only once its commit is durable', () => {
  for (const blocks of [false, true]) {
    it(`holds the answer, not the range, until the sync${blocks ? ' (blocks)' : ''}`, async () => {
      const clock = new ManualClock(1_000_000);
      const store = new HeldDurability(blocks ? tieredStore(clock) : undefined); // blocks: on two tiers
      const allocator = new Allocator({ store, clock, node: 'n1', blocks });
      try {
        const first = allocator.allocate({ owner: owner('a'), ranges });
        await until(() => store.held.length === 1);
        assert.equal(await settled(first), false, 'committed, not durable: not answered');
        // The range's lock is free: the next ADD commits while the first waits for its sync.
        const second = allocator.allocate({ owner: owner('b'), ranges });
        await until(() => store.held.length === 2);
        // A retried ADD finds the address held, and waits for the same sync before it answers.
        const retried = allocator.allocate({ owner: owner('a'), ranges });
        assert.equal(await settled(retried), false, 'a retry is not answered before the sync either');
        store.settle();
        const [a, b, again] = await Promise.all([first, second, retried]);
        assert.notEqual(a[0]?.allocation.address, b[0]?.allocation.address);
        assert.equal(again[0]?.allocation.address, a[0]?.allocation.address);
        assert.equal(again[0]?.fresh, false);
      } finally {
        await store.close();
      }
    });
  }

  it('fails an ADD whose sync failed, and gives its address back', async () => {
    const store = new HeldDurability();
    const allocator = new Allocator({ store, clock: new ManualClock(1_000_000), node: 'n1' });
    try {
      const add = allocator.allocate({ owner: owner('a'), ranges });
      await until(() => store.held.length === 1);
      store.settle(new WarrenError('IO_FAILURE', 'database w.db: its write-ahead log could not be synced'));
      const error = await add.catch((e: unknown) => e);
      assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
      assert.deepEqual(await store.list(), [], 'not left allocated to a container that was told it failed');
    } finally {
      await store.close();
    }
  });
});

describe("the agent's store wrappers", () => {
  it('pass a commit asked durable later on: its answer still carries the promise of its sync', async () => {
    const inner = new SqliteStore({ path: join(tempDir(), 'w.db') });
    const store = new MeasuredStore(new CommitHealth(new ManualClock(0)).watch(inner), NO_TELEMETRY);
    try {
      const op: LedgerOp = {
        op: 'allocate',
        allocation: {
          pool: 'p',
          address: '10.0.0.1',
          network: 'n',
          containerID: 'c',
          ifname: 'eth0',
          node: 'n1',
          createdAt: 1,
        },
      };
      const result = await store.commit('p', 0, [op], undefined, { durableLater: true });
      assert.ok(result.kind === 'committed' && result.durable instanceof Promise, JSON.stringify(result));
      await result.durable;
    } finally {
      await store.close();
    }
  });
});
