/**
 * Time, injected. Everything in Warren that reads the time or waits takes a `Clock`, so tests step
 * a `ManualClock` instead of sleeping.
 */

export type CancelTimer = () => void;

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once, `ms` from now; the returned function cancels it. */
  setTimer(ms: number, fn: () => void): CancelTimer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref?.();
    return () => clearTimeout(t);
  },
};

interface ManualTimer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/** A clock that moves only when told to; timers fire, in order, as `advance` passes them. */
export class ManualClock implements Clock {
  #now: number;
  #timers: ManualTimer[] = [];
  /** Breaks ties between timers due at the same instant: first set, first fired. */
  #seq = 0;

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): CancelTimer {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /** Timers not yet fired. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  advance(ms: number): void {
    if (ms < 0) throw new RangeError('a clock never goes back');
    const target = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = target;
  }
}
