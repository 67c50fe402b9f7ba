/**
 * The store interface every backend implements (SQLite, and the two-tier store on Kubernetes or
 * etcd). Its unit is the **ledger**: the allocations, rests and attributes kept under one key, read
 * with a revision and committed to atomically. (Not a pool: a pool is the user's word, a WarrenPool or
 * a range; one range is one ledger, or, split into blocks, one ledger per block: docs/glossary.md.)
 * It is asynchronous and optimistic: a caller reads a ledger with its revision, decides, and
 * commits a list of operations that applies only if the ledger is still at that revision. The engine
 * never holds a lock in the store. On the two-tier store each node commits its addresses to its own
 * SQLite file, and what the nodes share (tiered/cluster-tier.ts: block claims, range records,
 * admissions) is written in the cluster tier with preconditions: created only if absent, changed
 * only at the version read.
 *
 * Guarantees every implementation keeps (checked by test/store/conformance.ts):
 * - a commit applies all of its operations or none;
 * - a commit against a stale revision returns `conflict` and changes nothing;
 * - an address is held by at most one allocation per ledger;
 * - an owner (network, containerID, ifname) holds at most one address per range pool (a range's
 *   ledger and its blocks' count as one), so a retried ADD can never get a second address anywhere;
 * - releasing an address that is not allocated is a no-op;
 * - an allocation's network namespace changes only by a `relocate` commit naming its holder;
 * - an allocation and a rest read back as committed, their monotonic stamps (`createdStamp`,
 *   `reusableStamp`: what orders them, core/moment.ts) included, and records written without one
 *   (by older versions) read back without one;
 * - a ledger's attributes (its affinity, the node that claimed it for cluster blocks, and its
 *   cooldown) change only by commit;
 * - with `cluster.spaces` (a store several processes write): a commit guarded by a range's admission
 *   applies only while that admission stands, and admitting a range retires the overlapping ones
 *   it names only if they were not written since they were read.
 *
 * In cluster mode a range is split into blocks and each block is a ledger of its own here, keyed
 * `<range pool>#<block CIDR>` (the codec is ipam/store-key.ts); the store needs no other notion of
 * blocks than that key and `AllocationFilter.rangePool`.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type { ClusterHoldings } from './cluster-holdings.ts';
import type { BlockHandover, ClusterRecords, FileCheckStatus, LegacyLeft, StoreHistory } from './cluster.ts';
import type { Succession } from './succession.ts';
import type { Membership } from './membership.ts';
import type {
  CommitOptions,
  CommitResult,
  LedgerCommit,
  LedgerOp,
  LedgerRead,
  LedgerSummary,
  Revision,
} from './ledger.ts';

// A ledger's reading and commit shapes (ledger.ts), named from here as every store's.
export type {
  CommitOptions,
  CommitResult,
  LedgerCommit,
  LedgerDescription,
  LedgerOp,
  LedgerRead,
  LedgerSnapshot,
  LedgerSummary,
  RestingAddress,
  Revision,
} from './ledger.ts';

export type { AcceptReport, AliveQuestion, AnnounceInfo, Membership, NodeRecord } from './membership.ts';

/**
 * What the store holds for one address space (a network_name and family), read at one revision:
 * the ranges admitted in it, and what every range pool of the store holds.
 */
export interface SpaceReading {
  readonly space: string;
  /** The store revision the reading was taken at. */
  readonly revision: Revision;
  /** Range pools whose admission record in this space exists. */
  readonly admitted: readonly string[];
  /**
   * Addresses (allocated and resting) held per range pool, its blocks counted with it; every range
   * pool of the store, since which of them belong to the space is the caller's to judge.
   */
  readonly held: ReadonlyMap<string, number>;
}

/** A range's admission into its address space; a commit guarded by it applies only while it stands. */
export interface AdmissionGuard {
  readonly space: string;
  readonly rangePool: string;
}

/**
 * Admission of ranges into their address space, for stores shared by several processes, where an
 * admission cached by one process must not outlive another process admitting an overlapping range.
 * Ranges admitted in one space at one time never overlap each other: admitting a range retires the
 * ranges it names, atomically. (This version's allocator names none: it carves a range around the
 * pools admitted before it, allocator/range-cover.ts; agents of earlier versions retired empty ones.)
 */
