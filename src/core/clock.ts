/**
 * Time, injected. Everything in Warren that reads the time or waits takes a `Clock`, so tests step
 * a `ManualClock` instead of sleeping.
 *
 * Two clocks, for two purposes. The wall clock (`now`) is for people and for what other machines
 * read; NTP may step it back or forward at any moment, so nothing decides "which came first" or
 * "how long has it been" from two of its readings. The boot's monotonic clock (`monotonic`, Linux's
 * CLOCK_MONOTONIC) never steps and is one clock for every process of one boot, so the plugin and
 * the agent can order what each saw; it restarts at each boot, so its readings are paired with the
 * boot's ID (core/moment.ts orders them). Timers run on the monotonic clock. The boot ID is the
 * host's inside a container too; a time namespace would offset CLOCK_MONOTONIC, and container
 * runtimes give none unless told to (the agent and the plugin must share one).
 */
import { readFileSync } from 'node:fs';

export type CancelTimer = () => void;

export interface Clock {
  /** Milliseconds since the Unix epoch, on the wall clock (may step back or forward). */
  now(): number;
  /** Milliseconds on this boot's monotonic clock: the same clock for every process of the boot. */
  monotonic(): number;
  /** The boot's ID (Linux's boot_id); undefined where it cannot be read, and then no stamp orders anything. */
  readonly boot: string | undefined;
  /**
   * Calls `fn` once, `ms` from now on the monotonic clock, and never before: when `fn` runs,
   * `monotonic()` has passed its reading at the call plus `ms` (callers compare against that
   * due time). The returned function cancels it.
   */
  setTimer(ms: number, fn: () => void): CancelTimer;
}

/**
 * Waits `ms` on `clock`, or until `signal` aborts, whichever comes first; resolves either way (the
 * caller looks at the signal), leaving no timer and no listener behind.
 */
export function sleepOn(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve(); // its abort was told already: nothing would end the wait
    const done = (): void => {
      signal.removeEventListener('abort', done);
      cancel();
      resolve();
    };
    const cancel = clock.setTimer(ms, done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Where Linux says which boot this is: a random UUID drawn at each boot. */
export const BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id';
const BOOT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The boot's ID, or undefined where it cannot be read (not Linux, /proc not mounted). */
export function readBootID(path = BOOT_ID_PATH): string | undefined {
  try {
    const id = readFileSync(path, 'utf8').trim();
    return BOOT_ID.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

let bootID: { id: string | undefined } | undefined;

export const systemClock: Clock = {
  now: () => Date.now(),
  // Node's hrtime is CLOCK_MONOTONIC on Linux (libuv's uv_hrtime): the clock every process of the boot reads.
  monotonic: () => Number(process.hrtime.bigint()) / 1e6,
  get boot() {
    bootID ??= { id: readBootID() };
    return bootID.id;
  },
  setTimer(ms, fn) {
    // Node starts a timeout from the event loop's cached time, which lags the monotonic clock by
    // however long the current turn of the loop has run (hundreds of ms on a loaded machine), so it
    // can fire that much before `ms` has passed on this clock. A timer that fires early waits out
    // the rest; a caller that checks its due time is never woken before it.
    const due = systemClock.monotonic() + Math.max(0, ms);
    let t: NodeJS.Timeout;
    const arm = (delay: number): void => {
      t = setTimeout(() => {
        const left = due - systemClock.monotonic();
        if (left > 0) arm(Math.ceil(left));
        else fn();
      }, delay);
      t.unref?.();
    };
    arm(Math.max(0, ms));
    return () => clearTimeout(t);
  },
};

interface ManualTimer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/**
 * A clock that moves only when told to; timers fire, in order, as `advance` passes them. `advance`
 * moves both clocks; `stepWall` moves the wall clock alone, back or forward, as NTP does.
 */
export class ManualClock implements Clock {
  #wall: number;
  #mono: number;
  #timers: ManualTimer[] = [];
  /** Breaks ties between timers due at the same instant: first set, first fired. */
  #seq = 0;
  boot: string | undefined;

  constructor(start = 0, options: { boot?: string | undefined; monotonic?: number } = {}) {
    this.#wall = start;
    this.#mono = options.monotonic ?? start;
    this.boot = 'boot' in options ? options.boot : 'manual-boot';
  }

  now(): number {
    return this.#wall;
  }

  monotonic(): number {
    return this.#mono;
  }

  setTimer(ms: number, fn: () => void): CancelTimer {
    const timer = { at: this.#mono + Math.max(0, ms), seq: this.#seq++, fn };
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
    const target = this.#mono + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      const step = Math.max(0, due.at - this.#mono);
      this.#mono += step;
      this.#wall += step;
      due.fn();
    }
    this.#wall += target - this.#mono;
    this.#mono = target;
  }

  /** Steps the wall clock alone by `ms` (negative: back), as NTP does; timers and the monotonic clock stay. */
  stepWall(ms: number): void {
    this.#wall += ms;
  }

  /** A reboot: a new boot ID and a monotonic clock starting again near zero; the wall clock goes on. */
  reboot(boot: string, monotonic = 0): void {
    this.boot = boot;
    this.#mono = monotonic;
    this.#timers = [];
  }
}
