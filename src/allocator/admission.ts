/**
 * Overlapping ranges of one network_name. An address is unique within a network_name whatever the
 * ranges of its configs say. Pools are keyed by subnet, so two configs of one network_name whose
 * ranges overlap differently (a /25 inside a /24) would each hand out the shared addresses: such a
 * range is refused (INVALID_CONFIG, CNI 7) while the other holds any address, naming both.
 *
 * Checked when this process first allocates in a range, and again after it admitted an overlapping
 * one. The caller runs `admit` and the allocation after it under the lock of the range's address
 * space (`addressSpaceOf`), so within this process an overlap admitted here cannot race an
 * allocation in the other.
 *
 * On a store one process writes alone (SQLite) that lock is the whole story. On a store several
 * agents share (`Store.cluster.spaces`) each agent admits on its own, so the admission is kept in the
 * store: admitting a range retires, in one transaction, the overlapping ranges that hold nothing,
 * and fails if any of them (or the space's admissions) was written since it was read; every
 * allocation commit carries the admission as a guard and fails once the range was retired. An agent
 * whose cached admission was retired by another agent finds out at its next commit (`forget`), and
 * admits again: refused while the other range holds an address, and, within that same ADD, while
 * the other range is admitted at all. Without that second rule two agents racing to first use would
 * retire each other's empty range in turn until both gave up; with it the one that lost its
 * admission is refused, and the other is served. So two agents can never both hand out from ranges
 * that overlap, at first use at once or long after either cached its admission.
 */
import { WarrenError } from '../core/errors.ts';
import { formatCidr } from '../ipam/address.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import { type PoolKey, parsePoolKey, poolsOverlap } from '../ipam/pool-key.ts';
import type { AddressSpaces, AdmissionGuard, Store } from '../store/store.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';

/** The lock key of one address space: a network_name and an address family. */
export function addressSpaceOf(range: RangeSpec): string {
  return `space:v${range.family}:${parsePoolKey(range.pool)?.networkName ?? ''}`;
}

/** The store's name of the address space of a range pool: `v4`, or `v4@<network_name>`. */
function spaceNameOf(key: PoolKey): string {
  return key.networkName === '' ? `v${key.family}` : `v${key.family}@${key.networkName}`;
}

export class OverlapAdmission {
  /** Read for what every range holds, when a range is first checked. */
  readonly #store: Store;
  /** Rounds of read-and-admit against a store whose space keeps changing, before TRY_AGAIN. */
  readonly #maxAttempts: number;
  /**
   * Range pools checked against the overlapping ranges of their network_name, each with the guard
   * its commits carry (undefined where the store keeps no admissions).
   */
  readonly #admitted = new Map<string, AdmissionGuard | undefined>();
  /** Range pools whose admission another agent retired during the ADD now running (see header). */
  readonly #retired = new Set<string>();

  constructor(store: Store, maxAttempts: number) {
    this.#store = store;
    this.#maxAttempts = maxAttempts;
  }

  /**
   * Returns when `range` may allocate, with the guard its commits must carry (undefined when the
   * store keeps no admissions); throws INVALID_CONFIG naming the overlapping range in use.
   */
  async admit(range: RangeSpec): Promise<AdmissionGuard | undefined> {
    if (this.#admitted.has(range.pool)) return this.#admitted.get(range.pool);
    const me = parsePoolKey(range.pool);
    if (me === undefined) return undefined;
    const spaces = this.#store.cluster?.spaces;
    let guard: AdmissionGuard | undefined;
    try {
      guard =
        spaces === undefined
          ? await this.#admitInProcess(range, me)
          : await this.#admitInStore(spaces, range, me, this.#retired.has(range.pool));
    } finally {
      this.#retired.delete(range.pool);
    }
    // Overlapping ranges admitted earlier are checked again before their next allocation.
    for (const key of [...this.#admitted.keys()]) {
      const other = parsePoolKey(key);
      if (other !== undefined && poolsOverlap(me, other)) this.#admitted.delete(key);
    }
    this.#admitted.set(range.pool, guard);
    return guard;
  }

  /**
   * Forgets an admission the store says another agent retired, so the next `admit` decides again;
   * that next one also refuses while an overlapping range is admitted, holding addresses or not.
   */
  forget(rangePool: string): void {
    this.#admitted.delete(rangePool);
    this.#retired.add(rangePool);
  }

  async #admitInProcess(range: RangeSpec, me: PoolKey): Promise<undefined> {
    const inUse = new Map<string, number>();
    for (const p of await this.#store.ledgers()) {
      const key = rangePoolOfKey(p.ledger);
      inUse.set(key, (inUse.get(key) ?? 0) + p.allocated + p.resting);
    }
    refuseIfHeld(range, me, inUse);
    return undefined;
  }

  async #admitInStore(spaces: AddressSpaces, range: RangeSpec, me: PoolKey, retired: boolean): Promise<AdmissionGuard> {
    return retryOnConflict(
      { subject: `the ranges of ${nameOf(me)}`, action: `admit range ${range.subnet}` },
      this.#maxAttempts,
      async () => {
        const reading = await spaces.read(spaceNameOf(me));
        refuseIfHeld(range, me, reading.held);
        const overlapping = new Set<string>();
        for (const key of [...reading.held.keys(), ...reading.admitted]) {
          const other = parsePoolKey(key);
          if (key === range.pool || other === undefined || !poolsOverlap(me, other)) continue;
          if (retired && reading.admitted.includes(key)) refuseAsRetired(range, me, other);
          overlapping.add(key);
        }
        return (await spaces.admit(reading, range.pool, [...overlapping])) ?? CONFLICT;
      },
    );
  }
}

function nameOf(key: PoolKey): string {
  return key.networkName === '' ? 'no network_name' : `network_name "${key.networkName}"`;
}

const REMEDY =
  'an address must be unique within a network_name, so use the same range in every config of this ' +
  'network_name, give one of them its own network_name, or release the other range first';

/** Throws INVALID_CONFIG for a range whose admission another agent retired for `other`. */
function refuseAsRetired(range: RangeSpec, me: PoolKey, other: PoolKey): never {
  throw new WarrenError(
    'INVALID_CONFIG',
    `range ${range.subnet} overlaps range ${formatCidr(other.family, other.network, other.prefixLength)}, ` +
      `which another agent started to use while this ADD ran (both ${nameOf(me)}); ${REMEDY}`,
  );
}

/** Throws INVALID_CONFIG when a range overlapping `range` differently holds an address. */
function refuseIfHeld(range: RangeSpec, me: PoolKey, held: ReadonlyMap<string, number>): void {
  for (const [key, count] of held) {
    const other = parsePoolKey(key);
    if (key === range.pool || count === 0 || other === undefined || !poolsOverlap(me, other)) continue;
    throw new WarrenError(
      'INVALID_CONFIG',
      `range ${range.subnet} overlaps range ${formatCidr(other.family, other.network, other.prefixLength)}, ` +
        `which holds ${count} addresses (both ${nameOf(me)}); ${REMEDY}`,
    );
  }
}
