/**
 * Range admissions on the two-tier store (tiered-store.ts), kept across nodes without a request per
 * ADD: the admissions are the cluster's (`ClusterTier.spaces`); this node remembers the guards its
 * commits carried and learns that one was retired (another node admitted an overlapping range)
 * when it claims a block of the range, and at each periodic check.
 *
 * Guarantees:
 * - a guard found retired makes every later commit carrying it a conflict with `admissionLost`,
 *   until `spaces.admit` (the wrapped one) admits the range again;
 * - `checkAll` reads each address space once per check, however many ranges of it were seen.
 */
import type { ClusterTier } from './cluster-tier.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from './store.ts';

const keyOf = (guard: AdmissionGuard) => `${guard.space}\0${guard.rangePool}`;

export class TieredAdmissions {
  readonly #tier: ClusterTier;
  /** Guards seen on commits → whether the range was found retired. */
  readonly #guards = new Map<string, { guard: AdmissionGuard; lost: boolean }>();
  /** The cluster's spaces, an admission through them clearing a retirement seen here. */
  readonly spaces: AddressSpaces;

  constructor(tier: ClusterTier) {
    this.#tier = tier;
    this.spaces = {
      read: (space: string): Promise<SpaceReading> => tier.spaces.read(space),
      admit: async (reading, rangePool, retire) => {
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
