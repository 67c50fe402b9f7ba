/**
 * Work that runs every interval on the injected clock, one run at a time: the one shape of the
 * agent's and the store's periodic chores, each reporting the same status (`status`).
 *
 * Guarantees:
 * - never two runs at once: a run asked for (`runNow`) while another is under way starts after
 *   it, with a fresh look, and resolves with its own result; one asked for while none is under
 *   way starts at once;
 * - the first scheduled run starts one interval after `start`, or at `start` itself when the task
 *   says `runAtStart`; after that the interval is measured from the end of one scheduled run to
 *   the start of the next, so a slow run delays the next instead of piling runs up;
 * - a run that fails is reported to `onError` and the schedule goes on;
 * - after `stop`, or once the signal given to `start` aborts, no run is scheduled again;
 * - `status` counts every run (scheduled or asked for) and says how the last one ended.
 */
import type { CancelTimer, Clock } from './clock.ts';
import { defined } from './defined.ts';
import { messageOf } from './errors.ts';

export interface PeriodicTaskOptions<T> {
  readonly clock: Clock;
  readonly intervalMs: number;
  readonly run: () => Promise<T>;
  /** Told of a scheduled run that failed (a run asked for with runNow rejects to its caller). */
  readonly onError?: (error: unknown) => void;
  /** The first scheduled run starts at `start`, not one interval later. */
  readonly runAtStart?: boolean;
}

/** What a periodic chore reports in GET /v1/status. */
export interface PeriodicTaskStatus {
  /** Runs begun, scheduled or asked for. */
  readonly runs: number;
  /** Runs that failed. */
  readonly failures: number;
  /** When the last run ended (ISO 8601, wall clock); absent before one did. */
  readonly lastRunAt?: string;
  /** Why the last run failed; absent when it succeeded. */
  readonly lastError?: string;
}

export class PeriodicTask<T> {
  readonly #o: PeriodicTaskOptions<T>;
  #cancel: CancelTimer | undefined;
  /** The last run asked for; the next one chains behind it. */
  #last: Promise<T> | undefined;
  #stopped = false;
  #runs = 0;
  #failures = 0;
  #lastRunAt: number | undefined;
  #lastError: string | undefined;

  constructor(options: PeriodicTaskOptions<T>) {
    this.#o = options;
  }

  /** Schedules runs every interval until `stop` (or `signal` aborts). */
  start(signal?: AbortSignal): void {
    if (signal?.aborted === true) return;
    signal?.addEventListener('abort', () => this.stop(), { once: true });
    if (this.#o.runAtStart === true) this.#tick();
    else this.#schedule();
  }

  /**
   * Runs on schedule until `signal` aborts; settles once it did and the run under way, if any,
   * ended (so what that run uses may be closed then).
   */
  async runUntil(signal: AbortSignal): Promise<void> {
    this.start(signal);
    if (!signal.aborted)
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    await this.#last?.catch(() => undefined);
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
    const run = this.#last === undefined ? this.#once() : this.#last.catch(() => undefined).then(() => this.#once());
    this.#last = run;
    void run.then(
      () => this.#forget(run),
      () => this.#forget(run),
    );
    return run;
  }

  status(): PeriodicTaskStatus {
    return {
      runs: this.#runs,
      failures: this.#failures,
      ...(this.#lastRunAt === undefined ? {} : { lastRunAt: new Date(this.#lastRunAt).toISOString() }),
      ...defined({ lastError: this.#lastError }),
    };
  }

  /** One run, counted. */
  #once(): Promise<T> {
    this.#runs += 1;
    return start(this.#o.run).then(
      (value) => {
        this.#ended(undefined);
        return value;
      },
      (error: unknown) => {
        this.#failures += 1;
        this.#ended(messageOf(error));
        throw error;
      },
    );
  }

  #ended(error: string | undefined): void {
    this.#lastRunAt = this.#o.clock.now();
    this.#lastError = error;
  }

  #forget(run: Promise<T>): void {
    if (this.#last === run) this.#last = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.setTimer(this.#o.intervalMs, () => {
      this.#cancel = undefined;
      this.#tick();
    });
  }

  /** A scheduled run, and the next one scheduled after it ends. */
  #tick(): void {
    this.runNow()
      .catch((error: unknown) => this.#o.onError?.(error))
      .finally(() => this.#schedule());
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