export interface AddressSpaces {
  read(space: string): Promise<SpaceReading>;
  /**
   * Records `rangePool` as admitted in the reading's space and retires `retire` (other range pools
   * of the space), provided no admission of the space changed and no ledger of `retire` (or block of
   * one) was written since the reading. Undefined when something did: read again and decide again.
   */
  admit(reading: SpaceReading, rangePool: string, retire: readonly string[]): Promise<AdmissionGuard | undefined>;
}

export interface AllocationFilter {
  /** Exactly this ledger (a range pool, or one block). */
  readonly ledger?: string | undefined;
  /** This range's ledger and every block of it: everything a range holds, split into blocks or not. */
  readonly rangePool?: string | undefined;
  readonly network?: string | undefined;
  readonly containerID?: string | undefined;
  readonly ifname?: string | undefined;
  readonly podNamespace?: string | undefined;
  readonly podName?: string | undefined;
  readonly podUID?: string | undefined;
  readonly node?: string | undefined;
  readonly address?: string | undefined;
}

/** Where a page of `Store.listPage` ended: the last allocation's ledger and address (the pages' order). */
export interface ListCursor {
  readonly ledger: string;
  readonly address: string;
}

/** One page of `Store.listPage`; `next` is present when there may be more. */
export interface ListPage {
  readonly items: Allocation[];
  readonly next?: ListCursor;
}

export type { HistoryReading, StoreHistory } from './cluster.ts';

/**
 * What the two-tier store (tiered/store.ts: block owners apart from addresses) offers block placement, node
 * forget and status, so none reads more than it needs: there `ledgers(<block prefix>)` answers this node's blocks only.
 */
export interface BlockOwners {
  /**
   * Every block of the range someone holds, as summaries with the holder as `affinity` (all pages read), plus the
   * blocks this node's store knows; `counts`: with the holders' published counts, else this node's only.
   */
  rangeBlocks(rangePool: string, options: { readonly counts: boolean }): Promise<LedgerSummary[]>;
  /**
   * The blocks of the range this node knows without reading other nodes' claims (its own, its
   * store's, those it lost or may not claim), as `rangeBlocks` would show them: where a claim is
   * placed by probing (allocator/range-placer.ts). Undefined for a range whose claims are one page
   * (`rangeBlocks` reads it in one request) or never split.
   */
  knownBlocks(rangePool: string): Promise<LedgerSummary[] | undefined>;
  /**
   * Whether the range is marked fully claimed (ClusterTier.fullyClaimed: one request), so placement
   * borrows without reading every claim; absent where the cluster keeps no such mark.
   */
  fullyClaimed?(rangePool: string): Promise<boolean>;
  /**
   * Marks the range fully claimed or takes the mark off (ClusterTier.markFullyClaimed); with
   * `fullyClaimed`. False when the range keeps no mark (its claims are one page: read as cheaply).
   */
  markFullyClaimed?(rangePool: string, full: boolean): Promise<boolean>;
  /** Every node holding a block of any range (tier.claimHolders): read when Nodes are relisted. */
  holders(): Promise<string[]>;
  /** Gives back every block `node` holds (a node gone for good) and drops what it lent: the keys freed. */
  forgetNode(node: string): Promise<string[]>;
  /**
   * Gives back, unused, this node's claims its store lacks (a crash before the local commit, a restore
   * of the cluster's data), once per start: the comparison of the node's file with the cluster's
   * (tiered/file-check.ts).
   */
  settleClaims(): Promise<void>;
}

/**
 * What a store shared by the nodes of a cluster offers beyond its ledgers (`Store.cluster`): present
 * exactly when the store is shared, so a consumer asks once, and never reaches past it to a tier.
 */
