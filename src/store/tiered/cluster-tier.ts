/**
 * The cluster tier of a two-tier store (tiered/store.ts): what the nodes of a cluster share when
 * each node keeps its own addresses. The cluster holds who owns which block, which block size each
 * range was split into, which ranges are admitted in each address space, which agents are alive,
 * the addresses each block holds (published by its owner, in batches, for everyone to read), and the
 * requests by which a node with no room asks the owners for addresses. The node holds the addresses
 * themselves, in its SQLite database: the common ADD and DEL never reach the cluster.
 *
 * Implementations: the Kubernetes API (store/kubernetes/, custom resources of group `warren.dev`
 * and coordination.k8s.io Leases), etcd v3 (store/etcd-tier/) and,
 * for unit tests, memory (test/store/tiered/memory-tier.ts).
 *
 * Guarantees every implementation keeps (checked by test/store/tiered/tier-conformance.ts):
 * - a block is claimed by at most one node: `claim` creates the block's record under a name derived
 *   from the block, so of two claims of one block exactly one succeeds; in a range whose blocks grow
 *   (RangeRecord.largestBlockPrefix) no two claims overlap either: of two claims of blocks sharing
 *   an address (one holds the other), the later one is refused, each tier in its terms, with a cost
 *   bounded by the range's block sizes, not by its blocks;
 * - `unclaim` removes a claim only if it is still exactly the one named (uid and resourceVersion):
 *   a block given back and claimed again by another node in between is never removed (ABA); so
 *   does `moveClaim` rewrite one (a handover), and a claim it moved keeps its uid;
 * - a range's record is created once; its block size never changes after;
 * - no listing reads more than `limit` records in one response: listings page;
 * - what `claimsOf(node)` reads grows with that node's blocks, not with the range;
 * - a block's publication is a record apart from its claim: it is removed with the claim when the
 *   claim is given back (`unclaim`), and stays when the claim is removed by someone else, so that
 *   `publicationOf` tells a claimer the block may still be in use;
 * - a watch (`watchClaims`, `watchSpaces`, `watchPublications`) shows the cluster as of the version it names: every
 *   change up to it is in, and none is missed across a cut (resumed from that version); it lists
 *   only when opened and when its version is older than the cluster keeps, never on a timer.
 *
 * The records the allocator and the agent read and write directly (a block's claim, the published
 * view, address requests: `ClusterRecords`) are declared by the store's contract (store/cluster.ts),
 * which this extends; an older layout a tier moves from is that tier's own (etcd-tier/legacy-import.ts).
 */
import type { ClusterHoldings } from '../cluster-holdings.ts';
import type { BlockClaim, ClaimState, ClusterRecords, Page, PublishedBlock } from '../cluster.ts';
import type { AddressSpaces, Membership } from '../store.ts';

// The records the allocator and the agent use are the store's contract (store/cluster.ts); named here too.
export type {
  AddressRequest,
  BlockClaim,
  BlockCounts,
  ClaimState,
  Grant,
  Page,
  PublishedBlock,
} from '../cluster.ts';

/** A range as first used in the cluster: its block size is fixed by the first node that used it. */
export interface RangeRecord {
  /** The range pool key (ipam/pool-key.ts). */
  readonly pool: string;
  /** Its address space (network_name and family, allocator/admission.ts). */
  readonly space: string;
  readonly subnet: string;
  readonly first: string;
  readonly last: string;
  readonly blockPrefix: number;
  /**
   * The largest block of the range (ipam/range.ts growthBlockPrefix), where its blocks grow: blocks
   * are then aligned CIDRs of any prefix from this one to `blockPrefix`. Absent: one size. Fixed
   * with `blockPrefix` by the first node that used the range.
   */
  readonly largestBlockPrefix?: number;
}

export type UnclaimResult = 'released' | 'changed' | 'gone';

/**
 * A watch of what the cluster holds, kept in step by the tier (`watchClaims`, `watchSpaces`): what
 * it shows now, and a call after each change it applies. `seen` answers undefined while no watch
 * is open and synced (the cluster away, a relisting in flight): the reader then asks the cluster.
 */
export interface ClusterWatch<S> {
  seen(): S | undefined;
  /** Calls `listener` after each change applied; the function returned stops it. */
  onChange(listener: () => void): () => void;
  close(): void;
}

/** This node's claims as a watch shows them: every change up to cluster version `version` is in. */
export interface ClaimsSeen {
  readonly claims: readonly BlockClaim[];
  readonly version: number;
}

/**
 * A watch of one node's block publications (`watchPublications`): told the block key of each that
 * vanished (deleted by someone else, replaced by another node's), listed again after a cut so that
 * none deleted meanwhile is missed. Its owner's own give-back is told too (the reader judges it).
 */
export interface PublicationsWatch {
  /** Calls `listener` with the block key of each publication gone; the function returned stops it. */
  onGone(listener: (key: string) => void): () => void;
  close(): void;
}

/** The admissions of each address space as a watch shows them. */
export interface SpacesSeen {
  /** The ranges admitted in `space` and the version of its record ([] and 0 when it has none). */
  admitted(space: string): { readonly ranges: readonly string[]; readonly version: number };
}

