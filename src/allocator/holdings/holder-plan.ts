/**
 * The ADD of a holder in one range, planned for the allocator (allocator.ts consults it only for a
 * request naming a holding; holdings.ts states the guarantees kept here). `plan` answers what to do:
 * - `held`: the holding exists; its address is the pod's, the use recorded (a use of another
 *   attachment on this node replaced in the same commit), the assignment made;
 * - `make`: there is none yet; the allocator allocates `placeholder` through its usual path (its own
 *   blocks, a claim, a loan), then `adopt` records the holding of that address and the pod's use
 *   of it; a record that cannot be made releases the placeholder (TRY_AGAIN), one made at once by
 *   another node wins and its address is used (the placeholder here goes).
 * It never calls the allocator: the allocator runs the steps in order and owns the ADD's flow.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { type IPAddress, formatIP, parseIP } from '../../ipam/address.ts';
import { type Allocation, sameOwner } from '../../ipam/allocation.ts';
import { heldInRange } from '../../ipam/shared-pools.ts';
import { holderKeyProblem, isUseKey, useKey } from '../../ipam/holding-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { HoldingRecord } from '../../store/cluster-holdings.ts';
import type { LedgerOp, Store } from '../../store/store.ts';
import { type AllocateRequest, type Assignment, recordOf } from '../assignment.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import type { HoldingRecords } from './holding-records.ts';
import { placeholderOwner } from './placeholders.ts';

/** One ADD of holder `key` in `range`, as planned: what `adopt` goes on from. */
export interface HolderAdd {
  readonly key: string;
  readonly range: RangeSpec;
  readonly request: AllocateRequest;
  readonly requested: IPAddress | undefined;
  /** What the attachment held in the range when planned: a use, or nothing. */
  readonly mine: Allocation | undefined;
}

/** What an ADD of a holder does in one range (see the header). */
export type HoldingPlan =
  | { readonly kind: 'held'; readonly assignment: Assignment }
  | { readonly kind: 'make'; readonly placeholder: AllocateRequest; readonly add: HolderAdd };

export interface HolderPlannerOptions {
  readonly store: Store;
  readonly records: HoldingRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  /** The allocator's locks: a use ledger's commits take its key's. */
  readonly locks: KeyedMutex;
  /** Releases this node's placeholder (holdings.ts), under the block's lock. */
  readonly releasePlaceholder: (key: string, block: string, address: string) => Promise<boolean>;
}

export class HolderPlanner {
  readonly #o: HolderPlannerOptions;

  constructor(options: HolderPlannerOptions) {
    this.#o = options;
  }

