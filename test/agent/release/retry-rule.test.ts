/**
 * The release pipeline's one retry rule (release/pipeline.ts): a failed attempt backs its key off
 * with the intent at its head until it is applied — unless the intent was queued with a bound on
 * its tries (`attempt`: one, its caller retries on its own), when it is given up, handed back to
 * its caller and never tried again by the pipeline, and its key's later intents go on at once.
 * Over SQLite in memory and a manual clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReleaseIntent } from '../../../src/agent/release/intent.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { momentOf } from '../../../src/core/moment.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp } from '../../../src/store/store.ts';
import { releaseHarness } from './harness.ts';

/** A store whose commits fail while told to, counting the commits tried. */
class FlakyStore extends SqliteStore {
  failCommits = false;
  commits = 0;
  override async commit(pool: string, expected: number, ops: readonly LedgerOp[]): Promise<CommitResult> {
    this.commits += 1;
    if (this.failCommits) throw new Error('disk I/O error (injected)');
    return super.commit(pool, expected, ops);
  }
}

const ranges = parseIpamConfig({ type: 'warren', range: '10.9.1.0/24' }).ranges;
const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const held = async (store: SqliteStore) => (await store.list()).map((a) => a.containerID).sort();

describe('the release pipeline retry rule', () => {
  it('gives up an intent attempted once that failed: never retried by the pipeline, its ack never called', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    try {
      await allocator.allocate({ owner: owner('once'), ranges });
      store.failCommits = true;
      let acks = 0;
      const intent: ReleaseIntent = {
        kind: 'journal-del',
        file: 'once.release',
        owner: owner('once'),
        recordedAt: momentOf(clock),
        ack: () => (acks += 1),
      };
      const before = store.commits;
      await assert.rejects(pipeline.attempt(intent), /disk I\/O error \(injected\)/);
      const tried = store.commits - before;
      assert.equal(pipeline.attempts(intent), undefined, 'no longer queued');
      assert.equal(pipeline.counts()['journal-del'].failed, 1);
      clock.advance(3_600_000);
      await pipeline.idle();
      assert.equal(store.commits - before, tried, 'not tried again, however long the clock runs');
      assert.equal(acks, 0);
      assert.deepEqual(await held(store), ['once'], 'nothing was released');
    } finally {
      await done();
      await store.close();
    }
  });

  it("does not hold a key's later intents behind an intent given up: the next runs at once, no backoff", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    try {
      await allocator.allocate({ owner: owner('next'), ranges });
      store.failCommits = true;
      const first: ReleaseIntent = {
        kind: 'journal-del',
        file: 'a.release',
        owner: owner('next'),
        recordedAt: momentOf(clock),
      };
      await assert.rejects(pipeline.attempt(first));
      store.failCommits = false;
      const second: ReleaseIntent = {
        kind: 'journal-del',
        file: 'b.release',
        owner: owner('next'),
        recordedAt: momentOf(clock),
      };
      const outcome = await pipeline.attempt(second);
      assert.deepEqual(
        outcome.released.map((a) => a.containerID),
        ['next'],
        'applied without the clock moving',
      );
      assert.deepEqual(await held(store), []);
    } finally {
      await done();
      await store.close();
    }
  });

  it('keeps a release asked now that failed at the head of its key, and applies it when its backoff ends', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    try {
      await allocator.allocate({ owner: owner('now'), ranges });
      store.failCommits = true;
      const intent: ReleaseIntent = {
        kind: 'journal-del',
        file: 'now.release',
        owner: owner('now'),
        recordedAt: momentOf(clock),
      };
      await assert.rejects(pipeline.releaseNow(intent, 'audit'), /disk I\/O error \(injected\)/);
      assert.deepEqual(pipeline.attempts(intent), {
        failures: 1,
        lastError: 'disk I/O error (injected)',
        retryAt: 1_001_000,
      });
      store.failCommits = false;
      clock.advance(1_000);
      await pipeline.idle();
      assert.equal(pipeline.attempts(intent), undefined, 'done with');
      assert.deepEqual(await held(store), []);
      assert.equal(pipeline.counts()['journal-del'].done, 1);
    } finally {
      await done();
      await store.close();
    }
  });
});
