/**
 * Range admissions on the two-tier store (tiered/store.ts), kept across nodes without a request per
 * ADD: the admissions are the cluster's (`ClusterTier.spaces`); this node remembers the guards its
 * commits carried and learns that one was retired (another node admitted an overlapping range)
 * when it claims a block of the range, and at each periodic check.
 *
 * Guarantees:
 * - a guard found retired makes every later commit carrying it a conflict with `admissionLost`,
 *   until `spaces.admit` (the wrapped one) admits the range again;
 * - `checkAll` reads each address space once per check, however many ranges of it were seen;
 * - while the cluster cannot be reached, a range in which this node holds a block is admitted on
 *   the node's own record (`offline`): it holds something, so no other node can have retired it
 *   (the cluster's spaces retire only ranges that hold nothing), and the one claim that made it hold
 *   something was checked against the cluster. Any other admission waits for the cluster.
 */
import type { ClusterTier } from './cluster-tier.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from '../store.ts';

const keyOf = (guard: AdmissionGuard) => `${guard.space}\0${guard.rangePool}`;

export class TieredAdmissions {
  readonly #tier: ClusterTier;
  /** Guards seen on commits → whether the range was found retired. */
  readonly #guards = new Map<string, { guard: AdmissionGuard; lost: boolean }>();
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
        if (guard !== undefined) this.#guards.set(keyOf(guard), { guard, lost: false });
        return guard;
      },
    };
  }

  /** Why a commit carrying `guard` may not apply (its range was found retired); undefined when it may. */
  refusal(guard: AdmissionGuard): string | undefined {
    const seen = this.#guards.get(keyOf(guard));
    if (seen === undefined) this.#guards.set(keyOf(guard), { guard, lost: false });
    return seen?.lost === true ? `range ${guard.rangePool} is no longer admitted in ${guard.space}` : undefined;
  }

  /** Asks the cluster whether `guard` still stands (before a block is claimed under it). */
  async check(guard: AdmissionGuard): Promise<string | undefined> {
    const reading = await this.#tier.spaces.read(guard.space);
    const lost = !reading.admitted.includes(guard.rangePool);
    this.#guards.set(keyOf(guard), { guard, lost });
    return lost ? `range ${guard.rangePool} is no longer admitted in ${guard.space}` : undefined;
  }

  /** Reads again every guard seen (one reading per address space). Throws when the cluster is away. */
  async checkAll(): Promise<void> {
    const readings = new Map<string, SpaceReading>();
    for (const entry of this.#guards.values()) {
      const { space, rangePool } = entry.guard;
      const reading = readings.get(space) ?? (await this.#tier.spaces.read(space));
      readings.set(space, reading);
      entry.lost = !reading.admitted.includes(rangePool);
    }
  }
}
