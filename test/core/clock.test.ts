/**
 * The injected clock: ManualClock fires timers in time order (ties in the order they were set) as
 * `advance` passes them, never goes back, and shows timers set during a firing within the same
 * span; systemClock's timers really fire, and never before their time on the monotonic clock.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, readBootID, sleepOn, systemClock } from '../../src/core/clock.ts';
import { HANG_BOUND_MS } from '../helpers/processes.ts';

describe('ManualClock', () => {
  test('starts at the given time and moves only when advanced', () => {
    const clock = new ManualClock(1_000);
    assert.equal(clock.now(), 1_000);
    assert.equal(clock.now(), 1_000);
    clock.advance(250);
    assert.equal(clock.now(), 1_250);
    clock.advance(0);
    assert.equal(clock.now(), 1_250);
    assert.equal(new ManualClock().now(), 0);
  });

  test('timers fire in time order as advance passes them, each seeing its own due time', () => {
    const clock = new ManualClock();
    const fired: Array<[string, number]> = [];
    clock.setTimer(30, () => fired.push(['c', clock.now()]));
    clock.setTimer(10, () => fired.push(['a', clock.now()]));
    clock.setTimer(20, () => fired.push(['b', clock.now()]));
    clock.setTimer(100, () => fired.push(['late', clock.now()]));
    clock.advance(9);
    assert.deepEqual(fired, []);
    clock.advance(16);
    assert.deepEqual(fired, [
      ['a', 10],
      ['b', 20],
    ]);
    assert.equal(clock.now(), 25);
    clock.advance(5);
    assert.deepEqual(fired.at(-1), ['c', 30]);
    assert.equal(clock.pendingTimers, 1);
    clock.advance(1_000);
    assert.deepEqual(fired.at(-1), ['late', 100]);
    assert.equal(clock.now(), 1_030);
    assert.equal(clock.pendingTimers, 0);
  });

  test('timers due at the same instant fire in the order they were set', () => {
    const clock = new ManualClock();
    const fired: number[] = [];
    for (let i = 0; i < 10; i++) clock.setTimer(5, () => fired.push(i));
    clock.advance(5);
    assert.deepEqual(fired, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test('a timer fires exactly once', () => {
    const clock = new ManualClock();
    let count = 0;
    clock.setTimer(1, () => count++);
    clock.advance(1);
    clock.advance(1);
    clock.advance(100);
    assert.equal(count, 1);
  });

  test('a zero or negative delay fires on the next advance, even advance(0)', () => {
    const clock = new ManualClock(50);
    const fired: Array<[string, number]> = [];
    clock.setTimer(0, () => fired.push(['zero', clock.now()]));
    clock.setTimer(-10, () => fired.push(['negative', clock.now()]));
    assert.deepEqual(fired, []);
    clock.advance(0);
    assert.deepEqual(fired, [
      ['zero', 50],
      ['negative', 50],
    ]);
  });

  test('a cancelled timer never fires, and cancelling twice or after firing is harmless', () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    const cancelA = clock.setTimer(10, () => fired.push('a'));
    const cancelB = clock.setTimer(10, () => fired.push('b'));
    clock.setTimer(10, () => fired.push('c'));
    cancelB();
    cancelB();
    assert.equal(clock.pendingTimers, 2);
    clock.advance(10);
    assert.deepEqual(fired, ['a', 'c']);
    cancelA();
    assert.equal(clock.pendingTimers, 0);
  });

  test('a timer cancelled by an earlier timer in the same advance does not fire', () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    let cancelLater = (): void => undefined;
    clock.setTimer(5, () => {
      fired.push('first');
      cancelLater();
    });
    cancelLater = clock.setTimer(8, () => fired.push('later'));
    clock.advance(10);
    assert.deepEqual(fired, ['first']);
  });

  test('timers set from inside a firing timer fire if they fall within the advanced span', () => {
    const clock = new ManualClock();
    const fired: Array<[string, number]> = [];
    clock.setTimer(10, () => {
      fired.push(['outer', clock.now()]);
      clock.setTimer(5, () => {
        fired.push(['inner', clock.now()]);
        clock.setTimer(0, () => fired.push(['innermost', clock.now()]));
      });
      clock.setTimer(50, () => fired.push(['beyond', clock.now()]));
    });
    clock.advance(20);
    assert.deepEqual(fired, [
      ['outer', 10],
      ['inner', 15],
      ['innermost', 15],
    ]);
    assert.equal(clock.now(), 20);
    assert.equal(clock.pendingTimers, 1);
    clock.advance(40);
    assert.deepEqual(fired.at(-1), ['beyond', 60]);
  });

  test('a periodic timer that re-arms itself fires once per period across one big advance', () => {
    const clock = new ManualClock();
    const at: number[] = [];
    const tick = (): void => {
      at.push(clock.now());
      clock.setTimer(100, tick);
    };
    clock.setTimer(100, tick);
    clock.advance(550);
    assert.deepEqual(at, [100, 200, 300, 400, 500]);
    assert.equal(clock.now(), 550);
  });

  test('advance with a negative span throws and leaves the time and timers alone', () => {
    const clock = new ManualClock(100);
    let fired = false;
    clock.setTimer(0, () => (fired = true));
    assert.throws(() => clock.advance(-1), RangeError);
    assert.equal(clock.now(), 100);
    assert.equal(fired, false);
    assert.equal(clock.pendingTimers, 1);
  });
});

describe('ManualClock, two clocks', () => {
  test('steps the wall clock alone, back or forward, as NTP does: the monotonic clock and the timers stay', () => {
    const clock = new ManualClock(1_000, { monotonic: 50 });
    const fired: number[] = [];
    clock.setTimer(100, () => fired.push(clock.monotonic()));
    clock.stepWall(-86_400_000);
    assert.equal(clock.now(), 1_000 - 86_400_000);
    assert.equal(clock.monotonic(), 50);
    clock.stepWall(3_600_000 + 86_400_000);
    assert.deepEqual(fired, [], 'a wall clock stepped forward fires no timer');
    clock.advance(100);
    assert.deepEqual(fired, [150]);
    assert.equal(clock.now(), 1_000 + 3_600_000 + 100, 'advance moves both');
  });

  test('a reboot draws a new boot ID and starts the monotonic clock again; the wall clock goes on', () => {
    const clock = new ManualClock(5_000);
    assert.equal(clock.boot, 'manual-boot');
    clock.advance(1_000);
    clock.reboot('boot-2', 3);
    assert.deepEqual([clock.boot, clock.monotonic(), clock.now()], ['boot-2', 3, 6_000]);
    assert.equal(new ManualClock(0, { boot: undefined }).boot, undefined);
  });
});

describe('systemClock, two clocks', () => {
  test('reads the boot ID Linux draws at each boot, and a monotonic clock that never goes back', () => {
    assert.match(systemClock.boot ?? '', /^[0-9a-f-]{36}$/);
    const a = systemClock.monotonic();
    const b = systemClock.monotonic();
    assert.ok(b >= a);
  });

  test('reads no boot ID where there is none', () => {
    assert.equal(readBootID('/nonexistent/boot_id'), undefined);
  });
});

describe('systemClock', () => {
  test('now() is the wall clock', () => {
    const before = Date.now();
    const now = systemClock.now();
    assert.ok(now >= before && now <= Date.now());
  });

  test('setTimer fires its callback', async () => {
    const fired = new Promise<'fired'>((resolve) => systemClock.setTimer(5, () => resolve('fired')));
    // The timer is unref'd, so keep the event loop alive while waiting, with a generous deadline.
    let deadline: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>(
      (resolve) => (deadline = setTimeout(() => resolve('timeout'), HANG_BOUND_MS)),
    );
    try {
      assert.equal(await Promise.race([fired, timeout]), 'fired');
    } finally {
      clearTimeout(deadline);
    }
  });

  test('a systemClock timer never fires before its time on the monotonic clock (a due check never sees it early)', async () => {
    // Node counts a timeout from its loop's whole-millisecond time, so a timer set late in a
    // millisecond can fire up to one millisecond before `ms` have passed on the monotonic clock; a
    // caller that checks its due time then (the plugin registry's retry) would never be woken
    // again. Each timer here is set in the last tenth of a millisecond, where that shows.
    const keepAlive = setTimeout(() => undefined, HANG_BOUND_MS);
    const early: number[] = [];
    try {
      for (let i = 0; i < 60; i++) {
        while (systemClock.monotonic() % 1 < 0.9) {
          // waits for the end of a millisecond: a few microseconds at most
        }
        const due = systemClock.monotonic() + 2;
        await new Promise<void>((resolve) =>
          systemClock.setTimer(2, () => {
            const left = due - systemClock.monotonic();
            if (left > 0) early.push(left);
            resolve();
          }),
        );
      }
    } finally {
      clearTimeout(keepAlive);
    }
    assert.deepEqual(early, [], 'timers fired this many ms before their due time');
  });

  test('a cancelled systemClock timer does not fire', async () => {
    let fired = false;
    const cancel = systemClock.setTimer(1, () => (fired = true));
    cancel();
    // Proving a negative needs some time; a later timer on the same clock is the fence.
    await new Promise<void>((resolve) => {
      const keepAlive = setTimeout(() => undefined, HANG_BOUND_MS);
      systemClock.setTimer(30, () => {
        clearTimeout(keepAlive);
        resolve();
      });
    });
    assert.equal(fired, false);
  });
});

describe('sleepOn', () => {
  test('resolves when the clock reaches the wait, not before, and leaves no timer', async () => {
    const clock = new ManualClock();
    let done = false;
    const waiting = sleepOn(clock, 1_000, new AbortController().signal).then(() => (done = true));
    clock.advance(999);
    await Promise.resolve();
    assert.equal(done, false);
    clock.advance(1);
    await waiting;
    assert.equal(clock.pendingTimers, 0);
  });

  test('resolves at once when the signal aborts, cancelling its timer', async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const waiting = sleepOn(clock, 60_000, controller.signal);
    assert.equal(clock.pendingTimers, 1);
    controller.abort();
    await waiting;
    assert.equal(clock.pendingTimers, 0);
  });
});
