/**
 * The usual path of an ADD in one range (allocator.ts runs it for each range of an ADD, and for the
 * placeholder of a holder's first ADD): the pools the range is served from (admission.ts: itself,
 * unless ranges of its network_name overlap it), the address the owner already holds in any of them
 * answered again, else one decision per round in a pool or its blocks (ledger-assigner.ts,
 * block-assigner.ts), and waits for other nodes' grants outside the locks (lending); a range with no
 * room in any of its pools ends in its exhaustion (exhaustion.ts).
 *
 * Guarantees:
 * - per address space and per range pool, one decision at a time in this process (KeyedMutex);
 * - idempotent per owner and range: a retry answers the address already held, in whichever of the
 *   range's pools, recorded in the network namespace the retry names;
 * - a store that keeps changing ends the ADD with TRY_AGAIN naming the pool (commit-loop.ts), and
 *   waits for other nodes are bounded (MAX_WAITS, one deadline per ADD).
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import type { KeyedMutex } from '../core/keyed-mutex.ts';
import { type IPAddress, formatIP } from '../ipam/address.ts';
import type { Allocation } from '../ipam/allocation.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { Store } from '../store/store.ts';
import { type OverlapAdmission, type Segment, addressSpaceOf } from './admission.ts';
import { type AllocateRequest, type Assignment, MAX_WAITS, Waiting } from './assignment.ts';
import type { BlockAssigner } from './block-assigner.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { Exhaustion } from './exhaustion.ts';
import type { LedgerAssigner } from './ledger-assigner.ts';
import type { LedgerCache } from './ledger-cache.ts';
import { heldInRange, sharesPool } from '../ipam/shared-pools.ts';

/** A segment's round found no free address there. */
const FULL: unique symbol = Symbol('full');

export interface RangeAllocatorOptions {
  readonly store: Store;
  readonly clock: Clock;
  /** Decide-and-commit rounds before giving up with TRY_AGAIN. */
  readonly maxAttempts: number;
  /** The allocator's locks, shared by every part that writes. */
  readonly locks: KeyedMutex;
  readonly admission: OverlapAdmission;
  /** Null when ranges are not split into blocks: then every range is one ledger. */
  readonly blocks: BlockAssigner | null;
  /** The round in one ledger, for ranges without blocks. */
  readonly assigner: LedgerAssigner;
  readonly exhaustion: Exhaustion;
  readonly ledgers: LedgerCache;
  /** Told when the last ADD under way in a range pool ended (lending gives idle loans back then). */
  readonly settled?: (pool: string) => void;
}

export class RangeAllocator {
  readonly #o: RangeAllocatorOptions;
  /** The ranges this process served, by pool: what it lends from knows their exclusions. */
  readonly #served = new Map<string, RangeSpec>();
  /** ADDs under way per range pool: how many addresses a node with no room asks the others for. */
  readonly #inFlight = new Map<string, number>();
  /** The segment's pool that served each range last (ranges served from several pools only matter). */
  readonly #last = new Map<string, string>();

  constructor(options: RangeAllocatorOptions) {
    this.#o = options;
  }

  /** The range served in `pool` by this process, if one was. */
  served(pool: string): RangeSpec | undefined {
    return this.#served.get(pool);
  }

  /** How many ADDs are under way in range pool `pool` (at least 1: the one asking). */
  demand(pool: string): number {
    return this.#inFlight.get(pool) ?? 1;
  }

  /** How many ADDs are under way in range pool `pool` (0 when none). */
  underWay(pool: string): number {
    return this.#inFlight.get(pool) ?? 0;
  }

