/**
 * KeyedMutex's guarantees, each shown with work the test releases by hand (no timers, no sleeps):
 * never two runs of one key at once, runs of one key in arrival order, different keys in
 * parallel, a failing run does not block the next, a key whose runs are done is taken again, and
 * an idle key holds nothing (`size` counts the keys held).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { KeyedMutex } from '../../src/core/keyed-mutex.ts';
import { flush } from '../helpers/event-loop.ts';

/** A promise the test settles when it chooses. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void; fail: (error: Error) => void } {
  let open!: (value: T) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

describe('KeyedMutex', () => {
  it('never runs two functions of one key at once, and runs them in arrival order', async () => {
    const mutex = new KeyedMutex();
    const started: number[] = [];
    const gates = [gate(), gate(), gate()];
    const runs = gates.map((g, i) =>
      mutex.run('k', async () => {
        started.push(i);
        await g.promise;
        return i;
      }),
    );
    await flush(10);
    assert.deepEqual(started, [0], 'the second waits for the first');
    gates[0]?.open();
    await flush(10);
    assert.deepEqual(started, [0, 1]);
    gates[2]?.open(); // the third's work is ready, but its turn has not come
    await flush(10);
    assert.deepEqual(started, [0, 1]);
    gates[1]?.open();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2]);
    assert.deepEqual(started, [0, 1, 2]);
  });

  it('runs different keys in parallel', async () => {
    const mutex = new KeyedMutex();
    const running = new Set<string>();
    const a = gate();
    const b = gate();
    const runA = mutex.run('a', async () => {
      running.add('a');
      await a.promise;
    });
    const runB = mutex.run('b', async () => {
      running.add('b');
      await b.promise;
    });
    await flush(10);
    assert.deepEqual([...running].sort(), ['a', 'b'], 'b did not wait for a');
    b.open();
    await runB;
    a.open();
    await runA;
  });

  it('passes on a failure to its caller and still runs the next of the key', async () => {
    const mutex = new KeyedMutex();
    const first = gate();
    const failing = mutex.run('k', () => first.promise);
    const next = mutex.run('k', async () => 'ran');
    first.fail(new Error('boom'));
    await assert.rejects(failing, /boom/);
    assert.equal(await next, 'ran');
  });

  it('takes a key again once its last run is done', async () => {
    const mutex = new KeyedMutex();
    const g = gate();
    const runs = [
      mutex.run('x', () => g.promise),
      mutex.run('x', async () => undefined),
      mutex.run('y', async () => undefined),
    ];
    g.open();
    await Promise.all(runs);
    assert.equal(await mutex.run('x', async () => 'again'), 'again');
  });

  it('holds nothing for a key once its last run is done, failed runs included', async () => {
    const mutex = new KeyedMutex();
    assert.equal(mutex.size, 0);
    const first = gate();
    const second = gate();
    const runs = [
      mutex.run('x', () => first.promise),
      mutex.run('x', () => second.promise),
      mutex.run('y', async () => 'y'),
    ];
    assert.equal(mutex.size, 2, 'x and y are held');
    await runs[2];
    assert.equal(mutex.size, 1, 'y is done and gone; x still runs');
    first.open();
    await runs[0];
    assert.equal(mutex.size, 1, 'x is still held by its second run');
    second.fail(new Error('boom'));
    await assert.rejects(runs[1] as Promise<unknown>, /boom/);
    assert.equal(mutex.size, 0, 'a failed last run lets its key go too');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { maxLength: 40 }), async (keys) => {
        const many = new KeyedMutex();
        await Promise.allSettled(
          keys.map((key, i) => many.run(key, async () => (i % 4 === 0 ? Promise.reject(new Error('no')) : i))),
        );
        assert.equal(many.size, 0);
      }),
      { numRuns: 50 },
    );
  });

  it('for any interleaving of keys, each key runs alone and in order (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 30 }), async (keys) => {
        const mutex = new KeyedMutex();
        const active = new Map<string, number>();
        const order = new Map<string, number[]>();
        await Promise.all(
          keys.map((key, i) =>
            mutex.run(key, async () => {
              assert.equal(active.get(key) ?? 0, 0, `two runs of ${key} at once`);
              active.set(key, 1);
              order.set(key, [...(order.get(key) ?? []), i]);
              // Yield a varying number of times, so runs of different keys interleave.
              for (let n = 0; n < i % 3; n++) await Promise.resolve();
              active.set(key, 0);
            }),
          ),
        );
        for (const [key, seen] of order) {
          const expected = keys.flatMap((k, i) => (k === key ? [i] : []));
          assert.deepEqual(seen, expected, `order of ${key}`);
        }
      }),
      { numRuns: 100 },
    );
  });
});
