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

  it('runs at start when told, then every interval from the end of the last run', async () => {
    const clock = new ManualClock(0);
    const runs: number[] = [];
    const task = new PeriodicTask({
      clock,
      intervalMs: 1_000,
      runAtStart: true,
      run: async () => void runs.push(clock.now()),
    });
    const abort = new AbortController();
    task.start(abort.signal);
    assert.deepEqual(runs, [0], 'the first run starts at start');
    await flush();
    clock.advance(999);
    await flush();
    assert.deepEqual(runs, [0]);
    clock.advance(1);
    await flush();
    assert.deepEqual(runs, [0, 1_000]);
    abort.abort();
    assert.equal(clock.pendingTimers, 0);
  });

  it('reports every run, the failures, when the last one ended and why it failed', async () => {
    const clock = new ManualClock(5_000);
    let fail = true;
    const task = new PeriodicTask({
      clock,
      intervalMs: 1_000,
      run: async () => {
        if (fail) throw new Error('the cluster is away');
      },
      onError: () => undefined,
    });
    assert.deepEqual(task.status(), { runs: 0, failures: 0 });
    await assert.rejects(task.runNow(), /the cluster is away/);
    assert.deepEqual(task.status(), {
      runs: 1,
      failures: 1,
      lastRunAt: new Date(5_000).toISOString(),
      lastError: 'the cluster is away',
    });
    fail = false;
    const abort = new AbortController();
    task.start(abort.signal);
    clock.advance(1_000);
    await flush();
    assert.deepEqual(task.status(), { runs: 2, failures: 1, lastRunAt: new Date(6_000).toISOString() });
    abort.abort();
  });

  it('runUntil settles once its signal aborted and the run under way ended', async () => {
    const clock = new ManualClock(0);
    let finish: () => void = () => undefined;
    const task = new PeriodicTask({
      clock,
      intervalMs: 1_000,
      run: () => new Promise<void>((resolve) => (finish = resolve)),
    });
    const abort = new AbortController();
    let settled = false;
    const running = task.runUntil(abort.signal).then(() => (settled = true));
    clock.advance(1_000);
    await flush();
    abort.abort();
    await flush();
    assert.equal(settled, false, 'the run under way has not ended');
    finish();
    await running;
    assert.equal(settled, true);
    assert.equal(clock.pendingTimers, 0, 'nothing scheduled after the signal');
  });
});
