/**
 * The release pipeline and its reconcile pass in process, on a ManualClock: a journal intent whose
 * release fails stays on disk and backs off (1 s, 2 s, ...), is retried when its backoff is over
 * (and a pass reports what happened while it ran), and is removed only once the release has
 * committed.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { NO_TELEMETRY } from '../../../src/agent/metrics/telemetry.ts';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { recordMissedDelete } from '../../../src/plugin/journal-writer.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp } from '../../../src/store/store.ts';
import { waitFor } from '../../helpers/processes.ts';
import { releaseHarness as harness, watchedNetns } from './harness.ts';

/** A store whose commits fail while `failing` is set: the fault a real disk or etcd can give. */
class FlakyStore extends SqliteStore {
  failing = false;
  override async commit(pool: string, expected: number, ops: readonly LedgerOp[]): Promise<CommitResult> {
    if (this.failing) throw new Error('disk I/O error (injected)');
    return super.commit(pool, expected, ops);
  }
}

/** A reconciler started on `store`, its pass at start awaited until the store holds nothing; then closed. */
async function releasedAtStart(
  clock: ManualClock,
  store: SqliteStore,
  observer: ReturnType<typeof watchedNetns>['observer'],
): Promise<void> {
  const { done } = await harness(clock, store, { observer, releaseGoneNetns: true });
  try {
    await waitFor('the pass at start to release it', async () =>
      (await store.list()).length === 0 ? true : undefined,
    );
  } finally {
    await done();
    await store.close();
  }
}

