/**
 * When something happened, in a form that orders across processes and survives a wall clock
 * stepped back or forward: the wall clock reading (for people, and the last resort) and, where the
 * boot could be told, the boot's monotonic clock reading (core/clock.ts).
 *
 * How two moments are ordered (`atOrBefore`), by what cannot go backwards:
 * - both stamped in one boot: by the monotonic readings, whoever took them (the plugin writing a
 *   journal entry and the agent allocating read the same CLOCK_MONOTONIC);
 * - stamped in different boots, one of them the boot running now: the other is from an earlier
 *   boot, so it came first (boots follow each other; nothing is stamped in a boot to come);
 * - otherwise (two earlier boots, or a moment recorded without a stamp by an older Warren or a host
 *   without a boot ID): the wall clock is all there is, and it decides.
 */
import type { Clock } from './clock.ts';

/** A reading of one boot's monotonic clock (ms): comparable with any reading of the same boot. */
export interface BootStamp {
  readonly boot: string;
  readonly at: number;
}

export interface Moment {
  /** Milliseconds since the epoch, on the wall clock. */
  readonly wall: number;
  /** The boot's monotonic clock, where the boot could be told. */
  readonly stamp?: BootStamp;
}

/** The clock's reading now. */
export function momentOf(clock: Clock): Moment {
  const boot = clock.boot;
  return boot === undefined ? { wall: clock.now() } : { wall: clock.now(), stamp: { boot, at: clock.monotonic() } };
}

/** `m` moved by `ms` on both clocks (negative: earlier). */
export function shifted(m: Moment, ms: number): Moment {
  return m.stamp === undefined
    ? { wall: m.wall + ms }
    : { wall: m.wall + ms, stamp: { boot: m.stamp.boot, at: m.stamp.at + ms } };
}

/** Whether `a` happened at or before `b` (see the module header); `boot`: the boot running now. */
export function atOrBefore(a: Moment, b: Moment, boot: string | undefined): boolean {
  if (a.stamp !== undefined && b.stamp !== undefined) {
    if (a.stamp.boot === b.stamp.boot) return a.stamp.at <= b.stamp.at;
    if (boot !== undefined && b.stamp.boot === boot) return true;
    if (boot !== undefined && a.stamp.boot === boot) return false;
  }
  return a.wall <= b.wall;
}

/**
 * Milliseconds from `now` until `m` (negative: past), measured on the monotonic clock when both are
 * of one boot; otherwise on the wall clock.
 */
export function msBetween(now: Moment, m: Moment): number {
  if (now.stamp !== undefined && m.stamp !== undefined && now.stamp.boot === m.stamp.boot)
    return m.stamp.at - now.stamp.at;
  return m.wall - now.wall;
}
