/**
 * Overlapping ranges of one network_name. An address is unique within a network_name whatever the
 * ranges of its configs say. Pools are keyed by subnet, so two configs of one network_name whose
 * ranges overlap differently (a /25 inside a /24) would each hand out the shared addresses: such a
 * range is refused (INVALID_CONFIG, CNI 7) while the other holds any address, naming both.
 *
 * Checked when this process first allocates in a range, and again after it admitted an overlapping
 * one. The caller runs `admit` and the allocation after it under the lock of the range's address
 * space (`addressSpaceOf`), so an overlap admitted here cannot race an allocation in the other.
 */
import { WarrenError } from '../core/errors.ts';
import { formatCidr } from '../ipam/address.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import { parsePoolKey, poolsOverlap } from '../ipam/pool-key.ts';
import type { Store } from '../store/store.ts';

/** The lock key of one address space: a network_name and an address family. */
export function addressSpaceOf(range: RangeSpec): string {
  return `space:v${range.family}:${parsePoolKey(range.pool)?.networkName ?? ''}`;
}

export class OverlapAdmission {
  /** Read for what every range holds, when a range is first checked. */
  readonly #store: Store;
  /** Range pools checked against the overlapping ranges of their network_name. */
  readonly #admitted = new Set<string>();

  constructor(store: Store) {
    this.#store = store;
  }

  /** Returns when `range` may allocate; throws INVALID_CONFIG naming the overlapping range in use. */
  async admit(range: RangeSpec): Promise<void> {
    if (this.#admitted.has(range.pool)) return;
    const me = parsePoolKey(range.pool);
    if (me === undefined) return;
    const inUse = new Map<string, number>();
    for (const p of await this.#store.pools()) {
      const key = rangePoolOfKey(p.pool);
      inUse.set(key, (inUse.get(key) ?? 0) + p.allocated + p.resting);
    }
    for (const [key, count] of inUse) {
      const other = parsePoolKey(key);
      if (key === range.pool || count === 0 || other === undefined || !poolsOverlap(me, other)) continue;
      const name = me.networkName === '' ? 'no network_name' : `network_name "${me.networkName}"`;
      throw new WarrenError(
        'INVALID_CONFIG',
        `range ${range.subnet} overlaps range ${formatCidr(other.family, other.network, other.prefixLength)}, which holds ${count} addresses (both ${name}); ` +
          'an address must be unique within a network_name, so use the same range in every config of this network_name, give one of them its own network_name, or release the other range first',
      );
    }
    // Overlapping ranges admitted earlier are checked again before their next allocation.
    for (const key of this.#admitted) {
      const other = parsePoolKey(key);
      if (other !== undefined && poolsOverlap(me, other)) this.#admitted.delete(key);
    }
    this.#admitted.add(range.pool);
  }
}