describe('ReleaseReconciler', () => {
  it('keeps a failing intent on disk, backs off, and releases it on a later tick', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, dir, reconciler, done } = await harness(clock, store);
    const ranges = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
    const owner = { network: 'net', containerID: 'c1', ifname: 'eth0' };
    await allocator.allocate({ owner, ranges });
    try {
      store.failing = true;
      recordMissedDelete(dir, { format: 1, ...owner, recordedAt: clock.now(), reason: 'test' });
      const failed = await waitFor('the first attempt to fail', () => {
        const p = reconciler.status().pending[0];
        return p !== undefined && p.failures === 1 ? p : undefined;
      });
      assert.equal(failed.nextAttemptAt, new Date(1_001_000).toISOString(), 'first retry after 1 s');
      assert.match(failed.lastError ?? '', /injected/);
      assert.equal(
        readdirSync(dir).filter((n) => n.endsWith('.release')).length,
        1,
        'the file stays until the release commits',
      );

      // A tick before the backoff is over does not retry.
      clock.advance(500);
      const early = await reconciler.tick();
      assert.equal(early.journalFailed, 0);
      assert.equal(reconciler.status().pending[0]?.failures, 1);

      // Due now, still failing: the delay doubles.
      clock.advance(500);
      const second = await reconciler.tick();
      assert.equal(second.journalFailed, 1);
      assert.equal(reconciler.status().pending[0]?.nextAttemptAt, new Date(clock.now() + 2_000).toISOString());

      store.failing = false;
      clock.advance(2_000);
      const third = await reconciler.tick();
      assert.equal(third.journalReleased, 1);
      assert.deepEqual(reconciler.status().pending, []);
      assert.deepEqual(
        readdirSync(dir).filter((n) => n.endsWith('.release')),
        [],
      );
      assert.deepEqual(await store.list(), []);

      // The periodic pass runs on the clock by itself.
      const before = reconciler.status().lastReconcile?.at;
      clock.advance(60_000);
      await waitFor('the periodic pass', () => (reconciler.status().lastReconcile?.at !== before ? true : undefined));
    } finally {
      await done();
      await store.close();
    }
  });

  it('a journaled DEL never releases an address allocated after the DEL was recorded', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const { allocator, dir, reconciler, done } = await harness(clock, store);
    try {
      const ranges = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
      const owner = { network: 'net', containerID: 'c1', ifname: 'eth0' };
      // The DEL was recorded at 1_000_000; the same attachment was ADDed again a second later.
      clock.advance(1_000);
      const [again] = await allocator.allocate({ owner, ranges });
      recordMissedDelete(dir, { format: 1, ...owner, recordedAt: 1_000_000, reason: 'test' });
      await waitFor('the intent to be taken', () =>
        reconciler.status().pending.length === 0 && reconciler.status().releasedFromJournal === 1 ? true : undefined,
      );
      assert.deepEqual(
        (await store.list()).map((a) => a.address),
        [again?.allocation.address],
        'the later allocation is in use and stays',
      );
      assert.deepEqual(
        readdirSync(dir).filter((n) => n.endsWith('.release')),
        [],
        'the intent is done with',
      );
    } finally {
      await done();
      await store.close();
    }
  });

  it('an ADD of an attachment with a pending journaled DEL first applies that DEL, then gets a fresh address', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, dir, pipeline, reconciler, done } = await harness(clock, store);
    try {
      const ranges = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
      const owner = { network: 'net', containerID: 'c1', ifname: 'eth0' };
      const [old] = await allocator.allocate({ owner, ranges });
      store.failing = true;
      clock.advance(1_000);
      recordMissedDelete(dir, { format: 1, ...owner, recordedAt: clock.now(), reason: 'test' });
      await waitFor('the first release attempt to fail', () =>
        reconciler.status().pending[0]?.failures === 1 ? true : undefined,
      );
      await assert.rejects(
        pipeline.applyPending(owner),
        /pending in the missed-delete journal/,
        'while the DEL cannot be applied, the ADD must wait',
      );
      store.failing = false;
      clock.advance(1_000);
      // What the agent does before every ADD; without it the ADD would get the old address back
      // as a retry, and the pending DEL would then release it from under the new container.
      await pipeline.applyPending(owner);
      const [fresh] = await allocator.allocate({ owner, ranges });
      assert.notEqual(fresh?.fresh, false, 'a new allocation, not the one the DEL gave up');
      assert.deepEqual(reconciler.status().pending, []);
      await reconciler.tick();
      assert.deepEqual(
        (await store.list()).map((a) => a.address),
        [fresh?.allocation.address],
      );
      assert.notEqual(
        fresh?.allocation.address,
        old?.allocation.address,
        'next-after-last: the given-up address rests',
      );
    } finally {
      await done();
      await store.close();
    }
  });

  it('sweeps as it starts: a record whose namespace went while no agent ran is released without waiting an interval', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = watchedNetns('warren-start-');
    const ranges = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
    // Made by an earlier agent (or brought back by a restored disk); its namespace is gone now.
    await new Allocator({ store, clock, node: 'n' }).allocate({
      owner: { network: 'net', containerID: 'gone', ifname: 'eth0' },
      ranges,
      netns: join(ns.seen, 'gone'),
    });
    // The clock never moves: only a pass at start can release it.
    await releasedAtStart(clock, store, ns.observer);
  });

  it('releases a record of a gone namespace made, on the wall clock alone, after what a stepped-back clock reads now', async () => {
    // Found by the soak (issue 38): a record a publication brought back carries its wall-clock time
    // only; once the node's clock stepped back an hour it read as made in the future, and the sweep
    // kept it as "within --netns-grace" (0 s) until the clock caught up.
    const clock = new ManualClock(1_000_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = watchedNetns('warren-stepped-');
    const at = clock.now() + 3_600_000; // before the step back, as the clock read then
    const allocation = {
      pool: '10.0.0.0/24',
      address: '10.0.0.9',
      network: 'net',
      containerID: 'restored',
      ifname: 'eth0',
      node: 'n',
      netns: join(ns.seen, 'restored'),
      createdAt: at,
    };
    assert.equal((await store.commit('10.0.0.0/24', 0, [{ op: 'allocate', allocation }])).kind, 'committed');
    await releasedAtStart(clock, store, ns.observer);
  });

  it('passes soon after a namespace is removed, and a burst of removals costs two passes, not one each', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = watchedNetns('warren-soon-');
    let audits = 0;
    const telemetry = { ...NO_TELEMETRY, audited: () => (audits += 1) };
    const { allocator, reconciler, done } = await harness(clock, store, {
      observer: ns.observer,
      releaseGoneNetns: true,
      telemetry,
    });
    try {
      await waitFor('the pass at start', () => (reconciler.status().lastReconcile === undefined ? undefined : true));
      const ranges = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
      const netns = join(ns.seen, 'pod');
      writeFileSync(netns, '');
      await allocator.allocate({ owner: { network: 'net', containerID: 'c1', ifname: 'eth0' }, ranges, netns });
      const before = audits;
      rmSync(netns);
      // What the netns directory watch does for each entry removed (release-wiring.ts).
      for (let i = 0; i < 5; i++) reconciler.soon();
      await waitFor('the removal to release it', async () => ((await store.list()).length === 0 ? true : undefined));
      await reconciler.tick(); // runs after every pass asked for: they have all ended
      assert.equal(audits - before, 3, 'the first ask starts a pass, the rest join one more, then the tick');
    } finally {
      await done();
      await store.close();
    }
  });
});
