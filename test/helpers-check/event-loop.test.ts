/**
 * The shared `flush` (test/helpers/event-loop.ts) that unit tests call before asserting "done" or
 * "not yet". A flush that returned before a chain of promise callbacks had run would make a
 * "done" assertion flaky; one that fired a manual clock's timers would make every "not yet"
 * assertion pass for the wrong reason.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { flush } from '../helpers/event-loop.ts';
import { silentLogger } from '../helpers/logger.ts';

describe('flush', () => {
  it('runs a whole chain of promise callbacks queued before it, not only the first link', async () => {
    let links = 0;
    void (async () => {
      for (let i = 0; i < 100; i++) {
        await Promise.resolve();
        links += 1;
      }
    })();
    await flush();
    assert.equal(links, 100);
  });

  it('goes round the event loop as many times as told', async () => {
    let rounds = 0;
    const again = (): void => {
      rounds += 1;
      if (rounds < 10) setImmediate(again);
    };
    setImmediate(again);
    await flush(3);
    assert.equal(rounds, 3);
  });

  it('never fires a manual clock timer', async () => {
    const clock = new ManualClock(0);
    let fired = false;
    clock.setTimer(0, () => (fired = true));
    await flush(5);
    assert.equal(fired, false);
    clock.advance(0);
    assert.equal(fired, true);
  });
});

describe('silentLogger', () => {
  it('logs at no level, for itself or its children', () => {
    assert.equal(silentLogger.level, 'silent');
    const child = silentLogger.child({ source: 'test' });
    assert.equal(child.level, 'silent');
    assert.equal(child.isLevelEnabled('fatal'), false);
  });
});
