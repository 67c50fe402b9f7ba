/**
 * The last releases, newest first, for the dashboard: a ring of at most `capacity` records (one
 * per address), and totals by source since start. Memory is bounded whatever the release rate.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { RELEASE_SOURCES, type ReleaseRecord, type ReleaseSource } from '../../api/dashboard.ts';
import type { Telemetry } from './telemetry.ts';

export const DEFAULT_HISTORY = 100;

/** Listens to releases alone (telemetry.ts `fanOut`). */
export class ReleaseHistory implements Pick<Telemetry, 'released'> {
  readonly #clock: Clock;
  readonly #capacity: number;
  /** Oldest first; trimmed from the front. */
  #records: ReleaseRecord[] = [];
  readonly #totals = Object.fromEntries(RELEASE_SOURCES.map((s) => [s, 0])) as Record<ReleaseSource, number>;

  constructor(clock: Clock, capacity = DEFAULT_HISTORY) {
    this.#clock = clock;
    this.#capacity = capacity;
  }

  released(source: ReleaseSource, allocations: readonly Allocation[], reason: string, adapter?: string): void {
    if (allocations.length === 0) return;
    const at = new Date(this.#clock.now()).toISOString();
    this.#totals[source] += allocations.length;
    for (const a of allocations) {
      this.#records.push({
        at,
        source,
        reason,
        address: a.address,
        pool: a.pool,
        network: a.network,
        containerID: a.containerID,
        ifname: a.ifname,
        ...defined({ adapter }),
      });
    }
    // Trim in batches, not on every push: amortised O(1).
    if (this.#records.length > this.#capacity * 2) this.#records = this.#records.slice(-this.#capacity);
  }

  /** The latest releases, newest first. */
  recent(): ReleaseRecord[] {
    return this.#records.slice(-this.#capacity).reverse();
  }

  /** Addresses released since start, by source. */
  totals(): Record<ReleaseSource, number> {
    return { ...this.#totals };
  }
}
