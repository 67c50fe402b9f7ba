/**
 * Holdings: an address that belongs to a holder other than one pod (ipam/holding-key.ts: a
 * StatefulSet's ordinal, a KubeVirt IPAMClaim), so that whichever pod acts for the holder, on
 * whichever node, gets it. Needs a cluster tier that keeps holdings (store/cluster-holdings.ts):
 * the kubernetes store.
 *
 * How a holding is kept (per range pool; a dual-stack holder has one in each):
 * - the record in the cluster says the address is held (ClusterHoldings);
 * - the node whose store pool hands the address out (its block, or a loan pool) keeps a placeholder
 *   allocation of it, owner (`warren.dev/held`, <holder key>, `held`): its picks never hand the
 *   address out, its block is never given back while it is there. The store's one-address-per-
 *   owner-and-range rule makes it one placeholder per holder and range on a node;
 * - each pod using it is recorded in its own node's store, in the use pool of the address
 *   (holding-key.ts), as the pod's own allocation: released by the pod's DEL, its GC, its runtime's
 *   delete or its pod-gone release like any other, which never reaches the placeholder nor the
 *   record. So two nodes can record a use at once (a VM's live migration), and an old pod's late
 *   cleanup never releases what a new pod of the holder uses.
 *
 * Guarantees:
 * - the first ADD of a holder allocates the placeholder through the allocator's usual path (its
 *   own blocks, a claim, a loan), then makes the record: the address is held locally before the
 *   cluster says so, and a record always had its placeholder written first. A record that cannot
 *   be made releases the placeholder (TRY_AGAIN); one made at once by another node wins, and its
 *   address is used (the placeholder here goes);
 * - a later ADD of the holder, on any node, uses the record's address; a requested address that is
 *   not it is refused (ADDRESS_UNAVAILABLE); a use recorded on this node by another attachment (an
 *   old pod force-deleted, its DEL still to come) is replaced in the same commit: the holder's
 *   current pod has the address, and the old attachment's release finds nothing of its own;
 * - ADDs of a holder make requests to the cluster (a read, and the record at the first); DELs never;
 * - a placeholder without its record is released by the owner's upkeep (holdings-upkeep.ts) after
 *   a grace, never sooner, so a first ADD under way (placeholder written, record not yet) is kept;
 * - a node forgotten for good (forget-node) has its holdings marked orphaned before its blocks are
 *   freed; the node that claims such a block next writes their placeholders in the claim's own
 *   commit and becomes their owner. It knows the orphans as its last upkeep run read them (as
 *   lending knows migrated addresses): a claim within one upkeep interval of the forget, on a node
 *   other than the forgetting one, may miss them.
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { type IPAddress, formatIP, parseIP } from '../../ipam/address.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import { holderKeyProblem, isUseKey, useKey } from '../../ipam/holding-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { ClusterHoldings, HoldingRecord } from '../../store/cluster-holdings.ts';
import type { PoolOp, Store } from '../../store/store.ts';
import { type AllocateRequest, type Assignment, recordOf } from '../assignment.ts';
import type { PoolCache } from '../pool-cache.ts';
import { type HoldingsReport, HoldingsUpkeep } from './holdings-upkeep.ts';
import { ORPHANED, placeholderOwner } from './placeholders.ts';

export { HELD_NETWORK, ORPHANED, isHeldPlaceholder, placeholderOwner } from './placeholders.ts';

export interface HoldingsOptions {
  readonly store: Store;
  /** The cluster's holdings; undefined when the store keeps none (then every holding ADD is refused). */
  readonly records: ClusterHoldings | undefined;
  /** What the records are kept in, for messages. */
  readonly where: string;
  readonly node: string;
  readonly clock: Clock;
  readonly pools: PoolCache;
  /** The allocator's locks: a use pool's commits take its key's. */
  readonly locks: KeyedMutex;
}

/** Allocates the placeholder of a holder through the allocator's usual path (one range). */
export type AllocateFresh = (request: AllocateRequest, requested: IPAddress | undefined) => Promise<Assignment>;

export class Holdings {
  readonly #o: HoldingsOptions;
  /** Absent without a cluster keeping holdings. */
  readonly #upkeep: HoldingsUpkeep | undefined;
  /** Orphaned holdings (their owner forgotten) as last read: what a claim holds (claimOps). */
  #orphans: readonly HoldingRecord[] | undefined;

  constructor(options: HoldingsOptions) {
    this.#o = options;
    const { store, records, node, clock, pools, locks } = options;
    this.#upkeep =
      records === undefined
        ? undefined
        : new HoldingsUpkeep({
            store,
            records,
            node,
            clock,
            pools,
            locks,
            releasePlaceholder: (key, block, address) => this.releasePlaceholder(key, block, address),
          });
  }

