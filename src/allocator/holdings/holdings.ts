/**
 * Holdings: an address that belongs to a holder other than one pod (ipam/holding-key.ts: a
 * StatefulSet's ordinal, a KubeVirt IPAMClaim), so that whichever pod acts for the holder, on
 * whichever node, gets it. Needs a cluster tier that keeps holdings (store/cluster-holdings.ts):
 * the kubernetes store.
 *
 * How a holding is kept (per range pool; a dual-stack holder has one in each):
 * - the record in the cluster says the address is held (ClusterHoldings);
 * - the node whose ledger hands the address out (its block, or a loan ledger) keeps a placeholder
 *   allocation of it, owner (`warren.dev/held`, <holder key>, `held`): its picks never hand the
 *   address out, its block is never given back while it is there. The store's one-address-per-
 *   owner-and-range rule makes it one placeholder per holder and range on a node;
 * - each pod using it is recorded in its own node's store, in the use ledger of the address
 *   (holding-key.ts), as the pod's own allocation: released by the pod's DEL, its GC, its runtime's
 *   delete or its pod-gone release like any other, which never reaches the placeholder nor the
 *   record. So two nodes can record a use at once (a VM's live migration), and an old pod's late
 *   cleanup never releases what a new pod of the holder uses.
 *
 * The allocator owns every ADD's flow: an ADD naming no holding never reaches this code. For one
 * naming a holding the allocator consults the holdings as a planner (`plan`, holder-plan.ts), which
 * answers with the held address (its use recorded), or with a placeholder for the allocator to
 * allocate itself, then `adopt` to make it held. Nothing here calls the allocator back. The parts:
 * holder-plan.ts (the ADD of a holder), holdings-upkeep.ts (the upkeep), holding-records.ts (the
 * cluster's records as this node reaches them), watched-holdings.ts (the upkeep's listings served
 * from watches), placeholders.ts (the placeholder's owner); this
 * file wires them and keeps the holdings' lifecycle: ends, orphans, placeholders released.
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
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import type { IPAddress } from '../../ipam/address.ts';
import { sameOwner } from '../../ipam/allocation.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { ClusterHoldings, HoldingRecord } from '../../store/cluster-holdings.ts';
import type { LedgerOp, Store } from '../../store/store.ts';
import type { AllocateRequest, Assignment } from '../assignment.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { type HolderAdd, HolderPlanner, type HoldingPlan } from './holder-plan.ts';
import { HoldingRecords } from './holding-records.ts';
import { type HoldingsReport, HoldingsUpkeep } from './holdings-upkeep.ts';
import { ORPHANED, placeholderOwner } from './placeholders.ts';
import { WatchedHoldings } from './watched-holdings.ts';

export type { HolderAdd, HoldingPlan } from './holder-plan.ts';
export { HELD_NETWORK, ORPHANED, isHeldPlaceholder, placeholderOwner } from './placeholders.ts';

export interface HoldingsOptions {
  readonly store: Store;
  /** The cluster's holdings; undefined when the store keeps none (then every holding ADD is refused). */
  readonly records: ClusterHoldings | undefined;
  /** What the records are kept in, for messages. */
  readonly where: string;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  /** The allocator's locks: a use ledger's commits take its key's. */
  readonly locks: KeyedMutex;
}

export class Holdings {
  readonly #o: HoldingsOptions;
  /** The cluster's records: refused without a store keeping them, a failure to reach them TRY_AGAIN. */
  readonly #records: HoldingRecords;
  /** The ADD of a holder, planned for the allocator. */
  readonly #planner: HolderPlanner;
  /** Absent without a cluster keeping holdings. */
  readonly #upkeep: HoldingsUpkeep | undefined;
  /** Orphaned holdings (their owner forgotten) as last read: what a claim holds (claimOps). */
  #orphans: readonly HoldingRecord[] | undefined;

