/**
 * The records the nodes of a cluster share, as the store's contract names them (`Store.cluster`,
 * store.ts): a block's claim, the blocks as their owners published them, the requests by which a
 * node with no room asks the owners for addresses, what a node's file check found, and (etcd) the
 * history of writes waiting to be compacted (StoreCluster.history). The
 * backends keep them (tiered/cluster-tier.ts: the cluster tier, whose contract extends
 * `ClusterRecords` and states the guarantees; etcd-tier/, kubernetes/); the allocator and the agent
 * read and write them through `Store.cluster` only, never through a backend's tier.
 */
import type { Allocation } from '../ipam/allocation.ts';
import type { Succession } from './succession.ts';

/** A block held by a node, as the cluster records it. */
export interface BlockClaim {
  /** The block's store key, `<range pool>#<block CIDR>` (ipam/blocks.ts). */
  readonly key: string;
  readonly node: string;
  /** Identity of the record: a block given back and claimed again is another record. */
  readonly uid: string;
  /** The record's version; `unclaim` removes it only at this version. */
  readonly version: string;
  /**
   * Set while `node` offers the block to that node, which holds every address in use in it as a
   * loan (allocator/lending/handover.ts): `node` hands out nothing in it meanwhile.
   */
  readonly offeredTo?: string;
  /**
   * Set while `node` takes the block over from that node and has not recorded it in its file yet:
   * no node hands out anything in it until it is cleared (tiered/handover.ts).
   */
  readonly takenFrom?: string;
}

/** Who a block's claim names, as a handover moves it (ClusterTier.moveClaim). */
export interface ClaimState {
  readonly node: string;
  readonly offeredTo?: string;
  readonly takenFrom?: string;
}

/** What a handover step came to. */
export type TakeOutcome = 'taken' | 'not offered' | 'conflict';

/**
 * A block handed over from its owner to the node holding its addresses in use as loans, as the
 * allocator uses it (StoreCluster.handover, store.ts; the steps and why each crash point is
 * safe: tiered/handover.ts).
 */
export interface BlockHandover {
  /**
   * Offers this node's block `key` to node `to`: nothing is handed out in it here from the call on;
   * `stillFits` (under the caller's lock) reads it again and says whether it may still go. The claim
   * as offered, or undefined when it was not (then it is this node's to use again).
   */
  offer(key: string, to: string, stillFits: () => Promise<boolean>): Promise<BlockClaim | undefined>;
  /** Takes back this node's offer of `key` not taken: whether the block is this node's to use again. */
  retract(key: string): Promise<boolean>;
  /** This node's claims offered to another node, as its claims cache has them. */
  offered(): BlockClaim[];
  /**
   * Takes block `key` over, offered to this node (or taken by it already: resumed); `record` commits
   * it in this node's file with this node's loans of it (Store.commitAll), whether it did.
   */
  take(key: string, record: (claim: BlockClaim) => Promise<boolean>): Promise<TakeOutcome>;
}

/** Counts published with a block's allocations, for placement and operators. */
export interface BlockCounts {
  readonly allocated: number;
  readonly resting: number;
}

/** A block's allocations as its owner last published them. */
export interface PublishedBlock {
  readonly key: string;
  readonly node: string;
  readonly counts: BlockCounts;
  readonly allocations: readonly Allocation[];
  /** Milliseconds since the epoch when the owner published (its wall clock). */
  readonly publishedAt: number;
  /**
   * The revision of the block in its owner's own store (its SQLite file) when the allocations were
   * read, read after them (tiered/publisher.ts): a file whose revision of the block is lower went
   * back (restored from a copy, or lost: 0) and holds less than this publication
   * (tiered/file-check.ts). Absent in publications of older Warrens.
   */
  readonly revision?: number;
  /**
   * The lineage of the owner's file that published it (Store.lineage): `revision` counts in that
   * file's history, and compares with another file's not at all. Absent in publications of older Warrens.
   */
  readonly lineage?: string;
  /**
   * Where that lineage stands among the node's file's histories (tiered/lineage.ts): which it took
   * over, and its generation. Absent: none taken over (and publications of older Warrens).
   */
  readonly succession?: Succession;
  /**
   * Addresses of the block its owner may hand out next, not yet listed in `allocations` (in pick
   * order from its cursor: tiered/publication-need.ts): an ADD that takes one needs no write now, so
   * a reader counts them as possibly in use wherever a duplicate could follow (a claimer of a block
   * nobody holds, a file gone back), and as free in figures. Absent or empty: only `allocations`
   * (and publications of older Warrens).
   */
  readonly ahead?: readonly string[];
  /**
   * A borrower's loan ledger (one address another node lent `node`: allocator/lending/), published so
   * the cluster view shows who holds a lent address, not only its lender's placeholder. Its key
   * (`<range pool>#<address>/32`) names no claim. Absent: a claimed block.
   */
  readonly loan?: true;
}

