/**
 * The usual path of an ADD in one range (allocator.ts runs it for each range of an ADD, and for the
 * placeholder of a holder's first ADD): the range admitted against overlaps (admission.ts), the
 * address the owner already holds answered again, else one decision per round in the range's store
 * pool or blocks (ledger-assigner.ts, block-assigner.ts), and waits for other nodes' grants outside
 * the locks (lending); a range with no room ends in its exhaustion (exhaustion.ts).
 *
 * Guarantees:
 * - per address space and per range pool, one decision at a time in this process (KeyedMutex);
 * - idempotent per owner and range: a retry answers the address already held, recorded in the
 *   network namespace the retry names;
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
import { type OverlapAdmission, addressSpaceOf } from './admission.ts';
import { type AllocateRequest, type Assignment, MAX_WAITS, Waiting } from './assignment.ts';
import type { BlockAssigner } from './block-assigner.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { Exhaustion } from './exhaustion.ts';
import type { LedgerAssigner } from './ledger-assigner.ts';
import type { LedgerCache } from './ledger-cache.ts';

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
      if (waits >= MAX_WAITS || !(await outcome.until(since))) throw await this.#o.exhaustion.error(range);
    }
  }

  /** Rounds under the range's locks: the assignment, or what to wait for before deciding again. */
  async #roundsInRange(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment | Waiting> {
    const { store, locks, admission, blocks, assigner, exhaustion } = this.#o;
    // Ranges of one network_name and family may overlap across configs: allocations in them are
    // decided one at a time here, so an overlap admitted below cannot race an allocation.
    return locks.run(addressSpaceOf(range), () =>
      locks.run(range.pool, () =>
        retryOnConflict<Assignment | Waiting>(
          { subject: `pool ${range.pool}`, action: 'allocate' },
          this.#o.maxAttempts,
          async (attempt) => {
            // A look-up after the first round; admitted again only after a commit said another agent
            // retired this range's admission (admission.ts), which then refuses while that range holds.
            const guard = await admission.admit(range);
            // With blocks the first round skips the owner look-up: the commit itself refuses a second
            // address for one owner (the store's owner-per-pool rule), and a retried ADD lands here
            // on the second round, where the look-up finds what it holds.
            const held =
              blocks !== null && attempt === 1
                ? undefined
                : (await store.findByOwner(request.owner)).find((a) => rangePoolOfKey(a.pool) === range.pool);
            if (held !== undefined) {
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
            const decision =
              blocks !== null
                ? await blocks.decide(range, request, requested, guard)
                : await assigner.decide(range, range, request, requested, guard);
            switch (decision.kind) {
              case 'done':
                return decision.assignment;
              case 'full':
                throw await exhaustion.error(range);
              case 'conflict':
                if (decision.admissionLost === true) admission.forget(range.pool);
                return decision.wait === undefined ? CONFLICT : new Waiting(decision.wait);
              default: {
                const never: never = decision;
                throw new Error(`unhandled decision ${JSON.stringify(never)}`);
              }
            }
          },
        ),
      ),
    );
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
