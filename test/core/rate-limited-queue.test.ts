/**
 * The rate-limited work queue on a manual clock: FIFO among ready keys, coalescing of a key added
 * while it waits or while it is processed (never on two workers at once), the per-key backoff, the
 * token bucket and the longer of the two, forget, a caller bounding retries, addAfter, and
 * shutdown on abort.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../../src/core/clock.ts';
import {
  DEFAULT_MAX_RETRIES,
  ItemExponentialRateLimiter,
  MaxOfRateLimiter,
  RateLimitedQueue,
  type RateLimiter,
  TokenBucketRateLimiter,
} from '../../src/core/rate-limited-queue.ts';
import { flush } from '../helpers/event-loop.ts';

/** Lets every promise already resolved run its continuations (no time passes). */

const failOnError = (key: string, error: unknown): never => assert.fail(`handler for ${key} threw: ${String(error)}`);

function setup(rateLimiter?: RateLimiter) {
  const clock = new ManualClock(0);
  const queue = new RateLimitedQueue(rateLimiter === undefined ? { clock } : { clock, rateLimiter });
  return { clock, queue, controller: new AbortController() };
}

/** A handler that holds each key until the test finishes it, and notices a key run twice at once. */
function gated() {
  const started: string[] = [];
  const running = new Map<string, () => void>();
  let overlapped = false;
  const handler = async (key: string): Promise<void> => {
    if (running.has(key)) overlapped = true;
    started.push(key);
    await new Promise<void>((resolve) => running.set(key, resolve));
  };
  const finish = (key: string): void => {
    const release = running.get(key);
    assert.ok(release, `${key} is not running`);
    running.delete(key);
    release();
  };
  return { handler, started, running, finish, overlapped: () => overlapped };
}

