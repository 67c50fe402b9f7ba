/**
 * Overlapping ranges of one network_name, served as whereabouts serves them: two configs whose
 * ranges overlap (a /24 and a /26 inside it) are both served, and an address is handed out at most
 * once across all of them. Each range is served from the admitted pools that cover it, its
 * segments (range-cover.ts says the rule: admitted pools never overlap, and are never retired, so
 * an address's pool never changes). This file follows the rule against a store and keeps each
 * range's cover, so the check runs at a range's first use, not per ADD.
 *
 * On a store several agents share (`Store.cluster.spaces`) the admissions are the store's: each is a
 * compare-and-set on the space's reading, so of two agents admitting at once the second decides
 * again on what the first wrote, and every allocation commit carries the guard of its segment's
 * admission. This version never retires a pool, but an agent of the version before it retires a
 * range that holds nothing when it admits one overlapping it: a commit in such a pool fails with
 * `admissionLost`, the caller `forget`s it, and the range's cover is decided again. So two agents
 * never hand out one address from two pools, at first use at once or long after either cached its
 * cover.
 *
 * On a store one process writes alone (SQLite), the admitted pools are those that hold an address
 * and those this process admitted since it started (a restart forgets the empty ones, which nothing
 * else writes). The caller runs `cover` and the allocation under the lock of the range's address
 * space (`addressSpaceOf`), so no admission races an allocation.
 *
 * A range kept apart (`enable_overlapping_ranges: false`, an isolated pool key) is its own pool and
 * address space: it is never carved, served from another pool or checked against other ranges.
 */
import { WarrenError } from '../core/errors.ts';
import { formatCidr } from '../ipam/address.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';
import { type PoolKey, parsePoolKey } from '../ipam/pool-key.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading, Store } from '../store/store.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import { type CoverPlan, planCover, servedFrom } from './range-cover.ts';

/** One pool a range is served from: the range restricted to that pool, and the guard its commits carry. */
export interface Segment {
  readonly range: RangeSpec;
  readonly guard: AdmissionGuard | undefined;
}

/** One pool of a cover, with its admission's guard (undefined where the store keeps no admissions). */
export interface Covering {
  readonly pool: string;
  readonly key: PoolKey;
  readonly guard: AdmissionGuard | undefined;
}

/**
 * Admissions followed for one cover before giving up: each admits a piece of the range (at most
 * its host bits per pool inside it) or the range itself. Beyond this the store keeps changing.
 */
const MAX_ADMISSIONS_PER_COVER = 2 * 128 + 8;

/** The lock key of one address space: a network_name and an address family (a pool kept apart is one). */
export function addressSpaceOf(range: RangeSpec): string {
  const key = parsePoolKey(range.pool);
  if (key?.isolated === true) return `space:${range.pool}`;
  return `space:v${range.family}:${key?.networkName ?? ''}`;
}

/** The store's name of the address space of a range pool: `v4`, or `v4@<network_name>`. */
function spaceNameOf(key: PoolKey): string {
  return key.networkName === '' ? `v${key.family}` : `v${key.family}@${key.networkName}`;
}

export class OverlapAdmission {
  /** Read for what every range holds, when a range is first covered. */
  readonly #store: Store;
  /** Rounds of read-and-admit against a store whose space keeps changing, before TRY_AGAIN. */
  readonly #maxAttempts: number;
  /** The cover of each range pool served: the pools (with their guards) its addresses live in. */
  readonly #covers = new Map<string, readonly Covering[]>();
  /** On a store without admissions: the pools this process admitted (with those holding an address). */
  readonly #admittedHere = new Set<string>();

  constructor(store: Store, maxAttempts: number) {
    this.#store = store;
    this.#maxAttempts = maxAttempts;
  }

