/**
 * PeriodicTask on a manual clock: runs every interval measured from the end of the last run, one
 * run at a time (a run asked for during another follows it), reports failures and keeps going,
 * and stops with its signal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { PeriodicTask } from '../../src/core/periodic-task.ts';
import { flush } from '../helpers/event-loop.ts';

/** Lets every promise already resolved run its continuations (no time passes). */

describe('PeriodicTask', () => {
  it('runs every interval from the end of the last run, reports failures and goes on, and stops with its signal', async () => {
    const clock = new ManualClock(0);
    const runs: number[] = [];
    const errors: string[] = [];
    const task = new PeriodicTask({
      clock,
      intervalMs: 1_000,
      run: async () => {
        runs.push(clock.now());
        if (runs.length === 2) throw new Error('second run fails');
      },
      onError: (error) => errors.push((error as Error).message),
    });
    const abort = new AbortController();
    task.start(abort.signal);
    clock.advance(999);
    await flush();
    assert.deepEqual(runs, []);
    clock.advance(1);
    await flush();
    clock.advance(1_000);
    await flush();
    clock.advance(1_000);
    await flush();
    assert.deepEqual(runs, [1_000, 2_000, 3_000]);
    assert.deepEqual(errors, ['second run fails']);
    abort.abort();
    clock.advance(10_000);
    await flush();
    assert.deepEqual(runs, [1_000, 2_000, 3_000], 'nothing after the signal');
    assert.equal(clock.pendingTimers, 0);
  });

  it('never runs twice at once: a run asked for during another starts after it, one asked for when idle starts at once', async () => {
    const clock = new ManualClock(0);
    const log: string[] = [];
    let finish: () => void = () => undefined;
    let n = 0;
    const task = new PeriodicTask({
      clock,
      intervalMs: 60_000,
      run: async () => {
        const me = ++n;
        log.push(`start ${me}`);
        if (me === 1) await new Promise<void>((resolve) => (finish = resolve));
        log.push(`end ${me}`);
        return me;
      },
    });
    const first = task.runNow();
    assert.deepEqual(log, ['start 1'], 'started before runNow returned');
    const second = task.runNow();
    await flush();
    assert.deepEqual(log, ['start 1'], 'the second waits for the first');
    finish();
    assert.equal(await first, 1);
    assert.equal(await second, 2);
    assert.deepEqual(log, ['start 1', 'end 1', 'start 2', 'end 2']);
  });
});
