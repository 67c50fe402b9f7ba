/**
 * Range admissions on the two-tier store (tiered/store.ts), kept across nodes without a request per
 * ADD: the admissions are the cluster's (`ClusterTier.spaces`); this node remembers the guards its
 * commits carried and learns that one was retired (another node admitted an overlapping range)
 * when it claims a block of the range, and from the watch of the address spaces (`watch`:
 * ClusterTier.watchSpaces) as soon as it shows the change; without a watch open and synced (the
 * cluster away, a tier with none), at each periodic check.
 *
 * Guarantees:
 * - a guard found retired makes every later commit carrying it a conflict with `admissionLost`,
 *   until `spaces.admit` (the wrapped one) admits the range again;
 * - a guard is judged on a watch only once the watch shows its space at a version newer than what
 *   made the guard (an admission this node just wrote is never judged on a watch that lags it);
 * - `checkAll` asks nothing while the watch is open and synced; else it reads each address space
 *   once per check, however many ranges of it were seen;
 * - while the cluster cannot be reached, a range in which this node holds a block is admitted on
 *   the node's own record (`offline`): it holds something, so no other node can have retired it
 *   (the cluster's spaces retire only ranges that hold nothing), and the one claim that made it hold
 *   something was checked against the cluster. Any other admission waits for the cluster.
 */
import type { ClusterTier, ClusterWatch, SpacesSeen } from './cluster-tier.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from '../store.ts';

const keyOf = (guard: AdmissionGuard) => `${guard.space}\0${guard.rangePool}`;

export class TieredAdmissions {
  readonly #tier: ClusterTier;
  /**
   * Guards seen on commits → whether the range was found retired, and the least version of its
   * space's record a watch must show to judge it again (what made the guard was read or written there).
   */
  readonly #guards = new Map<string, { guard: AdmissionGuard; lost: boolean; since: number }>();
  /** The watch of the address spaces, from `watch` (the store's start) on. */
  #watch: ClusterWatch<SpacesSeen> | undefined;
  /** The cluster's spaces, an admission through them clearing a retirement seen here. */
  readonly spaces: AddressSpaces;

  /**
   * `offline`: the ranges of an address space in which this node holds a block, with what it holds
   * there, from the node's own store.
   */
  constructor(tier: ClusterTier, offline: (space: string) => Promise<Map<string, number>>) {
    this.#tier = tier;
    const fromNode = new WeakSet<SpaceReading>();
    this.spaces = {
      read: async (space: string): Promise<SpaceReading> => {
        try {
          return await tier.spaces.read(space);
        } catch (error) {
          const held = await offline(space);
          if (held.size === 0) throw error;
          const reading: SpaceReading = { space, revision: -1, admitted: [...held.keys()], held };
          fromNode.add(reading);
          return reading;
        }
      },
      admit: async (reading, rangePool, retire) => {
        if (fromNode.has(reading)) {
          if (reading.admitted.includes(rangePool) && retire.length === 0) return { space: reading.space, rangePool };
          await tier.spaces.read(reading.space); // throws while the cluster is away, naming it
          return undefined; // it answered: read again
        }
        const guard = await tier.spaces.admit(reading, rangePool, retire);
        // Written after the reading: a watch judges it once it shows a newer record of the space.
        if (guard !== undefined) this.#guards.set(keyOf(guard), { guard, lost: false, since: reading.revision + 1 });
        return guard;
      },
    };
  }

  /** Why a commit carrying `guard` may not apply (its range was found retired); undefined when it may. */
  refusal(guard: AdmissionGuard): string | undefined {
    const seen = this.#guards.get(keyOf(guard));
    if (seen === undefined) this.#guards.set(keyOf(guard), { guard, lost: false, since: 0 });
    return seen?.lost === true ? `range ${guard.rangePool} is no longer admitted in ${guard.space}` : undefined;
  }

  /** Asks the cluster whether `guard` still stands (before a block is claimed under it). */
  async check(guard: AdmissionGuard): Promise<string | undefined> {
    const reading = await this.#tier.spaces.read(guard.space);
    const lost = !reading.admitted.includes(guard.rangePool);
    this.#guards.set(keyOf(guard), { guard, lost, since: reading.revision });
    return lost ? `range ${guard.rangePool} is no longer admitted in ${guard.space}` : undefined;
  }

  /** Judges every guard seen by what `watch` shows, while it is open and synced, and at each change it shows. */
  watch(watch: ClusterWatch<SpacesSeen> | undefined): void {
    this.#watch = watch;
    watch?.onChange(() => this.#fromWatch());
  }

  /** Judges the guards by the watch; false when it is not open and synced. */
  #fromWatch(): boolean {
    const seen = this.#watch?.seen();
    if (seen === undefined) return false;
    for (const entry of this.#guards.values()) {
      const { ranges, version } = seen.admitted(entry.guard.space);
      if (version >= entry.since) entry.lost = !ranges.includes(entry.guard.rangePool);
    }
    return true;
  }

  /**
   * Judges again every guard seen: by the watch, or reading each address space once while no watch
   * is open and synced. Throws when the cluster is away.
   */
  async checkAll(): Promise<void> {
    if (this.#fromWatch()) return;
    const readings = new Map<string, SpaceReading>();
    for (const entry of this.#guards.values()) {
      const { space, rangePool } = entry.guard;
      const reading = readings.get(space) ?? (await this.#tier.spaces.read(space));
      readings.set(space, reading);
      entry.lost = !reading.admitted.includes(rangePool);
    }
  }
}