  /**
   * The segments `range` is served from, in address order: one, the range itself, unless ranges of
   * its network_name overlap it. Throws TRY_AGAIN when the address space kept changing.
   */
  async cover(range: RangeSpec): Promise<readonly Segment[]> {
    let covering = this.#covers.get(range.pool);
    if (covering === undefined) {
      const me = parsePoolKey(range.pool);
      if (me === undefined) return [{ range, guard: undefined }];
      const spaces = this.#store.cluster?.spaces;
      covering =
        spaces === undefined
          ? await this.#coverHere(range, me)
          : await coverInSpaces(spaces, range.pool, this.#maxAttempts);
      this.#covers.set(range.pool, covering);
    }
    const segments: Segment[] = [];
    for (const c of covering) {
      const served = servedFrom(range, c.pool, c.key);
      if (served !== undefined) segments.push({ range: served, guard: c.guard });
    }
    return segments;
  }

  /**
   * Forgets every cover served from `pool`, whose admission the store says another agent retired
   * (an agent of the version before this one), so the next `cover` decides again.
   */
  forget(pool: string): void {
    for (const [range, covering] of this.#covers) if (covering.some((c) => c.pool === pool)) this.#covers.delete(range);
  }

  /** The cover on a store this process writes alone: admissions kept in this process (see the header). */
  async #coverHere(range: RangeSpec, me: PoolKey): Promise<Covering[]> {
    const held = new Map<string, number>();
    for (const p of await this.#store.ledgers()) {
      const key = rangePoolOfKey(p.ledger);
      held.set(key, (held.get(key) ?? 0) + p.allocated + p.resting);
    }
    for (let step = 0; step < MAX_ADMISSIONS_PER_COVER; step++) {
      const admitted = [...this.#admittedHere, ...[...held].filter(([, n]) => n > 0).map(([k]) => k)];
      const plan = planCover(range.pool, me, admitted);
      if (plan.kind === 'covered') {
        // Admitted here from now on, held or not: a cover kept names them until this process ends.
        for (const pool of plan.pools) this.#admittedHere.add(pool);
        return plan.pools.flatMap((pool) => {
          const key = parsePoolKey(pool);
          return key === undefined ? [] : [{ pool, key, guard: undefined }];
        });
      }
      this.#admittedHere.add(plan.pool);
    }
    throw new WarrenError('TRY_AGAIN', `the ranges of ${nameOf(me)} could not be arranged to serve ${range.subnet}`);
  }
}

function nameOf(key: PoolKey): string {
  return key.networkName === '' ? 'no network_name' : `network_name "${key.networkName}"`;
}

/**
 * The pools that serve range pool `rangePool` among the address spaces a shared store keeps,
 * admitting what the rule asks (range-cover.ts), in address order, each with its guard. The
 * allocator covers a range with it at the range's first use; `warren migrate` to learn where a
 * migrated address lives. Throws TRY_AGAIN when the address space kept changing.
 */
export async function coverInSpaces(
  spaces: AddressSpaces,
  rangePool: string,
  maxAttempts: number,
): Promise<Covering[]> {
  const me = parsePoolKey(rangePool);
  if (me === undefined) throw new Error(`${rangePool} is not a range pool key`);
  if (me.isolated === true) return [{ pool: rangePool, key: me, guard: undefined }];
  const space = spaceNameOf(me);
  return retryOnConflict(
    {
      subject: `the ranges of ${nameOf(me)}`,
      action: `admit range ${formatCidr(me.family, me.network, me.prefixLength)}`,
    },
    maxAttempts,
    async () => {
      for (let step = 0; step < MAX_ADMISSIONS_PER_COVER; step++) {
        const reading = await spaces.read(space);
        const plan = planCover(rangePool, me, reading.admitted);
        if (plan.kind === 'covered') return await guarded(spaces, reading, plan);
        if ((await spaces.admit(reading, plan.pool, [])) === undefined) return CONFLICT;
      }
      return CONFLICT;
    },
  );
}

/** The pools of a cover with their guards (an admitted pool's guard costs no write). */
async function guarded(
  spaces: AddressSpaces,
  reading: SpaceReading,
  plan: Extract<CoverPlan, { kind: 'covered' }>,
): Promise<Covering[] | typeof CONFLICT> {
  const covering: Covering[] = [];
  for (const pool of plan.pools) {
    const key = parsePoolKey(pool);
    if (key === undefined) continue;
    const guard = await spaces.admit(reading, pool, []);
    if (guard === undefined) return CONFLICT;
    covering.push({ pool, key, guard });
  }
  return covering;
}