  /** An address in `range` for `request` (`requested` when it names one), by the usual path. */
  async allocate(range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Assignment> {
    this.#served.set(range.pool, range);
    this.#inFlight.set(range.pool, (this.#inFlight.get(range.pool) ?? 0) + 1);
    try {
      return await this.#allocateInRange(range, request, requested);
    } finally {
      const left = (this.#inFlight.get(range.pool) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(range.pool, left);
      else {
        this.#inFlight.delete(range.pool);
        this.#o.settled?.(range.pool);
      }
    }
  }

  async #allocateInRange(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment> {
    let since: number | undefined; // when this ADD first waited: its waits share one deadline
    for (let waits = 0; ; waits++) {
      const outcome = await this.#roundsInRange(range, request, requested);
      if (!(outcome instanceof Waiting)) return outcome;
      // Waiting for other nodes (lending's grants) outside the range's locks, so the lending round
      // adopting grants of this range, and other ADDs, are not held up meanwhile; then decide again
      // under the locks (every commit is at the revision read: nothing is handed out twice).
      since ??= this.#o.clock.monotonic();
      if (waits >= MAX_WAITS || !(await outcome.until(since))) {
        const segments = await this.#o.admission.cover(range);
        throw await this.#o.exhaustion.error(range, segments.length === 0 ? [range] : segments.map((s) => s.range));
      }
    }
  }

  /**
   * Rounds under the range's locks: the assignment, or what to wait for before deciding again. The
   * range is served from its segments (admission.ts: one, itself, unless ranges of its network_name
   * overlap it), tried from the one that served this range last, so the common ADD lands where this
   * node has room; a segment with no room, or waiting for other nodes, passes on to the next.
   */
  async #roundsInRange(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment | Waiting> {
    const { locks, admission, exhaustion } = this.#o;
    // Ranges of one network_name and family may overlap across configs: allocations in them are
    // decided one at a time here, so an overlap admitted below cannot race an allocation.
    return locks.run(addressSpaceOf(range), () =>
      retryOnConflict<Assignment | Waiting>(
        { subject: `pool ${range.pool}`, action: 'allocate' },
        this.#o.maxAttempts,
        async (attempt) => {
          // Kept after the first use; decided again only after a commit said a segment's pool was
          // retired (by an agent of an earlier version, which retired empty ranges: admission.ts).
          const segments = await admission.cover(range);
          const alone = segments.length === 1 && segments[0]?.range.pool === range.pool;
          // With blocks the first round skips the owner look-up: the commit itself refuses a second
          // address for one owner (the store's owner-per-pool rule), and a retried ADD lands here
          // on the second round, where the look-up finds what it holds.
          const held = this.#o.blocks !== null && attempt === 1 && alone ? undefined : await this.#held(range, request);
          if (held !== undefined)
            return locks.run(rangePoolOfKey(held.pool), () => this.#again(range, request, requested, held));
          const tried = this.#order(range, segments, requested);
          let waiting: Waiting | undefined;
          for (const segment of tried) {
            const outcome = await locks.run(segment.range.pool, () => this.#decide(segment, request, requested));
            if (outcome === FULL) continue;
            if (outcome instanceof Waiting) waiting ??= outcome;
            else if (outcome === CONFLICT) return CONFLICT;
            else {
              this.#last.set(range.pool, segment.range.pool);
              return alone ? outcome : { ...outcome, range };
            }
          }
          if (waiting !== undefined) return waiting;
          throw await exhaustion.error(range, tried.length === 0 ? [range] : tried.map((s) => s.range));
        },
      ),
    );
  }

  /** One round in one segment: the assignment, FULL, or a conflict (to wait on, or to decide again). */
  async #decide(
    segment: Segment,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment | Waiting | typeof FULL | typeof CONFLICT> {
    const { blocks, assigner, admission } = this.#o;
    const { range, guard } = segment;
    const decision =
      blocks !== null
        ? await blocks.decide(range, request, requested, guard)
        : await assigner.decide(range, range, request, requested, guard);
    switch (decision.kind) {
      case 'done':
        return decision.assignment;
      case 'full':
        return FULL;
      case 'conflict':
        if (decision.admissionLost === true) admission.forget(range.pool);
        return decision.wait === undefined ? CONFLICT : new Waiting(decision.wait);
      default: {
        const never: never = decision;
        throw new Error(`unhandled decision ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * The segments to try, in order: the one holding the requested address alone; else from the one
   * that served this range last, round the others in address order.
   */
  #order(range: RangeSpec, segments: readonly Segment[], requested: IPAddress | undefined): readonly Segment[] {
    if (requested !== undefined) {
      const holding = segments.find((s) => requested.value >= s.range.first && requested.value <= s.range.last);
      return holding === undefined ? segments.slice(0, 1) : [holding];
    }
    const from = segments.findIndex((s) => s.range.pool === this.#last.get(range.pool));
    return from <= 0 ? segments : [...segments.slice(from), ...segments.slice(0, from)];
  }

  /** What `request`'s owner already holds in `range`, in any pool it is served from. */
  async #held(range: RangeSpec, request: AllocateRequest): Promise<Allocation | undefined> {
    const mine = (await this.#o.store.findByOwner(request.owner)).filter((a) => sharesPool(range, a));
    const inSpan = mine.find((a) => heldInRange(range, a));
    if (inSpan !== undefined || mine.length === 0) return inSpan;
    // The owner holds an address of a pool this range shares with another range of the same config.
    const other = mine[0] as Allocation;
    throw new WarrenError(
      'INVALID_CONFIG',
      `container ${request.owner.containerID} (${request.owner.ifname}) already holds ${other.address} in pool ` +
        `${rangePoolOfKey(other.pool)}, which also serves range ${range.subnet} of the same config (ranges of ` +
        'one network_name overlap): give one attachment one range per pool, or the ranges their own network_name',
    );
  }

  /** The answer to an ADD whose owner already holds `held` in the range. */
  async #again(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    held: Allocation,
  ): Promise<Assignment | typeof CONFLICT> {
    if (requested !== undefined && held.address !== formatIP(requested)) {
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `container ${request.owner.containerID} (${request.owner.ifname}) already holds ` +
          `${held.address} in ${range.pool}, not the requested ${formatIP(requested)}`,
      );
    }
    // A re-ADD in another namespace (a container restarted without a DEL): the record must say
    // where the address lives now, or that namespace's removal would be taken for its end.
    if (request.netns !== undefined && held.netns !== request.netns) {
      const moved = await this.#relocate(held, request.netns);
      return moved === CONFLICT ? CONFLICT : { range, allocation: moved, fresh: false };
    }
    return { range, allocation: held, fresh: false };
  }

  /** Records the namespace `held`'s owner lives in now; CONFLICT when the pool moved meanwhile. */
  async #relocate(held: Allocation, netns: string): Promise<Allocation | typeof CONFLICT> {
    const { store, ledgers } = this.#o;
    const moved: Allocation = { ...held, netns };
    const picture = await ledgers.load(held.pool);
    const result = await store.commit(held.pool, picture.revision, [{ op: 'relocate', allocation: moved }]);
    if (result.kind === 'conflict') {
      ledgers.forget(held.pool);
      return CONFLICT;
    }
    picture.revision = result.revision;
    return moved;
  }
}
