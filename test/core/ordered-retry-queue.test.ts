/**
 * The per-key ordered retry queue on an injected clock: order per key, independence of keys,
 * backoff and in-order replay, and events arriving at the instant a key is re-armed; flushing a key
 * now, waiting for running keys to settle, and a backoff policy per key.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ExponentialBackoff } from '../../src/core/backoff.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { OrderedRetryQueue } from '../../src/core/ordered-retry-queue.ts';
import { flush } from '../helpers/event-loop.ts';

/** Lets every promise already resolved run its continuations (no time passes). */

function setup(handle: (key: string, event: string) => Promise<void>) {
  const clock = new ManualClock(0);
  const queue = new OrderedRetryQueue<string>({
    clock,
    backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
    handle,
  });
  return { clock, queue };
}

describe('OrderedRetryQueue', () => {
  it('handles one key in order, one event at a time, while other keys go ahead', async () => {
    const seen: string[] = [];
    let releaseA: () => void = () => undefined;
    const { queue } = setup(async (key, event) => {
      seen.push(`${key}:${event}:start`);
      if (event === 'a1') await new Promise<void>((resolve) => (releaseA = resolve));
      seen.push(`${key}:${event}:end`);
    });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    queue.push('b', 'b1');
    await flush();
    assert.deepEqual(seen, ['a:a1:start', 'b:b1:start', 'b:b1:end'], 'a2 waits for a1; b does not');
    releaseA();
    await queue.idle();
    assert.deepEqual(seen.slice(3), ['a:a1:end', 'a:a2:start', 'a:a2:end']);
  });

  it('backs a failing key off (1 s doubling) and replays its queue in order, without delaying other keys', async () => {
    const attempts: string[] = [];
    let failuresLeft = 2;
    const { clock, queue } = setup(async (_key, event) => {
      attempts.push(event);
      if (event === 'a1' && failuresLeft > 0) {
        failuresLeft -= 1;
        throw new Error('store away');
      }
    });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    await flush();
    queue.push('b', 'b1');
    await flush();
    assert.deepEqual(attempts, ['a1', 'b1'], 'a2 waits behind the failed a1; b1 is handled at once');
    assert.deepEqual(queue.keys(), [{ key: 'a', queued: 2, failures: 1, lastError: 'store away', retryAt: 1_000 }]);
    clock.advance(999);
    await flush();
    assert.deepEqual(attempts, ['a1', 'b1']);
    clock.advance(1);
    await flush();
    assert.deepEqual(attempts, ['a1', 'b1', 'a1'], 'retried after 1 s, failed again');
    assert.equal(queue.keys()[0]?.retryAt, 3_000, 'then 2 s');
    clock.advance(2_000);
    await queue.idle();
    assert.deepEqual(attempts, ['a1', 'b1', 'a1', 'a1', 'a2']);
    assert.deepEqual(queue.keys(), []);
    assert.equal(queue.handled, 3);
  });

  it('keeps an event pushed at the instant its key is re-armed, and one pushed as the retry fires', async () => {
    const attempts: string[] = [];
    let fail = true;
    const { clock, queue } = setup(async (_key, event) => {
      attempts.push(event);
      if (event === 'a1' && fail) {
        fail = false;
        // Arrives while the failure is being turned into a backoff.
        queue.push('a', 'a3');
        throw new Error('boom');
      }
    });
    const withHook = new OrderedRetryQueue<string>({
      clock,
      backoff: new ExponentialBackoff(),
      handle: async () => {
        throw new Error('always');
      },
      onFailure: (key) => withHook.push(key, 'pushed-in-onFailure'),
    });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    await flush();
    assert.deepEqual(attempts, ['a1']);
    clock.advance(1_000);
    queue.push('a', 'a4'); // the same instant the retry starts
    await queue.idle();
    // a1's first attempt starts inside push('a', 'a1'), so a3 (pushed by it) is queued before a2.
    assert.deepEqual(attempts, ['a1', 'a1', 'a3', 'a2', 'a4']);

    withHook.push('k', 'first');
    await flush();
    assert.equal(withHook.keys()[0]?.queued, 2, 'the event pushed by the failure hook is queued, not dropped');
    withHook.stop();
  });

  it('caps the backoff and cancels timers on stop', async () => {
    const { clock, queue } = setup(async () => {
      throw new Error('never');
    });
    queue.push('a', 'a1');
    await flush();
    for (let i = 0; i < 12; i++) {
      clock.advance(300_000);
      await flush();
    }
    const state = queue.keys()[0];
    assert.equal(state?.failures, 13);
    assert.equal((state?.retryAt ?? 0) - clock.now(), 300_000, 'never more than 5 minutes');
    queue.stop();
    assert.deepEqual(queue.keys(), []);
    queue.push('a', 'after-stop');
    assert.deepEqual(queue.keys(), []);
  });

  it('flushes a backing-off key at once, never starting a running key twice, and says how it went', async () => {
    const attempts: string[] = [];
    let failing = true;
    let releaseRunning: () => void = () => undefined;
    const { clock, queue } = setup(async (key, event) => {
      attempts.push(event);
      if (event === 'slow') await new Promise<void>((resolve) => (releaseRunning = resolve));
      if (key === 'a' && failing) throw new Error('store away');
    });
    assert.deepEqual(await queue.flush('nothing'), { ok: true });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    await flush();
    assert.equal(queue.state('a')?.retryAt, 1_000);
    assert.deepEqual(
      await queue.flush('a'),
      { ok: false, error: 'store away' },
      'tried now, before the backoff is over',
    );
    assert.deepEqual(attempts, ['a1', 'a1']);
    assert.equal(queue.state('a')?.retryAt, clock.now() + 2_000, 'the failure backs off as usual');
    failing = false;
    assert.deepEqual(await queue.flush('a'), { ok: true });
    assert.deepEqual(attempts, ['a1', 'a1', 'a1', 'a2']);
    assert.equal(queue.has('a'), false);

    queue.push('b', 'slow');
    const flushed = queue.flush('b');
    const settled = queue.settled();
    await flush();
    assert.deepEqual(attempts.slice(4), ['slow'], 'a running key is waited for, not started again');
    releaseRunning();
    assert.deepEqual(await flushed, { ok: true });
    await settled;
    assert.equal(clock.pendingTimers, 0);
  });

  it('settles when every key running now has emptied or is backing off', async () => {
    let releaseA: () => void = () => undefined;
    const { queue } = setup(async (key) => {
      if (key === 'a') await new Promise<void>((resolve) => (releaseA = resolve));
      if (key === 'b') throw new Error('backing off');
    });
    queue.push('a', 'a1');
    queue.push('b', 'b1');
    await flush();
    let settled = false;
    void queue.settled().then(() => (settled = true));
    await flush();
    assert.equal(settled, false, 'a is still running; b backing off counts as settled');
    releaseA();
    await flush();
    assert.equal(settled, true);
    queue.stop();
  });

  it('backs each key off by the policy chosen for it', async () => {
    const clock = new ManualClock(0);
    const queue = new OrderedRetryQueue<string>({
      clock,
      backoff: (key) => new ExponentialBackoff({ initialMs: key.startsWith('fast') ? 10 : 5_000, maxMs: 60_000 }),
      handle: async () => {
        throw new Error('down');
      },
    });
    queue.push('fast-1', 'x');
    queue.push('slow-1', 'y');
    await flush();
    assert.deepEqual(
      queue.keys().map((k) => [k.key, k.retryAt]),
      [
        ['fast-1', 10],
        ['slow-1', 5_000],
      ],
    );
    queue.stop();
    assert.deepEqual(await queue.flush('fast-1'), { ok: false, error: 'the queue is stopped' });
  });

  it('delivers every event of every key exactly once and in order, whatever fails when (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.boolean(), fc.boolean()), { minLength: 1, maxLength: 40 }),
        async (script) => {
          const clock = new ManualClock(0);
          const delivered = new Map<string, number[]>();
          const failOnce = new Set<number>();
          const queue = new OrderedRetryQueue<number>({
            clock,
            backoff: new ExponentialBackoff({ initialMs: 10, maxMs: 40 }),
            handle: async (key, n) => {
              if (failOnce.delete(n)) throw new Error(`fail ${n}`);
              delivered.set(key, [...(delivered.get(key) ?? []), n]);
            },
          });
          script.forEach(([key, fails, advance], n) => {
            if (fails) failOnce.add(n);
            queue.push(key, n);
            if (advance) clock.advance(10);
          });
          for (let i = 0; i < 100 && queue.keys().length > 0; i++) {
            await flush();
            clock.advance(40);
          }
          await queue.idle();
          for (const key of ['a', 'b', 'c']) {
            const expected = script.flatMap(([k], n) => (k === key ? [n] : []));
            assert.deepEqual(delivered.get(key) ?? [], expected);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