  /**
   * One round of upkeep (holdings-upkeep.ts): placeholders whose record has been gone for
   * `graceMs` released, records owned here held again, this node's uses reported.
   */
  async run(graceMs: number): Promise<HoldingsReport> {
    if (this.#upkeep === undefined) return { held: [], released: [], reported: 0, errors: [] };
    const report = await this.#upkeep.run(graceMs);
    try {
      await this.readOrphans();
    } catch (error) {
      return { ...report, errors: [...report.errors, `reading orphaned holdings: ${messageOf(error)}`] };
    }
    return report;
  }

  /** The cluster's records, or the refusal of a store that keeps none. */
  #records(key: string): ClusterHoldings {
    const records = this.#o.records;
    if (records === undefined)
      throw new WarrenError(
        'INVALID_CONFIG',
        `the address of ${key} cannot be held: sticky addresses need the kubernetes store ` +
          `(this agent's store, ${this.#o.store.description}, keeps no holdings)`,
      );
    return records;
  }

  /** The records of holder `key` (one per range pool), read from the cluster now. */
  async holdingOf(key: string): Promise<HoldingRecord[]> {
    const records = this.#records(key);
    return this.#reach(key, 'read', () => records.ofHolder(key));
  }

  /**
   * Ends the holdings of `key`: deletes every record of it and, where this node owns the
   * placeholder, releases it now (other owners release theirs at their next upkeep). The pods
   * still using the address keep their use records until their own release. The records removed.
   */
  async endHolding(key: string): Promise<HoldingRecord[]> {
    const records = this.#records(key);
    const ended: HoldingRecord[] = [];
    for (const record of await this.#reach(key, 'read', () => records.ofHolder(key))) {
      const outcome = await this.#reach(key, 'end', () => records.remove(record));
      if (outcome === 'changed') continue; // made again meanwhile: not the one read
      ended.push(record);
      if (record.owner === this.#o.node) await this.releasePlaceholder(record.key, record.block, record.address);
    }
    return ended;
  }

  /**
   * Allocates in `range` for `request`: without a `holding`, as `fresh` does; with one, the held
   * address when the holding exists, else a fresh one made held (see the header).
   */
  async allocate(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    fresh: AllocateFresh,
  ): Promise<Assignment> {
    const key = request.holding;
    if (key === undefined) return fresh(request, requested);
    const problem = holderKeyProblem(key);
    if (problem !== undefined) throw new WarrenError('INVALID_CONFIG', problem);
    const records = this.#records(key);
    const mine = (await this.#o.store.findByOwner(request.owner)).find((a) => rangePoolOfKey(a.pool) === range.pool);
    // The attachment ADDed before without the holding (its network made sticky since): its address stays its own.
    if (mine !== undefined && !isUseKey(mine.pool))
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `container ${request.owner.containerID} (${request.owner.ifname}) already holds ${mine.address} in ` +
          `${range.pool}, not held for ${key}`,
      );
    const record =
      (await this.#reach(key, 'read', () => records.get(key, range.pool))) ??
      (await this.#make(key, range, request, requested, fresh));
    if (requested !== undefined && formatIP(requested) !== record.address)
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `${key} holds ${record.address} in ${range.pool}, not the requested ${formatIP(requested)}`,
      );
    // A use of this attachment of an earlier holding (ended and made again, elsewhere): it goes first.
    if (mine !== undefined && mine.pool !== useKey(range.pool, record.address, key)) await this.#releaseUse(mine);
    return this.#use(range, record, request);
  }

  /** The first ADD of a holder in a range: placeholder, then record. */
  async #make(
    key: string,
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    fresh: AllocateFresh,
  ): Promise<HoldingRecord> {
    const records = this.#records(key);
    const placeholder = await fresh(
      {
        owner: placeholderOwner(key),
        ranges: [range],
        ...(requested === undefined ? {} : { requested: [requested] }),
        ...(request.cooldownSeconds === undefined ? {} : { cooldownSeconds: request.cooldownSeconds }),
      },
      requested,
    );
    const { pool: block, address } = placeholder.allocation;
    let made: HoldingRecord | undefined;
    try {
      made = await records.create({ key, pool: range.pool, address, owner: this.#o.node, block });
      made ??= await records.get(key, range.pool);
    } catch (error) {
      await this.releasePlaceholder(key, block, address).catch(() => undefined);
      throw new WarrenError(
        'TRY_AGAIN',
        `the holding of ${address} for ${key} could not be recorded in ${this.#o.where}: ${messageOf(error)}`,
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
      await this.releasePlaceholder(key, block, address);
    return made;
  }

  /** Records `request`'s pod as using `record`'s address on this node. */
  async #use(range: RangeSpec, record: HoldingRecord, request: AllocateRequest): Promise<Assignment> {
    const { store, pools, locks, clock, node } = this.#o;
    const pool = useKey(range.pool, record.address, record.key);
    return locks.run(pool, async () => {
      for (let round = 1; round <= 5; round++) {
        pools.forget(pool);
        const read = await store.readPool(pool);
        if (read.kind !== 'snapshot') continue;
        const held = (await store.list({ pool })).find((a) => a.address === record.address);
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
        const ops: PoolOp[] = [];
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

  /**
   * Marks the holdings of `node`, gone for good, orphaned (owner ORPHANED): called before its blocks
   * are freed, so whichever node claims one of them holds their addresses with the claim (claimOps).
   */
  async orphan(node: string): Promise<number> {
    const records = this.#o.records;
    if (records === undefined) return 0;
    let orphaned = 0;
    for (const r of await this.#reach(`node ${node}`, 'read', () => records.list({ owner: node })))
      if ((await records.setOwner(r, ORPHANED)) !== undefined) orphaned += 1;
    return orphaned;
  }

  /** The orphaned holdings, read now (each upkeep run), kept for claims to look at without a request. */
  async readOrphans(): Promise<readonly HoldingRecord[]> {
    const records = this.#o.records;
    this.#orphans = records === undefined ? [] : await records.list({ owner: ORPHANED });
    return this.#orphans;
  }

  /**
   * What claiming `block` must commit with the claim: a placeholder for every orphaned holding in it
   * (its owner forgotten), so the claimer never hands the address out. The orphans as the last
   * upkeep run read them (a claim costs no request more); read now at the first claim after a start
   * (TRY_AGAIN when the cluster cannot be reached then), like lending's migrated addresses.
   */
  async claimOps(block: string): Promise<PoolOp[]> {
    if (this.#o.records === undefined) return [];
    const orphans = this.#orphans ?? (await this.#reach(`block ${block}`, 'read', () => this.readOrphans()));
    const now = momentOf(this.#o.clock);
    return orphans
      .filter((r) => r.block === block)
      .map((r) => ({
        op: 'allocate',
        allocation: {
          pool: block,
          address: r.address,
          ...placeholderOwner(r.key),
          node: this.#o.node,
          createdAt: now.wall,
          ...(now.stamp === undefined ? {} : { createdStamp: now.stamp }),
        },
      }));
  }

  /** After a claim of `block` (claimOps): this node becomes the owner of the orphans it holds now. */
  async adoptBlock(block: string): Promise<void> {
    const records = this.#o.records;
    if (records === undefined) return;
    for (const r of this.#orphans ?? []) if (r.block === block) await records.setOwner(r, this.#o.node);
  }

  /** Releases `use`, an earlier use of the same attachment in another use pool. */
  async #releaseUse(use: Allocation): Promise<void> {
    const { store, pools, locks } = this.#o;
    await locks.run(use.pool, async () => {
      pools.forget(use.pool);
      const read = await store.readPool(use.pool);
      if (read.kind !== 'snapshot') return;
      await store.commit(use.pool, read.revision, [{ op: 'release', address: use.address }]);
      pools.forget(use.pool);
    });
  }

  /** Releases this node's placeholder of holder `key` for `address` in store pool `block`, if it is there. */
  async releasePlaceholder(key: string, block: string, address: string): Promise<boolean> {
    const { store, pools, locks } = this.#o;
    return locks.run(block, async () => {
      for (let round = 1; round <= 5; round++) {
        pools.forget(block);
        const read = await store.readPool(block);
        if (read.kind !== 'snapshot') continue;
        const held = (await store.list({ pool: block, address })).find((a) => sameOwner(a, placeholderOwner(key)));
        if (held === undefined) return false;
        const result = await store.commit(block, read.revision, [{ op: 'release', address }]);
        pools.forget(block);
        if (result.kind === 'committed') return true;
      }
      throw new WarrenError('TRY_AGAIN', `the placeholder of ${address} for ${key} kept changing; try again`);
    });
  }

  async #reach<T>(key: string, what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof WarrenError && error.code !== 'IO_FAILURE') throw error;
      throw new WarrenError(
        'TRY_AGAIN',
        `could not ${what} the holding of ${key} in ${this.#o.where}: ${messageOf(error)}`,
        { cause: error },
      );
    }
  }
}

function sameOwner(a: Owner, b: Owner): boolean {
  return a.network === b.network && a.containerID === b.containerID && a.ifname === b.ifname;
}