/** An address one node hands another (`lender` → the request's node), or one a migration recorded. */
export interface Grant {
  readonly address: string;
  /** The node whose block holds the address; `whereabouts` for one recorded by `warren migrate`. */
  readonly lender: string;
  /** The block key of the lender's block holding it; absent when no block holds it yet (migration). */
  readonly block?: string;
  /** Who holds the address already (migration): the requester records it as this allocation. */
  readonly holder?: Allocation;
  /**
   * Set by the borrower once its loan is given back for good (its loan ledger marked given back
   * first, allocator/lending/loan-return.ts): never adopted again; its lender removes it and lets
   * go of the placeholder at once, without the grace a grant gone unexplained waits (lender.ts).
   */
  readonly returned?: true;
  /**
   * Set by the lender on every grant of its block `block` when it offers the whole block to the
   * borrower (allocator/lending/handover.ts): the borrower takes the block over, its loans becoming
   * its own allocations. A reader that does not know it keeps the loans as they are.
   */
  readonly offered?: true;
}

/** A node's request for addresses of one range: one record per (range, node). */
export interface AddressRequest {
  readonly pool: string;
  readonly node: string;
  /** Addresses the node asks for beyond what it was granted. */
  readonly wanted: number;
  readonly grants: readonly Grant[];
  readonly version: string;
}

export interface Page<T> {
  readonly items: readonly T[];
  /** Present when there is more: hand it back for the next page. */
  readonly continue?: string;
}

/**
 * What the allocator (lending, block placement, the exhaustion refusal) and the agent (pools'
 * status, listings) read and write of the cluster's records directly.
 */