export interface ClusterTier extends ClusterRecords {
  /** Creates the range's record at first use, or answers the one already there (its block size wins). */
  pinRange(record: RangeRecord): Promise<RangeRecord>;
  /**
   * Claims block `key` of `range` for `node`: undefined when another claim of it exists, or when a
   * tier that can tell in the claim's own transaction (etcd) finds the range no longer admitted in
   * its address space (the two-tier store then answers `admissionLost`).
   */
  claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined>;
  /** Every claim of `node` (in range `pool` only, when given). */
  claimsOf(node: string, pool?: string): Promise<BlockClaim[]>;
  /**
   * A watch of `node`'s claims (what it reads grows with that node's blocks), resumed from the
   * version reached, so that nothing is listed on a timer to learn that one vanished. On etcd a
   * watch of the node's index and one of each claim key it names (etcd-tier/tier-watches.ts: the
   * index alone misses a claim key deleted by hand; every claim would send every node's claims to
   * every node). Absent where a tier cannot watch: its claims are then listed each check.
   */
  watchClaims?(node: string): ClusterWatch<ClaimsSeen>;
  /**
   * A watch of `node`'s block publications (what it reads grows with that node's blocks), so that
   * one deleted by hand is written again at the owner's next publication run (tiered/publisher.ts
   * `vanished`): with no request per ADD and none while idle. On etcd a watch of each publication key
   * of the blocks the node's index names (etcd-tier/tier-watches.ts). Absent where a tier cannot
   * watch: a publication deleted is written again only with its block's next write.
   */
  watchPublications?(node: string): PublicationsWatch;
  /**
   * A watch of every address space's admissions (a handful of records, changed only when a range
   * is admitted). Absent where a tier cannot watch: its spaces are then read each check.
   */
  watchSpaces?(): ClusterWatch<SpacesSeen>;
  /**
   * Every node holding at least one claim, in any range, read page by page: for finding the nodes
   * a relisting of Kubernetes' Nodes no longer shows (a Node deleted while every agent was down).
   */
  claimHolders(): Promise<string[]>;
  /** One page of the claims of range `pool`, for placement when a node needs a new block. */
  claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>>;
  /**
   * Removes the claim if it is still exactly `claim` (see the guarantees); a claim removed takes off
   * its range's fully-claimed mark (`markFullyClaimed`), where the tier keeps one.
   */
  unclaim(claim: BlockClaim): Promise<UnclaimResult>;
  /**
   * A handover's step (tiered/handover.ts): rewrites the claim as `state` (its node, `offeredTo`,
   * `takenFrom`) if it is still exactly `claim` (uid and version), keeping its uid; the claim as
   * written, or undefined when it changed or is gone. Absent where a tier cannot move a claim in
   * one guarded write: its blocks are never handed over.
   */
  moveClaim?(claim: BlockClaim, state: ClaimState): Promise<BlockClaim | undefined>;
  /**
   * Whether range `pool` is marked fully claimed (a node found no block free, and none was given back
   * since), read in one request: what placement asks before it reads the range's claims. A hint: a
   * mark too old to believe reads as false. Absent on etcd, whose claims are read page by page.
   */
  fullyClaimed?(pool: string): Promise<boolean>;
  /** Marks range `pool` fully claimed (`full`) or takes the mark off. Present with `fullyClaimed`. */
  markFullyClaimed?(pool: string, full: boolean): Promise<void>;
  /** Publishes a block's allocations (replacing what was published before). Owner only. */
  publish(block: PublishedBlock): Promise<void>;
  /**
   * Publishes a loan ledger of `block.node` (`block.loan`), replacing what any node published under
   * its key before (the address's last borrower). Absent on etcd, which publishes no loans (yet).
   */
  publishLoan?(block: PublishedBlock): Promise<void>;
  /**
   * The publication of block `key`, whoever's it is: what a claimer reads before it claims a block
   * nobody holds (a claim that vanished leaves its publication: tiered/claim-guard.ts).
   */
  publicationOf(key: string): Promise<PublishedBlock | undefined>;
  /**
   * Removes the publication of `key`, a loan ledger's or a block's, if it still names `node`, as
   * read (never another node's, nor one written since): a loan given back, a node forgotten (its
   * blocks' publications too, once their claims are given up, or gone by someone else's hand).
   */
  withdraw(key: string, node: string): Promise<void>;
  /** Agents' liveness and one-off chores (Leases on Kubernetes). */
  readonly membership: Membership;
  /** Admission of ranges into their address space, across nodes. */
  readonly spaces: AddressSpaces;
  /**
   * Addresses held for holders other than one pod (cluster-holdings.ts): StatefulSet ordinals,
   * IPAMClaims. Absent on a tier that cannot keep them (etcd, for now).
   */
  readonly holdings?: ClusterHoldings;
  /**
   * Throws when the cluster cannot be reached. Where a watch of this tier is open and synced, that
   * is the answer (the cluster answered it) and nothing is sent.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}
