/**
 * The shared `flush` (test/helpers/event-loop.ts) that unit tests call before asserting "done" or
 * "not yet". A flush that returned before a chain of promise callbacks had run would make a
 * "done" assertion flaky; one that fired a manual clock's timers would make every "not yet"
 * assertion pass for the wrong reason. And `quiet`, which tests on a manual clock wait on before
 * each step: one that returned while a file's sync was still in flight would let the clock be
 * stepped past a bound while real work ran, as a loaded machine did.
 */
import assert from 'node:assert/strict';
import { closeSync, fdatasync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { flush, inFlight, quiet } from '../helpers/event-loop.ts';
import { silentLogger } from '../helpers/logger.ts';
import { tempDir } from '../helpers/processes.ts';

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

describe('quiet', () => {
  it("returns only after a file's sync in flight has finished and its callbacks have run", async () => {
    const fd = openSync(join(tempDir('warren-quiet-'), 'synced'), 'w');
    try {
      writeSync(fd, Buffer.alloc(1 << 20, 1));
      let after = '';
      fdatasync(fd, (error) => {
        // What the sync's callback starts in turn is waited for too.
        void Promise.resolve().then(() => (after = error === null ? 'synced' : String(error)));
      });
      assert.deepEqual(inFlight(), ['FSReqCallback'], 'the sync is in flight');
      await quiet();
      assert.equal(after, 'synced');
      assert.deepEqual(inFlight(), []);
    } finally {
      closeSync(fd);
    }
  });

  it('returns at once with nothing in flight, and never fires a manual clock timer', async () => {
    const clock = new ManualClock(0);
    let fired = false;
    clock.setTimer(0, () => (fired = true));
    await quiet();
    assert.equal(fired, false);
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
