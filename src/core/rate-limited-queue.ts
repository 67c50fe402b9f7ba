/**
 * A rate-limited work queue of keys, in the shape of client-go's `util/workqueue`: workers take
 * keys, a key that fails is put back after a delay that a rate limiter computes, and the caller
 * decides how many retries a key deserves (`retries(key)` against `DEFAULT_MAX_RETRIES`).
 *
 * Hand-written because no maintained JS library does client-go's workqueue semantics on an
 * injected clock: p-queue and cockatiel run on real timers and neither coalesces keys or
 * remembers failures per key.
 *
 * Guarantees:
 * - never processes one key twice at once ("stingy"), whatever the number of workers;
 * - coalescing: adding a key that is already waiting does nothing; adding a key that is being
 *   processed marks it dirty, and it is processed exactly once more after the current run ends;
 * - fairness: ready keys are handed out first in, first out;
 * - every wait is on the injected Clock. Rate limiters are pure policy: `when(key)` returns a delay
 *   and never sleeps. The queue applies it with `addAfter`;
 * - a delayed key is added when its delay ends even if it was added in between (as in client-go),
 *   so handlers must be idempotent: they look at the current state of the key, not at an event;
 * - shutdown (the `run` signal aborts, or `shutDown()`): no handler starts again, waiting and
 *   delayed keys are dropped, later adds are ignored, and handlers already running finish before
 *   `run` resolves.
 */
import { ExponentialBackoff } from './backoff.ts';
import type { CancelTimer, Clock } from './clock.ts';

/** How many times a caller retries a failing key before it gives up, unless it chooses otherwise. */
export const DEFAULT_MAX_RETRIES = 5;

/** Decides how long a key waits before it is retried. Never sleeps. */
export interface RateLimiter {
  /** The delay before `key`'s next attempt; counts the attempt as a retry. */
  when(key: string): number;
  /** Forgets `key`'s failures: it succeeded, or the caller gave up on it. */
  forget(key: string): void;
  /** How many retries `key` has had since it was last forgotten. */
  retries(key: string): number;
}

/**
 * Per-key exponential backoff: base on the first retry, doubling up to max (client-go's
 * ItemExponentialFailureRateLimiter).
 */
export class ItemExponentialRateLimiter implements RateLimiter {
  readonly #backoff: ExponentialBackoff;
  readonly #failures = new Map<string, number>();

  constructor(options: { baseMs?: number; maxMs?: number } = {}) {
    this.#backoff = new ExponentialBackoff({
      initialMs: options.baseMs ?? 5,
      maxMs: options.maxMs ?? 1_000_000,
      factor: 2,
    });
  }

  when(key: string): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    return this.#backoff.delay(failures);
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  retries(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/**
 * One token bucket for all keys (client-go's BucketRateLimiter over Go's rate.Limiter): `burst`
 * retries go at once, then `perSecond`. Every `when` reserves a token, possibly one not yet
 * refilled, and returns how long until it is.
 */
export class TokenBucketRateLimiter implements RateLimiter {
  readonly #clock: Clock;
  readonly #perSecond: number;
  readonly #burst: number;
  /** May go negative: reservations made ahead of the refill. */
  #tokens: number;
  /** When #tokens was last refilled (monotonic clock); refills are computed lazily, on the next `when`. */
  #last: number;

  constructor(options: { clock: Clock; perSecond?: number; burst?: number }) {
    const perSecond = options.perSecond ?? 10;
    const burst = options.burst ?? 100;
    if (!(perSecond > 0 && burst >= 1))
      throw new RangeError(`a token bucket needs a rate > 0 and a burst >= 1 (got ${perSecond}, ${burst})`);
    this.#clock = options.clock;
    this.#perSecond = perSecond;
    this.#burst = burst;
    this.#tokens = burst;
    this.#last = options.clock.monotonic();
  }

  when(_key: string): number {
    this.#refill();
    this.#tokens -= 1;
    return this.#tokens < 0 ? (-this.#tokens * 1_000) / this.#perSecond : 0;
  }

  /** Takes a token if a whole one is there now, reserving none ahead: for callers that drop rather than wait. */
  tryTake(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #refill(): void {
    const now = this.#clock.monotonic();
    this.#tokens = Math.min(this.#burst, this.#tokens + (Math.max(0, now - this.#last) * this.#perSecond) / 1_000);
    this.#last = now;
  }

  /** The bucket is shared: one key's success gives no token back. */
  forget(_key: string): void {}

  retries(_key: string): number {
    return 0;
  }
}

/** The longest delay of several limiters, each of which is told of every retry (client-go's MaxOfRateLimiter). */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.#limiters = limiters;
  }

  when(key: string): number {
    // Every limiter is asked, not only until the largest: the bucket must count each retry.
    return this.#limiters.map((l) => l.when(key)).reduce((a, b) => Math.max(a, b), 0);
  }

  forget(key: string): void {
    for (const l of this.#limiters) l.forget(key);
  }

  retries(key: string): number {
    return this.#limiters.map((l) => l.retries(key)).reduce((a, b) => Math.max(a, b), 0);
  }
}

/** client-go's default controller limiter: 5 ms doubling to 1000 s per key, and 10/s with a burst of 100 overall. */
export function defaultRateLimiter(clock: Clock): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialRateLimiter(), new TokenBucketRateLimiter({ clock }));
}