describe('RateLimitedQueue', () => {
  it('hands ready keys out first in, first out, in the order they became ready', async () => {
    const { clock, queue, controller } = setup();
    const seen: string[] = [];
    queue.add('c');
    queue.add('a');
    queue.add('b');
    const run = queue.run(async (key) => void seen.push(key), { signal: controller.signal, onError: failOnError });
    await flush();
    assert.deepEqual(seen, ['c', 'a', 'b']);

    queue.addAfter('x', 20);
    queue.addAfter('y', 10);
    queue.add('z');
    clock.advance(20);
    await flush();
    assert.deepEqual(seen.slice(3), ['z', 'y', 'x']);
    controller.abort();
    await run;
  });

  it('coalesces a key added again while it waits', async () => {
    const { queue, controller } = setup();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    assert.deepEqual(queue.stats(), { depth: 2, processing: 0, delayed: 0, retries: 0 });
    const seen: string[] = [];
    const run = queue.run(async (key) => void seen.push(key), { signal: controller.signal, onError: failOnError });
    await flush();
    assert.deepEqual(seen, ['a', 'b']);
    controller.abort();
    await run;
  });

  it('processes a key added while it is processed exactly once more, after, never on two workers at once', async () => {
    const { queue, controller } = setup();
    const g = gated();
    const run = queue.run(g.handler, { signal: controller.signal, workers: 3, onError: failOnError });
    queue.add('a');
    await flush();
    queue.add('a');
    queue.add('a');
    queue.add('b');
    await flush();
    assert.deepEqual(g.started, ['a', 'b'], 'two workers are idle, yet none takes the dirty a');
    assert.deepEqual(queue.stats(), { depth: 0, processing: 2, delayed: 0, retries: 0 });
    g.finish('a');
    await flush();
    assert.deepEqual(g.started, ['a', 'b', 'a'], 'a runs once more once its first run is done');
    g.finish('a');
    g.finish('b');
    await flush();
    assert.deepEqual(g.started, ['a', 'b', 'a'], 'and only once');
    assert.equal(g.overlapped(), false);
    assert.deepEqual(queue.stats(), { depth: 0, processing: 0, delayed: 0, retries: 0 });
    controller.abort();
    await run;
  });

  it('backs each key off 5 ms doubling up to 1000 s, and forgets a key on forget', () => {
    const limiter = new ItemExponentialRateLimiter();
    const delays = Array.from({ length: 20 }, () => limiter.when('a'));
    assert.deepEqual(delays.slice(0, 8), [5, 10, 20, 40, 80, 160, 320, 640]);
    assert.equal(delays[17], 655_360);
    assert.deepEqual(delays.slice(18), [1_000_000, 1_000_000], 'capped at 1000 s');
    for (let i = 0; i < 2_000; i++) limiter.when('a');
    assert.equal(limiter.when('a'), 1_000_000, 'still the cap, never Infinity');
    assert.equal(limiter.when('b'), 5, 'each key has its own count');
    assert.equal(limiter.retries('a'), 2_021);
    limiter.forget('a');
    assert.equal(limiter.retries('a'), 0);
    assert.equal(limiter.when('a'), 5);
    assert.equal(limiter.retries('b'), 1, 'forgetting a leaves b alone');
  });

  it('lets a burst of 100 retries through at once, then 10 per second', () => {
    const clock = new ManualClock(0);
    const bucket = new TokenBucketRateLimiter({ clock });
    const burst = Array.from({ length: 100 }, (_, i) => bucket.when(`k${i}`));
    assert.deepEqual(new Set(burst), new Set([0]));
    assert.deepEqual(
      [bucket.when('x'), bucket.when('y'), bucket.when('z')],
      [100, 200, 300],
      'reservations ahead of the refill',
    );
    clock.advance(1_000);
    // -3 tokens plus 10 refilled: 7 go at once, the 8th waits 100 ms.
    const afterOneSecond = Array.from({ length: 8 }, () => bucket.when('k'));
    assert.deepEqual(afterOneSecond, [0, 0, 0, 0, 0, 0, 0, 100]);
    clock.advance(1_000_000);
    const refilled = Array.from({ length: 101 }, () => bucket.when('k'));
    assert.equal(refilled.filter((d) => d === 0).length, 100, 'never more than the burst in the bucket');
    assert.equal(refilled[100], 100);
    assert.equal(bucket.retries('k'), 0);
  });

  it('takes a token only when a whole one is there, reserving none ahead (tryTake, for callers that drop)', () => {
    const clock = new ManualClock(0);
    const bucket = new TokenBucketRateLimiter({ clock, perSecond: 2, burst: 2 });
    assert.deepEqual([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()], [true, true, false]);
    clock.advance(250);
    assert.equal(bucket.tryTake(), false, 'half a token is not one');
    clock.advance(250);
    assert.equal(bucket.tryTake(), true);
    assert.equal(bucket.when('k'), 500, 'a refused tryTake reserved nothing');
  });

  it('waits the longer of the key backoff and the bucket reservation, and forgets in both', () => {
    const clock = new ManualClock(0);
    const limiter = new MaxOfRateLimiter(
      new ItemExponentialRateLimiter(),
      new TokenBucketRateLimiter({ clock, perSecond: 10, burst: 2 }),
    );
    assert.equal(limiter.when('a'), 5, 'backoff 5 ms, bucket 0');
    assert.equal(limiter.when('a'), 10, 'backoff 10 ms, bucket 0');
    assert.equal(limiter.when('a'), 100, 'backoff 20 ms, bucket 100 ms');
    assert.equal(limiter.when('b'), 200, 'backoff 5 ms, bucket 200 ms: the bucket counts every key');
    clock.advance(10_000);
    assert.equal(limiter.when('a'), 40, 'bucket full again: the backoff alone');
    assert.equal(limiter.retries('a'), 4);
    limiter.forget('a');
    assert.equal(limiter.retries('a'), 0);
    assert.equal(limiter.when('a'), 5);
  });

  it('applies the default limiter: 100 rate-limited keys after 5 ms, the 101st after 100 ms', () => {
    const { clock, queue } = setup();
    for (let i = 0; i <= 100; i++) queue.addRateLimited(`k${i}`);
    assert.deepEqual(queue.stats(), { depth: 0, processing: 0, delayed: 101, retries: 101 });
    clock.advance(4);
    assert.equal(queue.stats().depth, 0);
    clock.advance(1);
    assert.deepEqual(queue.stats(), { depth: 100, processing: 0, delayed: 1, retries: 101 });
    clock.advance(94);
    assert.equal(queue.stats().depth, 100);
    clock.advance(1);
    assert.deepEqual(queue.stats(), { depth: 101, processing: 0, delayed: 0, retries: 101 });
  });

  it('resets a key backoff on forget, while the total of retries keeps counting', () => {
    const { clock, queue } = setup();
    for (const wait of [5, 10, 20]) {
      queue.addRateLimited('a');
      clock.advance(wait);
      assert.equal(queue.stats().depth, 1, `ready after ${wait} ms`);
    }
    assert.equal(queue.retries('a'), 3);
    queue.forget('a');
    assert.equal(queue.retries('a'), 0);
    queue.addRateLimited('b');
    clock.advance(5);
    assert.equal(queue.stats().depth, 2, 'b waited 5 ms');
    assert.equal(queue.stats().retries, 4);
  });

  it('lets the caller give up on a key after DEFAULT_MAX_RETRIES retries', async () => {
    const { clock, queue, controller } = setup();
    const attempts: number[] = [];
    const gaveUp: string[] = [];
    const run = queue.run(
      async (key) => {
        attempts.push(clock.now());
        // The pod source's worker: this attempt failed; retry while the bound allows.
        if (queue.retries(key) < DEFAULT_MAX_RETRIES) {
          queue.addRateLimited(key);
        } else {
          queue.forget(key);
          gaveUp.push(key);
        }
      },
      { signal: controller.signal, onError: failOnError },
    );
    queue.add('pod');
    for (let ms = 0; ms < 1_000; ms++) {
      await flush();
      clock.advance(1);
    }
    assert.equal(DEFAULT_MAX_RETRIES, 5);
    assert.deepEqual(attempts, [0, 5, 15, 35, 75, 155], 'one attempt and five retries, 5 ms doubling');
    assert.deepEqual(gaveUp, ['pod']);
    assert.equal(queue.retries('pod'), 0);
    assert.deepEqual(queue.stats(), { depth: 0, processing: 0, delayed: 0, retries: 5 });
    controller.abort();
    await run;
  });

  it('adds a key after its delay on the clock, keeps the earlier of two delays and adds at once for none', () => {
    const { clock, queue } = setup();
    queue.addAfter('a', 100);
    queue.addAfter('a', 300);
    queue.addAfter('b', 50);
    queue.addAfter('b', 20);
    queue.addAfter('c', 0);
    assert.deepEqual(queue.stats(), { depth: 1, processing: 0, delayed: 2, retries: 0 });
    assert.equal(clock.pendingTimers, 2, 'the replaced timer of b is cancelled');
    clock.advance(19);
    assert.equal(queue.stats().depth, 1);
    clock.advance(1);
    assert.equal(queue.stats().depth, 2, 'b after 20 ms');
    clock.advance(80);
    assert.deepEqual(queue.stats(), { depth: 3, processing: 0, delayed: 0, retries: 0 });
    clock.advance(1_000);
    assert.equal(queue.stats().depth, 3, 'the 300 ms delay of a was dropped');
    assert.equal(clock.pendingTimers, 0);
  });

  it('on abort starts nothing new, cancels delayed keys, ignores adds and resolves once running handlers finish', async () => {
    const { clock, queue, controller } = setup();
    const g = gated();
    let stopped = false;
    const run = queue
      .run(g.handler, { signal: controller.signal, workers: 2, onError: failOnError })
      .then(() => (stopped = true));
    queue.add('a');
    queue.add('b');
    queue.add('c');
    queue.addAfter('d', 100);
    queue.addRateLimited('e');
    await flush();
    assert.deepEqual(queue.stats(), { depth: 1, processing: 2, delayed: 2, retries: 1 });
    controller.abort();
    assert.deepEqual(queue.stats(), { depth: 0, processing: 2, delayed: 0, retries: 1 });
    assert.equal(clock.pendingTimers, 0, 'addAfter timers are cancelled');
    queue.add('f');
    queue.addAfter('g', 10);
    queue.addRateLimited('h');
    assert.deepEqual(queue.stats(), { depth: 0, processing: 2, delayed: 0, retries: 1 });
    g.finish('a');
    await flush();
    assert.equal(stopped, false, 'b is still running');
    g.finish('b');
    await run;
    clock.advance(1_000);
    await flush();
    assert.deepEqual(g.started, ['a', 'b'], 'c, d, e and the keys added after the abort never run');
    assert.deepEqual(queue.stats(), { depth: 0, processing: 0, delayed: 0, retries: 1 });
  });

  it('returns at once for a signal aborted already', async () => {
    const { queue } = setup();
    queue.add('a');
    const seen: string[] = [];
    await queue.run(async (key) => void seen.push(key), {
      signal: AbortSignal.abort(),
      workers: 4,
      onError: failOnError,
    });
    assert.deepEqual(seen, []);
  });

  it('reports a handler that throws and keeps its worker going', async () => {
    const { queue, controller } = setup();
    const errors: string[] = [];
    const seen: string[] = [];
    const run = queue.run(
      async (key) => {
        seen.push(key);
        if (key === 'bad') throw new Error('bug');
      },
      { signal: controller.signal, onError: (key, error) => errors.push(`${key}: ${(error as Error).message}`) },
    );
    queue.add('bad');
    queue.add('good');
    await flush();
    assert.deepEqual(seen, ['bad', 'good']);
    assert.deepEqual(errors, ['bad: bug']);
    assert.equal(queue.stats().processing, 0);
    controller.abort();
    await run;
  });

  it('refuses nonsense: no workers, a bucket without rate', async () => {
    const { queue, controller } = setup();
    await assert.rejects(
      queue.run(async () => undefined, { signal: controller.signal, workers: 0, onError: failOnError }),
      RangeError,
    );
    assert.throws(() => new TokenBucketRateLimiter({ clock: new ManualClock(0), perSecond: 0 }), RangeError);
    assert.throws(() => new TokenBucketRateLimiter({ clock: new ManualClock(0), burst: 0 }), RangeError);
  });

  it('never runs a key twice at once and runs every key after its last add, whatever the workers (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.oneof(fc.record({ add: fc.constantFrom('a', 'b', 'c', 'd') }), fc.record({ finish: fc.nat() })), {
          minLength: 1,
          maxLength: 40,
        }),
        async (workers, script) => {
          const { queue, controller } = setup();
          const g = gated();
          const lastStart = new Map<string, number>();
          const lastAdd = new Map<string, number>();
          const adds = new Map<string, number>();
          let step = 0;
          const run = queue.run(
            async (key) => {
              lastStart.set(key, step);
              await g.handler(key);
            },
            { signal: controller.signal, workers, onError: failOnError },
          );
          for (const op of script) {
            if ('add' in op) {
              queue.add(op.add);
              lastAdd.set(op.add, step);
              adds.set(op.add, (adds.get(op.add) ?? 0) + 1);
            } else {
              const running = [...g.running.keys()];
              const key = running[op.finish % Math.max(1, running.length)];
              if (key !== undefined) g.finish(key);
            }
            await flush();
            step += 1;
          }
          for (let i = 0; i < 50 && g.running.size > 0; i++) {
            for (const key of [...g.running.keys()]) g.finish(key);
            await flush();
          }
          assert.equal(g.overlapped(), false);
          assert.deepEqual(queue.stats(), { depth: 0, processing: 0, delayed: 0, retries: 0 });
          for (const [key, at] of lastAdd) {
            assert.ok((lastStart.get(key) ?? -1) >= at, `${key} added at step ${at} was not processed after`);
            const runs = g.started.filter((k) => k === key).length;
            assert.ok(runs <= (adds.get(key) ?? 0), `${key} ran ${runs} times for ${adds.get(key)} adds`);
          }
          controller.abort();
          await run;
        },
      ),
      { numRuns: 200 },
    );
  });
});