export interface ClusterRecords {
  /** Where the records are kept, for messages. */
  readonly description: string;
  /** The claim of one block, if any. */
  claimOf(key: string): Promise<BlockClaim | undefined>;
  /** One page of published blocks (and loans, `loan`), of range `pool` and/or node `node` when given. */
  published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>>;
  /** Asks, as `node`, for `wanted` more addresses of range `pool` (creating or updating its request). */
  ask(pool: string, node: string, wanted: number): Promise<AddressRequest>;
  /** The request of `node` for range `pool`, if any. */
  requestOf(pool: string, node: string): Promise<AddressRequest | undefined>;
  /** Open requests (wanted > 0) of range `pool`, or of every range. */
  openRequests(pool?: string): Promise<AddressRequest[]>;
  /** Every request granting something lent by `lender` (for the lender's upkeep). */
  requestsLentBy(lender: string): Promise<AddressRequest[]>;
  /**
   * Replaces the request's grants and wanted count if it is still at `request.version`; undefined
   * when it changed (read again and decide again).
   */
  updateRequest(request: AddressRequest, grants: readonly Grant[], wanted: number): Promise<AddressRequest | undefined>;
  /**
   * Keeps the requests of `scope` in a view, listed once and then watched (resumed from the version
   * reached, listed again only when the cluster no longer keeps that version), so the periodic
   * readings read the view and make no request; `listener` is told of each request that entered,
   * changed in or left the scope (`gone`), as the watch tells it. Until `synced`, the view answers
   * from nothing: a reader falls back to the listings above. Closed by `close` (or the tier's).
   */
  watchRequests(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest>;
}

/** The address requests a view keeps (ClusterRecords.watchRequests): each selected on the server where it can be. */
export type RequestScope =
  /** The open requests (wanted > 0) of these range pools: a lender's, the ranges it holds blocks of. */
  | { readonly open: readonly string[] }
  /** The requests granting something lent by `lentBy` (a node, or a migration's `whereabouts`). */
  | { readonly lentBy: string }
  /** The requests of node `node`, one per range it asked in. */
  | { readonly node: string };

/** A request as a view's watch told it: `gone` when it left the scope (deleted, or no longer selected). */
export interface RequestChange {
  readonly request: AddressRequest;
  readonly gone: boolean;
}

/** Records of the cluster kept in step by a watch (ClusterRecords.watchRequests, ClusterHoldings.watch). */
export interface RecordView<T> {
  /** Whether the view holds its scope as of its watch (its first listing is in); before, it holds nothing. */
  readonly synced: boolean;
  /** The records in scope, as of the last change the watch told. */
  values(): T[];
  /** Ends the watch; nothing is told after it. */
  close(): void;
}

/** The published view alone: what exhaustion, the pools' status and listings read. */
export type PublishedView = ClusterRecords['published'];

/** What the node's file held against what it published (tiered/file-check.ts) found, for `warren status`. */
export interface FileCheckStatus {
  /** Whether the file has been compared with the publications (allocation in blocks waits until then). */
  readonly compared: boolean;
  /** Why not yet, when not. */
  readonly problem?: string;
  /** Allocations taken from the publications that the file still holds: kept until their containers are proven gone. */
  readonly restored: number;
  /** Blocks adopted: claimed in the cluster by this node, unknown to its file. */
  readonly adopted: readonly string[];
  /** Blocks whose publication was newer than the file. */
  readonly merged: readonly string[];
  /** Disagreements left as the file has them (a publication without a revision). */
  readonly disagreements: readonly string[];
  /** Blocks where nothing is handed out until `warren store accept`, each with why. */
  readonly withheld: readonly string[];
  /**
   * Placeholders the file holds for addresses a newer publication announced (tiered/file-check.ts):
   * kept until `warren store accept` releases them. Absent: none.
   */
  readonly announced?: number;
}

/** What is left of an older layout the store moves from (etcd's one-tier store), for `warren doctor`. */
export interface LegacyLeft {
  /** Old blocks left per node (the node their document names). */
  readonly blocks: Readonly<Record<string, number>>;
  /** Old range documents. */
  readonly ranges: number;
}

/** Whether `request` is in `scope` (RequestScope): what every tier's view keeps, however it selects. */
export function inRequestScope(scope: RequestScope, request: AddressRequest): boolean {
  if ('open' in scope) return request.wanted > 0 && scope.open.includes(request.pool);
  if ('lentBy' in scope) return request.grants.some((g) => g.lender === scope.lentBy);
  return request.node === scope.node;
}

/**
 * What a store that keeps every write in a history until it is compacted (etcd) knows of that
 * history and of the room left for it, as read from one member (etcd-tier/history.ts). Without
 * compaction the history grows with every write until the database reaches its quota, and then
 * the store refuses every write.
 */
export interface HistoryReading {
  /** The member whose quota was asked (the first endpoint); the sizes are those of the member that answered. */
  readonly endpoint: string;
  /** The store's current revision: one per write since it was made. */
  readonly revision: number;
  /** Whether any revision was ever compacted away (revision 1 no longer readable). */
  readonly compacted: boolean;
  /** The database file's size, which the quota bounds, bytes. */
  readonly dbSizeBytes: number;
  /** What of it is in use; the rest a defragmentation gives back. Absent when the member does not say. */
  readonly dbSizeInUseBytes?: number;
  /** The member's quota (etcd's --quota-backend-bytes), bytes; absent when it could not be read. */
  readonly quotaBytes?: number;
  /** Raised alarms, e.g. `NOSPACE on member 8e9e05c52164694d`. */
  readonly alarms: readonly string[];
  /** A NOSPACE alarm is raised: the store refuses every write until an operator disarms it. */
  readonly noSpace: boolean;
}

/** Reads the history's state, at most once per its interval (an older reading is answered until then). */
export interface StoreHistory {
  read(): Promise<HistoryReading>;
}
