/**
 * How moments are ordered (core/moment.ts): by the monotonic clock within one boot, an earlier boot
 * before the running one, the wall clock only where nothing else is known.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { type Moment, atOrBefore, momentOf, msBetween, shifted } from '../../src/core/moment.ts';

const at = (mono: number, wall: number, boot = 'now'): Moment => ({ wall, stamp: { boot, at: mono } });

describe('moments', () => {
  it('orders two readings of one boot by the monotonic clock, whatever the wall clock did between them', () => {
    assert.equal(atOrBefore(at(1, 5_000), at(2, 1_000), 'now'), true, 'stepped back');
    assert.equal(atOrBefore(at(2, 1_000), at(1, 5_000), 'now'), false, 'stepped forward');
    assert.equal(atOrBefore(at(1, 1), at(1, 1), 'now'), true);
  });

  it('puts a moment of an earlier boot before one of the running boot, whatever the wall clocks say', () => {
    assert.equal(atOrBefore(at(9_999, 9_000, 'earlier'), at(1, 1_000), 'now'), true);
    assert.equal(atOrBefore(at(1, 1_000), at(9_999, 9_000, 'earlier'), 'now'), false);
  });

  it('falls back on the wall clock for two earlier boots, an unstamped moment, or an unknown running boot', () => {
    assert.equal(atOrBefore(at(9, 1_000, 'a'), at(1, 2_000, 'b'), 'now'), true);
    assert.equal(atOrBefore({ wall: 2_000 }, at(1, 1_000), 'now'), false);
    assert.equal(atOrBefore(at(1, 3_000, 'a'), at(2, 2_000, 'b'), undefined), false);
  });

  it('measures time between moments on the monotonic clock within a boot', () => {
    const clock = new ManualClock(10_000);
    const then = momentOf(clock);
    clock.advance(500);
    clock.stepWall(-86_400_000);
    assert.equal(msBetween(then, momentOf(clock)), 500);
    assert.equal(msBetween(momentOf(clock), shifted(then, 2_000)), 1_500);
    assert.deepEqual(momentOf(new ManualClock(7, { boot: undefined })), { wall: 7 });
  });
});