  constructor(options: HoldingsOptions) {
    this.#o = options;
    const { store, where, node, clock, ledgers, locks } = options;
    // The upkeep's listings (owned, used, orphaned) read watches' copies (watched-holdings.ts).
    const records = options.records === undefined ? undefined : new WatchedHoldings(options.records, node);
    const releasePlaceholder = (key: string, block: string, address: string) =>
      this.releasePlaceholder(key, block, address);
    this.#records = new HoldingRecords(records, where, store.description);
    this.#planner = new HolderPlanner({
      store,
      records: this.#records,
      node,
      clock,
      ledgers,
      locks,
      releasePlaceholder,
    });
    this.#upkeep =
      records === undefined
        ? undefined
        : new HoldingsUpkeep({ store, records, node, clock, ledgers, locks, releasePlaceholder });
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

  /** The records of holder `key` (one per range pool), read from the cluster now. */
  async holdingOf(key: string): Promise<HoldingRecord[]> {
    const records = this.#records.of(key);
    return this.#records.reach(key, 'read', () => records.ofHolder(key));
  }

  /**
   * Ends the holdings of `key`: deletes every record of it and, where this node owns the
   * placeholder, releases it now (other owners release theirs at their next upkeep). The pods
   * still using the address keep their use records until their own release. The records removed.
   */
  async endHolding(key: string): Promise<HoldingRecord[]> {
    const records = this.#records.of(key);
    const ended: HoldingRecord[] = [];
    for (const record of await this.#records.reach(key, 'read', () => records.ofHolder(key))) {
      const outcome = await this.#records.reach(key, 'end', () => records.remove(record));
      if (outcome === 'changed') continue; // made again meanwhile: not the one read
      ended.push(record);
      if (record.owner === this.#o.node) await this.releasePlaceholder(record.key, record.block, record.address);
    }
    return ended;
  }

  /**
   * What an ADD naming holder `key` does in `range` (holder-plan.ts): the held address, its use
   * recorded; or a placeholder for the allocator to allocate, then `adopt`.
   */
  plan(
    key: string,
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<HoldingPlan> {
    return this.#planner.plan(key, range, request, requested);
  }

  /** After a `make` plan, its placeholder allocated: the holding recorded, then the pod's use (holder-plan.ts). */
  adopt(add: HolderAdd, placeholder: Assignment): Promise<Assignment> {
    return this.#planner.adopt(add, placeholder);
  }

  /**
   * Marks the holdings of `node`, gone for good, orphaned (owner ORPHANED): called before its blocks
   * are freed, so whichever node claims one of them holds their addresses with the claim (claimOps).
   */
  async orphan(node: string): Promise<number> {
    const records = this.#records.kept;
    if (records === undefined) return 0;
    let orphaned = 0;
    for (const r of await this.#records.reach(`node ${node}`, 'read', () => records.list({ owner: node })))
      if ((await records.setOwner(r, ORPHANED)) !== undefined) orphaned += 1;
    return orphaned;
  }

  /** The orphaned holdings, read now (each upkeep run), kept for claims to look at without a request. */
  async readOrphans(): Promise<readonly HoldingRecord[]> {
    const records = this.#records.kept;
    this.#orphans = records === undefined ? [] : await records.list({ owner: ORPHANED });
    return this.#orphans;
  }

  /**
   * What claiming `block` must commit with the claim: a placeholder for every orphaned holding in it
   * (its owner forgotten), so the claimer never hands the address out. The orphans as the last
   * upkeep run read them (a claim costs no request more); read now at the first claim after a start
   * (TRY_AGAIN when the cluster cannot be reached then), like lending's migrated addresses.
   */
  async claimOps(block: string): Promise<LedgerOp[]> {
    if (this.#records.kept === undefined) return [];
    const orphans = this.#orphans ?? (await this.#records.reach(`block ${block}`, 'read', () => this.readOrphans()));
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
          ...defined({ createdStamp: now.stamp }),
        },
      }));
  }

  /** After a claim of `block` (claimOps): this node becomes the owner of the orphans it holds now. */
  async adoptBlock(block: string): Promise<void> {
    const records = this.#records.kept;
    if (records === undefined) return;
    for (const r of this.#orphans ?? []) if (r.block === block) await records.setOwner(r, this.#o.node);
  }

  /** Releases this node's placeholder of holder `key` for `address` in ledger `block`, if it is there. */
  async releasePlaceholder(key: string, block: string, address: string): Promise<boolean> {
    const { store, ledgers, locks } = this.#o;
    return locks.run(block, async () => {
      for (let round = 1; round <= 5; round++) {
        ledgers.forget(block);
        const read = await store.readLedger(block);
        if (read.kind !== 'snapshot') continue;
        const held = (await store.list({ ledger: block, address })).find((a) => sameOwner(a, placeholderOwner(key)));
        if (held === undefined) return false;
        const result = await store.commit(block, read.revision, [{ op: 'release', address }]);
        ledgers.forget(block);
        if (result.kind === 'committed') return true;
      }
      throw new WarrenError('TRY_AGAIN', `the placeholder of ${address} for ${key} kept changing; try again`);
    });
  }
}
