/**
 * Time, injected. Everything in Warren that reads the time takes a `Clock`, so tests can step a
 * `ManualClock` instead of sleeping.
 */

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to. */
export class ManualClock implements Clock {
  #now: number;

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  advance(ms: number): void {
    if (ms < 0) throw new RangeError('a clock never goes back');
    this.#now += ms;
  }
}