export interface RateLimitedQueueOptions {
  readonly clock: Clock;
  /** Default: `defaultRateLimiter(clock)`. */
  readonly rateLimiter?: RateLimiter;
}

export interface RunOptions {
  /** Aborting it shuts the queue down. */
  readonly signal: AbortSignal;
  /** Keys processed in parallel (never the same key twice). Default 1. */
  readonly workers?: number;
  /**
   * Told of a handler that threw; the key is then done, not retried. Handlers decide retries
   * themselves (`addRateLimited` or `forget`), so a throw is a bug in the handler.
   */
  readonly onError: (key: string, error: unknown) => void;
}

export interface RateLimitedQueueStats {
  /** Keys ready and waiting for a worker. */
  readonly depth: number;
  /** Keys a handler is running for. */
  readonly processing: number;
  /** Keys waiting on the clock (`addAfter`, `addRateLimited`). */
  readonly delayed: number;
  /** `addRateLimited` calls since the queue was made. */
  readonly retries: number;
}

export class RateLimitedQueue {
  readonly #clock: Clock;
  readonly #limiter: RateLimiter;
  /** Ready keys in the order they became ready; each is also in #dirty. */
  readonly #ready: string[] = [];
  /** Keys that need processing: ready ones, and ones added again while being processed. */
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  /** Keys waiting on the clock, with when they are due, so a later addAfter keeps the earlier time. */
  readonly #delayed = new Map<string, { readonly at: number; readonly cancel: CancelTimer }>();
  /** Idle workers, first come first served; non-empty only while #ready is empty. */
  readonly #idle: Array<(key: string | undefined) => void> = [];
  #shuttingDown = false;
  #retries = 0;

  constructor(options: RateLimitedQueueOptions) {
    this.#clock = options.clock;
    this.#limiter = options.rateLimiter ?? defaultRateLimiter(options.clock);
  }

  /** Queues `key` now, unless it is queued already; a key being processed is processed once more after. */
  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (!this.#processing.has(key)) this.#makeReady(key);
  }

  /** Adds `key` once `ms` have passed on the clock; a key already delayed keeps the earlier time. */
  addAfter(key: string, ms: number): void {
    if (this.#shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.#clock.monotonic() + ms;
    const waiting = this.#delayed.get(key);
    if (waiting !== undefined && waiting.at <= at) return;
    waiting?.cancel();
    const cancel = this.#clock.setTimer(ms, () => {
      this.#delayed.delete(key);
      this.add(key);
    });
    this.#delayed.set(key, { at, cancel });
  }

  /** Adds `key` after the rate limiter's delay for it, and counts a retry. */
  addRateLimited(key: string): void {
    if (this.#shuttingDown) return;
    this.#retries += 1;
    this.addAfter(key, this.#limiter.when(key));
  }

  /** Resets `key`'s backoff: call it when the key succeeded or was given up on. */
  forget(key: string): void {
    this.#limiter.forget(key);
  }

  /** How many times `key` was retried since it was last forgotten. */
  retries(key: string): number {
    return this.#limiter.retries(key);
  }

  stats(): RateLimitedQueueStats {
    return {
      depth: this.#ready.length,
      processing: this.#processing.size,
      delayed: this.#delayed.size,
      retries: this.#retries,
    };
  }

  /**
   * Runs `handler` for each key as it becomes ready, on `workers` workers, until the signal aborts;
   * resolves once the handlers running then have finished.
   */
  async run(handler: (key: string) => Promise<void>, options: RunOptions): Promise<void> {
    const workers = options.workers ?? 1;
    if (!(Number.isInteger(workers) && workers >= 1))
      throw new RangeError(`workers must be a whole number >= 1 (got ${workers})`);
    const { signal } = options;
    const stop = (): void => this.shutDown();
    if (signal.aborted) stop();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await Promise.all(Array.from({ length: workers }, () => this.#work(handler, options.onError)));
    } finally {
      signal.removeEventListener('abort', stop);
    }
  }

  /** Stops handing out keys, drops waiting and delayed keys and ignores later adds. */
  shutDown(): void {
    this.#shuttingDown = true;
    for (const { cancel } of this.#delayed.values()) cancel();
    this.#delayed.clear();
    this.#ready.length = 0;
    this.#dirty.clear();
    for (const wake of this.#idle.splice(0)) wake(undefined);
  }

  async #work(handler: (key: string) => Promise<void>, onError: (key: string, error: unknown) => void): Promise<void> {
    for (;;) {
      const key = await this.#get();
      if (key === undefined) return;
      try {
        await handler(key);
      } catch (error) {
        onError(key, error);
      } finally {
        this.#done(key);
      }
    }
  }

  /** The next ready key, marked processing; undefined once the queue shuts down. */
  #get(): Promise<string | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const key = this.#ready.shift();
    if (key === undefined) return new Promise((resolve) => this.#idle.push(resolve));
    this.#take(key);
    return Promise.resolve(key);
  }

  #done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) this.#makeReady(key);
  }

  /** Hands `key` to an idle worker, or queues it behind the keys ready before it. */
  #makeReady(key: string): void {
    const worker = this.#idle.shift();
    if (worker === undefined) {
      this.#ready.push(key);
      return;
    }
    // Taken now, not when the worker resumes, so no other worker or add sees it as ready.
    this.#take(key);
    worker(key);
  }

  #take(key: string): void {
    this.#dirty.delete(key);
    this.#processing.add(key);
  }
}