export interface StoreCluster {
  /** Agents' liveness and one-off chores. */
  readonly membership: Membership;
  /**
   * Admission of ranges into their address space: several processes write the store, each admitting
   * ranges on its own (a store one process writes alone, SQLite, has no `cluster`: its caller admits in process).
   */
  readonly spaces: AddressSpaces;
  /** Who holds which block: placement, node forget, status. */
  readonly owners: BlockOwners;
  /**
   * The cluster's shared records: a block's claim, the blocks as published (exhaustion, pools' status,
   * listings) and the address requests by which a node with no room asks the owners (allocator/lending/).
   */
  readonly records: ClusterRecords;
  /** This node's file held against what it published (tiered/file-check.ts), for `warren status`. */
  fileCheck(): Promise<FileCheckStatus>;
  /**
   * Tells `listener` when the file check wrote records back from what this node published (its file
   * put back or lost): records no source has looked at, whose containers may be gone already. The
   * function returned stops telling.
   */
  whenRestored?(listener: () => void): () => void;
  /**
   * Addresses held for holders other than one pod (cluster-holdings.ts). Absent on etcd, which
   * keeps none yet: StatefulSet ordinals and IPAMClaims need the Kubernetes store.
   */
  readonly holdings?: ClusterHoldings;
  /** Blocks handed over between nodes (allocator/lending/handover.ts). Absent where the tier cannot move a claim. */
  readonly handover?: BlockHandover;
  /** The history of writes that must be compacted, for `warren doctor`: etcd only (Kubernetes compacts its own). */
  readonly history?: StoreHistory;
  /** What is left of etcd's old one-tier layout (etcd-tier/legacy-import.ts), for `warren doctor`: etcd only. */
  legacyLeft?(): Promise<LegacyLeft>;
}

export interface Store {
  /** A human-readable name of the backend and where it keeps data. */
  readonly description: string;
  /**
   * The node file's lineage (SQLite: sqlite/schema.ts `lineageOf`): kept by a copy of the file, new
   * in a new file. Absent where a store has no file of its own.
   */
  readonly lineage?: string;
  /** The file's place among its node's file's histories (tiered/lineage.ts); absent as `lineage` is. */
  readonly succession?: Succession;
  /** Records the file's new succession (tiered/file-check.ts, once it took another history over). */
  succeed?(succession: Succession): void;
  /**
   * The identity (uid) of the cluster's claim of block `ledger` the file recorded making (a `claim`
   * op's `uid`, or `recordClaim`); undefined when it recorded none. Absent where a store has no file.
   */
  recordedClaim?(ledger: string): string | undefined;
  /** Records that the file's claim of block `ledger` is now the record `uid` (claimed again: tiered/reclaim.ts). */
  recordClaim?(ledger: string, uid: string): void;
  /**
   * Reads a ledger. When `knownRevision` equals the current revision, answers `unchanged` without
   * the contents, so a cached picture is revalidated cheaply.
   */
  readLedger(ledger: string, knownRevision?: Revision): Promise<LedgerRead>;
  /**
   * Applies `ops` atomically if the ledger is still at `expected` (and, with a `guard`, its range is
   * still admitted in its address space); otherwise `conflict`. Only stores with `cluster.spaces` give
   * guards, and only they look at one.
   */
  commit(
    ledger: string,
    expected: Revision,
    ops: readonly LedgerOp[],
    guard?: AdmissionGuard,
    options?: CommitOptions,
  ): Promise<CommitResult>;
  /**
   * Applies `commits` in one transaction, in order, every ledger at its expected revision, or none
   * (`conflict`); no cluster check (a handover's loans moved into a block: tiered/handover.ts).
   */
  commitAll?(commits: readonly LedgerCommit[]): Promise<CommitResult>;
  /** Allocations of one owner; ifname undefined matches every interface. */
  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]>;
  list(filter?: AllocationFilter): Promise<Allocation[]>;
  /**
   * One page of what `list` answers, ordered by ledger then address, starting after `after`: reads
   * at most `limit` allocations (and one more, to know whether there is more), never the rest.
   * Present where the store can page so (SQLite); a caller without it lists.
   */
  listPage?(filter: AllocationFilter, page: { readonly limit: number; readonly after?: ListCursor }): Promise<ListPage>;
  /** Ledgers whose key starts with `prefix` (every ledger without one). */
  ledgers(prefix?: string): Promise<LedgerSummary[]>;
  /** Present when the store is shared by the nodes of a cluster (the two-tier store). */
  readonly cluster?: StoreCluster;
  /** Throws when the store cannot take writes. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The stores an agent runs on: one node's SQLite file, or ranges shared by the nodes of a cluster
 * (the two-tier store, tiered/store.ts: each node's SQLite file beside a cluster tier on the
 * Kubernetes API or on etcd).
 */
export type StoreKind = 'sqlite' | 'etcd' | 'kubernetes';

/** An etcd client URL Warren accepts: `http://host:port` or `https://host:port`, nothing after. */
export function isEtcdEndpoint(url: string): boolean {
  return /^https?:\/\/[^/]+$/.test(url);
}
