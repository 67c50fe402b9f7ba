/**
 * Work that runs every interval on the injected clock, one run at a time.
 *
 * Guarantees:
 * - never two runs at once: a run asked for (`runNow`) while another is under way starts after
 *   it, with a fresh look, and resolves with its own result; one asked for while none is under
 *   way starts at once;
 * - the interval is measured from the end of one scheduled run to the start of the next, so a
 *   slow run delays the next instead of piling runs up;
 * - a run that fails is reported to `onError` and the schedule goes on;
 * - after the signal given to `start` aborts, no run is scheduled again.
 */
import type { CancelTimer, Clock } from './clock.ts';

export interface PeriodicTaskOptions<T> {
  readonly clock: Clock;
  readonly intervalMs: number;
  readonly run: () => Promise<T>;
  /** Told of a scheduled run that failed (a run asked for with runNow rejects to its caller). */
  readonly onError?: (error: unknown) => void;
}

export class PeriodicTask<T> {
  readonly #o: PeriodicTaskOptions<T>;
  #cancel: CancelTimer | undefined;
  /** The last run asked for; the next one chains behind it. */
  #last: Promise<T> | undefined;
  #stopped = false;

  constructor(options: PeriodicTaskOptions<T>) {
    this.#o = options;
  }

  /** Schedules runs every interval until `signal` aborts. The first runs one interval from now. */
  start(signal: AbortSignal): void {
    if (signal.aborted) return;
    signal.addEventListener('abort', () => this.stop(), { once: true });
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
    this.#cancel = undefined;
  }

  /**
   * Runs now, after any run under way. With none under way the run starts before this returns
   * (its synchronous part runs at once), so a caller knows what happened before it asked.
   */
  runNow(): Promise<T> {
    const run =
      this.#last === undefined ? start(this.#o.run) : this.#last.catch(() => undefined).then(() => this.#o.run());
    this.#last = run;
    void run.then(
      () => this.#forget(run),
      () => this.#forget(run),
    );
    return run;
  }

  #forget(run: Promise<T>): void {
    if (this.#last === run) this.#last = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.setTimer(this.#o.intervalMs, () => {
      this.#cancel = undefined;
      this.runNow()
        .catch((error: unknown) => this.#o.onError?.(error))
        .finally(() => this.#schedule());
    });
  }
}

/** Calls `run`, turning a synchronous throw into a rejection. */
function start<T>(run: () => Promise<T>): Promise<T> {
  try {
    return run();
  } catch (error) {
    return Promise.reject(error);
  }
}
