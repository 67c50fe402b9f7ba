/**
 * The CNI calls the agent answered with an error, for the dashboard: the latest ones, newest first
 * (a ring of at most `capacity`), and counts since start by command, code and network. Memory is
 * bounded whatever the failure rate and whatever networks callers name: at most `maxKeys` counted
 * (command, code, network) keys, the calls past them counted under the network `(other)`.
 *
 * Guarantees: every text is kept as the caller sent it (the dashboard escapes it), cut to
 * `MAX_TEXT` characters, so a caller cannot grow the agent's memory with long names or messages.
 */
import type { Clock } from '../../core/clock.ts';
import type { CniFailure, CniFailureCount } from '../../api/dashboard.ts';
import type { FailedCall, Telemetry } from './telemetry.ts';

export const DEFAULT_FAILURES = 50;
/** The most (command, code, network) keys counted apart. */
export const DEFAULT_FAILURE_KEYS = 200;
/** The longest text kept of a network name, a message or a container ID. */
export const MAX_TEXT = 512;
/** Where calls past the counted keys go. */
export const OTHER_NETWORK = '(other)';

/** Listens to failed calls alone (telemetry.ts `fanOut`). */
export class FailureHistory implements Pick<Telemetry, 'cniFailed'> {
  readonly #clock: Clock;
  readonly #capacity: number;
  readonly #maxKeys: number;
  /** Oldest first; trimmed from the front. */
  #records: CniFailure[] = [];
  readonly #counts = new Map<string, { command: string; code: number; network: string; count: number }>();

  constructor(clock: Clock, capacity = DEFAULT_FAILURES, maxKeys = DEFAULT_FAILURE_KEYS) {
    this.#clock = clock;
    this.#capacity = capacity;
    this.#maxKeys = maxKeys;
  }

  cniFailed(failure: FailedCall): void {
    const record: CniFailure = {
      at: new Date(this.#clock.now()).toISOString(),
      command: cut(failure.command),
      code: failure.code,
      network: cut(failure.network),
      message: cut(failure.message),
      containerID: cut(failure.containerID),
    };
    this.#count(record);
    this.#records.push(record);
    // Trim in batches, not on every push: amortised O(1).
    if (this.#records.length > this.#capacity * 2) this.#records = this.#records.slice(-this.#capacity);
  }

  /** The latest failed calls, newest first. */
  recent(): CniFailure[] {
    return this.#records.slice(-this.#capacity).reverse();
  }

  /** Failed calls since start by command, code and network: most first, then by network, command, code. */
  counts(): CniFailureCount[] {
    return [...this.#counts.values()]
      .map((c) => ({ ...c }))
      .sort(
        (a, b) =>
          b.count - a.count ||
          a.network.localeCompare(b.network) ||
          a.command.localeCompare(b.command) ||
          a.code - b.code,
      );
  }

  #count(r: CniFailure): void {
    let network = r.network;
    let key = JSON.stringify([r.command, r.code, network]);
    if (!this.#counts.has(key) && this.#counts.size >= this.#maxKeys) {
      network = OTHER_NETWORK;
      key = JSON.stringify([r.command, r.code, network]);
    }
    const entry = this.#counts.get(key);
    if (entry !== undefined) entry.count += 1;
    else this.#counts.set(key, { command: r.command, code: r.code, network, count: 1 });
  }
}

function cut(text: string): string {
  return text.length <= MAX_TEXT ? text : `${text.slice(0, MAX_TEXT - 1)}…`;
}
