/**
 * A per-key ordered retry queue: events for one key are handled one at a time, in the order they
 * were pushed; different keys proceed independently. When handling an event fails, that key backs
 * off (its BackoffPolicy, applied on the injected Clock) and every later event for it waits behind
 * the failed one; when the backoff expires the key's queue is replayed from the failed event, in
 * order. A success resets the key's failure count.
 *
 * Guarantees:
 * - never processes one key twice at once: a key has at most one handler running, whether it was
 *   started by a push, a backoff timer or `flush`;
 * - no event is ever dropped: an event pushed while its key is being handled, while it is backing
 *   off, or at the very moment a failure re-arms it, is appended to that key's queue and handled
 *   after the ones before it (the failure path is synchronous from the rejection to the re-arm, so
 *   nothing can slip between them);
 * - a failing key never delays another key;
 * - after stop(), no handler is started again, pending timers are cancelled and every waiter is
 *   woken.
 *
 * The caller, not the queue, decides what is worth retrying: the queue retries until the handler
 * succeeds (a handler that gives up on an event returns instead of throwing).
 */
import type { BackoffPolicy } from './backoff.ts';
import type { CancelTimer, Clock } from './clock.ts';
import { defined } from './defined.ts';

export interface KeyState {
  readonly key: string;
  readonly queued: number;
  readonly failures: number;
  readonly lastError?: string;
  /** When the next attempt is due (ms since epoch), while backing off. */
  readonly retryAt?: number;
}

/** How a key's run ended, for `flush`: its queue emptied, or an attempt failed and it backs off. */
export type FlushOutcome = { readonly ok: true } | { readonly ok: false; readonly error: string };

export interface OrderedRetryQueueOptions<E> {
  readonly clock: Clock;
  /** One policy for every key, or one chosen per key (keys of different sources back off differently). */
  readonly backoff: BackoffPolicy | ((key: string) => BackoffPolicy);
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
  cancel?: CancelTimer | undefined;
  /** Told once when the lane stops running (emptied, or failed and backing off): flush and settled. */
  readonly waiters: Set<(outcome: FlushOutcome) => void>;
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
      lane = { events: [], running: false, failures: 0, waiters: new Set() };
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
        const message = error instanceof Error ? error.message : String(error);
        lane.failures += 1;
        lane.lastError = message;
        const wait = this.#policy(key).delay(lane.failures);
        lane.retryAt = this.#o.clock.now() + wait;
        lane.running = false;
        lane.cancel = this.#o.clock.setTimer(wait, () => {
          lane.cancel = undefined;
          delete lane.retryAt;
          void this.#drain(key, lane);
        });
        this.#o.onFailure?.(key, event, error, wait);
        this.#notify(lane, { ok: false, error: message });
        return;
      }
      lane.events.shift();
      lane.failures = 0;
      delete lane.lastError;
      this.#handled += 1;
    }
    lane.running = false;
    if (lane.events.length === 0 && lane.cancel === undefined && this.#lanes.get(key) === lane) this.#lanes.delete(key);
    this.#notify(lane, { ok: true });
    if (this.#lanes.size === 0) for (const wake of [...this.#idleWaiters]) wake();
  }

  #policy(key: string): BackoffPolicy {
    const { backoff } = this.#o;
    return typeof backoff === 'function' ? backoff(key) : backoff;
  }

  #notify(lane: Lane<E>, outcome: FlushOutcome): void {
    const waiters = [...lane.waiters];
    lane.waiters.clear();
    for (const wake of waiters) wake(outcome);
  }

  /** Whether `key` has events waiting, running or backing off. */
  has(key: string): boolean {
    return this.#lanes.has(key);
  }

  /**
   * Handles `key`'s queue now, cutting a backoff short (an ADD must not wait minutes for a DEL of
   * its own attachment), and resolves when the queue has emptied or an attempt failed; a key that
   * is running already is waited for, never started twice. A failure backs the key off as usual.
   */
  flush(key: string): Promise<FlushOutcome> {
    const lane = this.#lanes.get(key);
    if (this.#stopped) return Promise.resolve({ ok: false, error: 'the queue is stopped' });
    if (lane === undefined) return Promise.resolve({ ok: true });
    const outcome = new Promise<FlushOutcome>((resolve) => lane.waiters.add(resolve));
    if (!lane.running) {
      lane.cancel?.();
      lane.cancel = undefined;
      delete lane.retryAt;
      void this.#drain(key, lane);
    }
    return outcome;
  }

  /**
   * Resolves once none of `keys` (default: the keys running now) is running: each has emptied or
   * is backing off. For a caller that reports what the queue did while it looked.
   */
  async settled(keys?: Iterable<string>): Promise<void> {
    const lanes = keys === undefined ? [...this.#lanes.values()] : [...keys].flatMap((k) => this.#lanes.get(k) ?? []);
    await Promise.all(
      lanes.filter((l) => l.running).map((l) => new Promise<unknown>((resolve) => l.waiters.add(resolve))),
    );
  }

  /** Events handled successfully since start. */
  get handled(): number {
    return this.#handled;
  }

  /** Keys with events waiting or backing off. */
  keys(): KeyState[] {
    return [...this.#lanes].map(([key, lane]) => stateOf(key, lane));
  }

  /** One key's state; undefined when it has nothing queued. */
  state(key: string): KeyState | undefined {
    const lane = this.#lanes.get(key);
    return lane === undefined ? undefined : stateOf(key, lane);
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
    for (const lane of this.#lanes.values()) {
      lane.cancel?.();
      this.#notify(lane, { ok: false, error: 'the queue is stopped' });
    }
    this.#lanes.clear();
    for (const wake of [...this.#idleWaiters]) wake();
  }
}

function stateOf<E>(key: string, lane: Lane<E>): KeyState {
  return {
    key,
    queued: lane.events.length,
    failures: lane.failures,
    ...defined({ lastError: lane.lastError, retryAt: lane.retryAt }),
  };
}
