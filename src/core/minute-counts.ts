/**
 * Counts by key over the last minutes, for a rate an operator reads ("12 a minute over the last 10
 * min"): what the agent's requests to its cluster store are counted into, the Kubernetes API's
 * (store/kubernetes/api-requests.ts) and etcd's (store/etcd-tier/etcd-requests.ts) alike.
 *
 * Guarantees:
 * - read on the injected clock's monotonic time, from a ring of per-minute buckets, the last
 *   `windowMinutes` of them and the current one: memory does not grow with time, only with the keys;
 * - the window is the current minute's part, the whole minutes before it, and of the oldest minute
 *   the part still inside the window (its counts pro rata); a young counter's window is its life (at
 *   least a minute), so its first minutes are not diluted by minutes it never saw.
 */
import type { Clock } from './clock.ts';

const MINUTE_MS = 60_000;

/** One minute's counts by key. */
interface MinuteBucket {
  minute: number;
  readonly counts: Map<string, number>;
}

/** What the window holds: its counts by key (the oldest minute's pro rata) and how to make them a rate. */
export interface WindowCounts {
  /** The minutes the window spans, to a tenth (fewer while the counter is younger). */
  readonly minutes: number;
  /** Counts by key inside the window. */
  readonly counts: ReadonlyMap<string, number>;
  /** `n` counted inside the window as a rate a minute, to a hundredth. */
  perMinute(n: number): number;
}

export class MinuteCounts {
  readonly #clock: Clock;
  readonly #windowMinutes: number;
  /** When counting began (monotonic): a young counter's rate is over its life, not the whole window. */
  readonly #startedAt: number;
  /** The last `windowMinutes` minutes and the current one, one bucket each, reused round the ring. */
  readonly #ring: MinuteBucket[];

  constructor(clock: Clock, windowMinutes = 10) {
    this.#clock = clock;
    this.#windowMinutes = Math.max(1, Math.floor(windowMinutes));
    this.#startedAt = clock.monotonic();
    this.#ring = Array.from({ length: this.#windowMinutes + 1 }, () => ({ minute: -1, counts: new Map() }));
  }

  /** One more of `key`, now. */
  add(key: string): void {
    const minute = Math.floor(this.#clock.monotonic() / MINUTE_MS);
    const bucket = this.#ring[minute % this.#ring.length] as MinuteBucket;
    if (bucket.minute !== minute) {
      bucket.minute = minute;
      bucket.counts.clear();
    }
    bucket.counts.set(key, (bucket.counts.get(key) ?? 0) + 1);
  }

  /** The window up to now (see the header). */
  window(): WindowCounts {
    const now = this.#clock.monotonic();
    const current = Math.floor(now / MINUTE_MS);
    const first = current - this.#windowMinutes;
    const spanMs = Math.max(MINUTE_MS, Math.min(this.#windowMinutes * MINUTE_MS, now - this.#startedAt));
    const oldestPart = 1 - (now - current * MINUTE_MS) / MINUTE_MS;
    const counts = new Map<string, number>();
    for (const bucket of this.#ring) {
      if (bucket.minute < first || bucket.minute > current) continue;
      const weight = bucket.minute === first ? oldestPart : 1;
      for (const [key, n] of bucket.counts) counts.set(key, (counts.get(key) ?? 0) + n * weight);
    }
    return {
      minutes: Math.round((spanMs / MINUTE_MS) * 10) / 10,
      counts,
      perMinute: (n) => Math.round((n / spanMs) * MINUTE_MS * 100) / 100,
    };
  }
}

/**
 * Orders rates most first, ties by name in code-unit order: localeCompare would wake ICU's collator,
 * whose data (pages of the Node binary and their tables, ~3 MiB) an agent then holds for its life,
 * for ASCII names.
 */
export function mostFirst<T extends { readonly perMinute: number }>(name: (item: T) => string): (a: T, b: T) => number {
  return (a, b) => b.perMinute - a.perMinute || (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0);
}