  /** What `request`, naming holder `key` (its `holding`), does in `range` (see the header). */
  async plan(
    key: string,
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<HoldingPlan> {
    const problem = holderKeyProblem(key);
    if (problem !== undefined) throw new WarrenError('INVALID_CONFIG', problem);
    const records = this.#o.records.of(key);
    const mine = (await this.#o.store.findByOwner(request.owner)).find((a) => heldInRange(range, a));
    // The attachment ADDed before without the holding (its network made sticky since): its address stays its own.
    if (mine !== undefined && !isUseKey(mine.pool))
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `container ${request.owner.containerID} (${request.owner.ifname}) already holds ${mine.address} in ` +
          `${range.pool}, not held for ${key}`,
      );
    const add: HolderAdd = { key, range, request, requested, mine };
    const record = await this.#o.records.reach(key, 'read', () => records.get(key, range.pool));
    if (record !== undefined) return { kind: 'held', assignment: await this.#useHeld(add, record) };
    const placeholder: AllocateRequest = {
      owner: placeholderOwner(key),
      ranges: [range],
      ...(requested === undefined ? {} : { requested: [requested] }),
      ...defined({ cooldownSeconds: request.cooldownSeconds }),
    };
    return { kind: 'make', placeholder, add };
  }

  /**
   * After a `make` plan, once the allocator allocated its placeholder: the record of the holding
   * (the placeholder released when it cannot be made, or another node made it at once), then the
   * pod's use of the held address.
   */
  async adopt(add: HolderAdd, placeholder: Assignment): Promise<Assignment> {
    const { key, range } = add;
    const records = this.#o.records.of(key);
    const { pool: block, address } = placeholder.allocation;
    let made: HoldingRecord | undefined;
    try {
      made = await records.create({ key, pool: range.pool, address, owner: this.#o.node, block });
      made ??= await records.get(key, range.pool);
    } catch (error) {
      await this.#o.releasePlaceholder(key, block, address).catch(() => undefined);
      throw new WarrenError(
        'TRY_AGAIN',
        `the holding of ${address} for ${key} could not be recorded in ${this.#o.records.where}: ${messageOf(error)}`,
        { cause: error },
      );
    }
    if (made === undefined)
      throw new WarrenError(
        'TRY_AGAIN',
        `the holding of ${key} in ${range.pool} was made and ended at once; try again`,
      );
    // Made at once by another node: its address is the holder's; this placeholder is not needed.
    if (made.address !== address || made.owner !== this.#o.node || made.block !== block)
      await this.#o.releasePlaceholder(key, block, address);
    return this.#useHeld(add, made);
  }

  /** The pod's use of `record`'s address, once the requested address is checked against it. */
  async #useHeld(add: HolderAdd, record: HoldingRecord): Promise<Assignment> {
    const { key, range, request, requested, mine } = add;
    if (requested !== undefined && formatIP(requested) !== record.address)
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `${key} holds ${record.address} in ${range.pool}, not the requested ${formatIP(requested)}`,
      );
    // A use of this attachment of an earlier holding (ended and made again, elsewhere): it goes first.
    if (mine !== undefined && mine.pool !== useKey(range.pool, record.address, key)) await this.#releaseUse(mine);
    return this.#use(range, record, request);
  }

  /** Records `request`'s pod as using `record`'s address on this node. */
  async #use(range: RangeSpec, record: HoldingRecord, request: AllocateRequest): Promise<Assignment> {
    const { store, ledgers, locks, clock, node } = this.#o;
    const pool = useKey(range.pool, record.address, record.key);
    return locks.run(pool, async () => {
      for (let round = 1; round <= 5; round++) {
        ledgers.forget(pool);
        const read = await store.readLedger(pool);
        if (read.kind !== 'snapshot') continue;
        const held = (await store.list({ ledger: pool })).find((a) => a.address === record.address);
        if (held !== undefined && sameOwner(held, request.owner)) {
          if (request.netns === undefined || held.netns === request.netns)
            return { range, allocation: held, fresh: false };
          const moved = { ...held, netns: request.netns };
          const result = await store.commit(pool, read.revision, [{ op: 'relocate', allocation: moved }]);
          if (result.kind === 'committed') return { range, allocation: moved, fresh: false };
          continue;
        }
        const ip = parseIP(record.address);
        if (ip === undefined || ip.family !== range.family)
          throw new WarrenError(
            'IO_FAILURE',
            `the holding of ${record.key} holds ${record.address}, no address of ${range.pool}`,
          );
        const allocation = recordOf({ ...range, pool }, ip.value, request, node, momentOf(clock));
        const ops: LedgerOp[] = [];
        // Another attachment's use (an old pod of the holder whose release has not come): the holder's
        // current pod takes the address; the old attachment's release then finds nothing of its own.
        if (held !== undefined) ops.push({ op: 'release', address: held.address });
        ops.push({ op: 'allocate', allocation });
        const result = await store.commit(pool, read.revision, ops);
        if (result.kind === 'committed') return { range, allocation, fresh: true };
      }
      throw new WarrenError('TRY_AGAIN', `the use of ${record.address} for ${record.key} kept changing; try again`);
    });
  }

  /** Releases `use`, an earlier use of the same attachment in another use ledger. */
  async #releaseUse(use: Allocation): Promise<void> {
    const { store, ledgers, locks } = this.#o;
    await locks.run(use.pool, async () => {
      ledgers.forget(use.pool);
      const read = await store.readLedger(use.pool);
      if (read.kind !== 'snapshot') return;
      await store.commit(use.pool, read.revision, [{ op: 'release', address: use.address }]);
      ledgers.forget(use.pool);
    });
  }
}
