/**
 * A per-key ordered retry queue: events for one key are handled one at a time, in the order they
 * were pushed; different keys proceed independently. When handling an event fails, that key backs
 * off (the BackoffPolicy, applied on the injected Clock) and every later event for it waits behind
 * the failed one; when the backoff expires the key's queue is replayed from the failed event, in
 * order. A success resets the key's failure count.
 *
 * Guarantees:
 * - no event is ever dropped: an event pushed while its key is being handled, while it is backing
 *   off, or at the very moment a failure re-arms it, is appended to that key's queue and handled
 *   after the ones before it (the failure path is synchronous from the rejection to the re-arm, so
 *   nothing can slip between them);
 * - a failing key never delays another key;
 * - after stop(), no handler is started again and pending timers are cancelled.
 */
import type { BackoffPolicy } from './backoff.ts';
import type { CancelTimer, Clock } from './clock.ts';

export interface KeyState {
  readonly key: string;
  readonly queued: number;
  readonly failures: number;
  readonly lastError?: string;
  /** When the next attempt is due (ms since epoch), while backing off. */
  readonly retryAt?: number;
}

export interface OrderedRetryQueueOptions<E> {
  readonly clock: Clock;
  readonly backoff: BackoffPolicy;
  readonly handle: (key: string, event: E) => Promise<void>;
  /** Told of every failure (for logs); the event stays queued. */
  readonly onFailure?: (key: string, event: E, error: unknown, retryInMs: number) => void;
}

interface Lane<E> {
  readonly events: E[];
  running: boolean;
  failures: number;
  lastError?: string;
  retryAt?: number;
  cancel?: CancelTimer;
}

export class OrderedRetryQueue<E> {
  readonly #o: OrderedRetryQueueOptions<E>;
  readonly #lanes = new Map<string, Lane<E>>();
  readonly #idleWaiters = new Set<() => void>();
  #stopped = false;
  #handled = 0;

  constructor(options: OrderedRetryQueueOptions<E>) {
    this.#o = options;
  }

  push(key: string, event: E): void {
    if (this.#stopped) return;
    let lane = this.#lanes.get(key);
    if (lane === undefined) {
      lane = { events: [], running: false, failures: 0 };
      this.#lanes.set(key, lane);
    }
    lane.events.push(event);
    // A running lane picks the event up in its loop; a backing-off lane on its timer.
    if (!lane.running && lane.cancel === undefined) void this.#drain(key, lane);
  }

  async #drain(key: string, lane: Lane<E>): Promise<void> {
    lane.running = true;
    while (lane.events.length > 0 && !this.#stopped) {
      const event = lane.events[0] as E;
      try {
        await this.#o.handle(key, event);
      } catch (error) {
        lane.failures += 1;
        lane.lastError = error instanceof Error ? error.message : String(error);
        const wait = this.#o.backoff.delay(lane.failures);
        lane.retryAt = this.#o.clock.now() + wait;
        lane.running = false;
        lane.cancel = this.#o.clock.setTimer(wait, () => {
          lane.cancel = undefined;
          delete lane.retryAt;
          void this.#drain(key, lane);
        });
        this.#o.onFailure?.(key, event, error, wait);
        return;
      }
      lane.events.shift();
      lane.failures = 0;
      delete lane.lastError;
      this.#handled += 1;
    }
    lane.running = false;
    if (lane.events.length === 0 && lane.cancel === undefined && this.#lanes.get(key) === lane) this.#lanes.delete(key);
    if (this.#lanes.size === 0) for (const wake of [...this.#idleWaiters]) wake();
  }

  /** Events handled successfully since start. */
  get handled(): number {
    return this.#handled;
  }

  /** Keys with events waiting or backing off. */
  keys(): KeyState[] {
    return [...this.#lanes].map(([key, lane]) => ({
      key,
      queued: lane.events.length,
      failures: lane.failures,
      ...(lane.lastError === undefined ? {} : { lastError: lane.lastError }),
      ...(lane.retryAt === undefined ? {} : { retryAt: lane.retryAt }),
    }));
  }

  /** Resolves when no key has anything queued (at once if none has). */
  idle(): Promise<void> {
    if (this.#lanes.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        this.#idleWaiters.delete(wake);
        resolve();
      };
      this.#idleWaiters.add(wake);
    });
  }

  stop(): void {
    this.#stopped = true;
    for (const lane of this.#lanes.values()) lane.cancel?.();
    this.#lanes.clear();
    for (const wake of [...this.#idleWaiters]) wake();
  }
}
