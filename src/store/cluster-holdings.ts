/**
 * The cluster's records of holdings (Store.cluster.holdings, kept by ClusterTier.holdings): an
 * address held for a holder other than one pod (ipam/holding-key.ts: a StatefulSet's ordinal, a
 * KubeVirt IPAMClaim), so that whichever pod acts for the holder, on whichever node, gets that
 * address. One record per (holder, range pool):
 * a dual-stack holder has two. On Kubernetes: WarrenAddressHolding objects (namespaced, in the
 * holder's namespace, so a namespace's deletion takes its holdings with it).
 *
 * The record is the truth that the address is held. Around it (allocator/holdings/):
 * - the node owning the block keeps a placeholder allocation for it in its own store (network
 *   'warren.dev/held'), written only after the record exists, released only after it is gone;
 * - each node records the pods using it in its own store (use ledgers, holding-key.ts), and reports
 *   them into the record's `uses` (what operators read: status) from its upkeep, never on DEL.
 *
 * Guarantees every implementation keeps:
 * - one record per (key, pool): of two `create`s of one, exactly one succeeds (the other answers
 *   undefined), so two nodes making a holder's first ADD at once agree on one address;
 * - `remove` deletes only the record as read (its uid): a holding ended and made again is another
 *   record, never removed by a stale reader;
 * - `setUses` replaces the uses of one node only if the record is still at the version read.
 */
import type { RecordView } from './cluster.ts';

/** A pod using a held address, as the node it runs on reported it. */
export interface HoldingUse {
  readonly node: string;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  /** Milliseconds since the epoch when the use was recorded (the node's wall clock). */
  readonly since: number;
}

/** What a holding is made of. */
export interface NewHolding {
  /** The holder's key (ipam/holding-key.ts). */
  readonly key: string;
  /** The range pool the address is in. */
  readonly pool: string;
  readonly address: string;
  /** The node whose block holds the address: it keeps the placeholder. */
  readonly owner: string;
  /** That block's store key. */
  readonly block: string;
}

export interface HoldingRecord extends NewHolding {
  readonly uses: readonly HoldingUse[];
  /** Milliseconds since the epoch when the record was made (the cluster's clock). */
  readonly createdAt: number;
  /** Identity of the record: a holding ended and made again is another record. */
  readonly uid: string;
  readonly version: string;
}

export type RemoveResult = 'removed' | 'changed' | 'gone';

export interface ClusterHoldings {
  /** Makes the record; undefined when one of (key, pool) exists already. */
  create(holding: NewHolding): Promise<HoldingRecord | undefined>;
  /** The record of (key, pool), if any. */
  get(key: string, pool: string): Promise<HoldingRecord | undefined>;
  /** Every record of holder `key` (one per range pool). */
  ofHolder(key: string): Promise<HoldingRecord[]>;
  /**
   * Records selected by what they are labelled with: the owner of the block (`owner`), a node
   * using them (`user`, as `uses` says), the kind of holder (`kind`: `statefulset`, `ipamclaim`),
   * the ledger holding the address (`block`). With no filter, every record.
   */
  list(filter: HoldingFilter): Promise<HoldingRecord[]>;
  /**
   * Makes `node` the record's owner if it is still at `record.version` (the block's new holder,
   * its old one forgotten); undefined when it changed or is gone.
   */
  setOwner(record: HoldingRecord, node: string): Promise<HoldingRecord | undefined>;
  /**
   * Replaces node `node`'s entries of `uses` by `uses` if the record is still at `record.version`;
   * undefined when it changed (read again) or is gone.
   */
  setUses(record: HoldingRecord, node: string, uses: readonly HoldingUse[]): Promise<HoldingRecord | undefined>;
  /** Deletes the record if it is still `record` (its uid). */
  remove(record: HoldingRecord): Promise<RemoveResult>;
  /**
   * The records of `filter` (as `list` selects them) kept in a view: listed once, then watched
   * (on Kubernetes: a label selector, resumed from the version reached, listed again only on 410
   * Gone), so an upkeep reads them with no request. Ended by its `close`, or the tier's.
   */
  watch(filter: HoldingFilter): RecordView<HoldingRecord>;
}

/** What `list` and `watch` select records by (ClusterHoldings.list). */
export interface HoldingFilter {
  readonly owner?: string;
  readonly user?: string;
  readonly kind?: string;
  readonly block?: string;
}

/** Whether `record` is one `filter` selects: what every implementation keeps, however it selects. */
export function inHoldingFilter(filter: HoldingFilter, record: HoldingRecord): boolean {
  return (
    (filter.owner === undefined || record.owner === filter.owner) &&
    (filter.user === undefined || record.uses.some((u) => u.node === filter.user)) &&
    (filter.kind === undefined || record.key.startsWith(`${filter.kind}/`)) &&
    (filter.block === undefined || record.block === filter.block)
  );
}
