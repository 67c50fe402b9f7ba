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
 *   from the block, so of two claims of one block exactly one succeeds;
 * - `unclaim` removes a claim only if it is still exactly the one named (uid and resourceVersion):
 *   a block given back and claimed again by another node in between is never removed (ABA);
 * - a range's record is created once; its block size never changes after;
 * - no listing reads more than `limit` records in one response: listings page;
 * - what `claimsOf(node)` reads grows with that node's blocks, not with the range;
 * - a block's publication is a record apart from its claim: it is removed with the claim when the
 *   claim is given back (`unclaim`), and stays when the claim is removed by someone else, so that
 *   `publicationOf` tells a claimer the block may still be in use.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import type { ClusterHoldings } from './cluster-holdings.ts';
import type { AddressSpaces, Membership } from '../store.ts';

/** A block held by a node, as the cluster records it. */
export interface BlockClaim {
  /** The block's store key, `<range pool>#<block CIDR>` (ipam/blocks.ts). */
  readonly key: string;
  readonly node: string;
  /** Identity of the record: a block given back and claimed again is another record. */
  readonly uid: string;
  /** The record's version; `unclaim` removes it only at this version. */
  readonly version: string;
}

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
   * A borrower's loan pool (one address another node lent `node`: allocator/lending/), published so
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

/** Old blocks left per node (the node their document names), and old range documents. */
export interface LegacyLeft {
  readonly blocks: Readonly<Record<string, number>>;
  readonly ranges: number;
}

export type UnclaimResult = 'released' | 'changed' | 'gone';

export interface ClusterTier {
  readonly description: string;
  /** Creates the range's record at first use, or answers the one already there (its block size wins). */
  pinRange(record: RangeRecord): Promise<RangeRecord>;
  /**
   * Claims block `key` of `range` for `node`: undefined when another claim of it exists, or when a
   * tier that can tell in the claim's own transaction (etcd) finds the range no longer admitted in
   * its address space (the two-tier store then answers `admissionLost`).
   */
  claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined>;
  /** The claim of one block, if any. */
  claimOf(key: string): Promise<BlockClaim | undefined>;
  /** Every claim of `node` (in range `pool` only, when given). */
  claimsOf(node: string, pool?: string): Promise<BlockClaim[]>;
  /**
   * Every node holding at least one claim, in any range, read page by page: for finding the nodes
   * a relisting of Kubernetes' Nodes no longer shows (a Node deleted while every agent was down).
   */
  claimHolders(): Promise<string[]>;
  /** One page of the claims of range `pool`, for placement when a node needs a new block. */
  claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>>;
  /** Removes the claim if it is still exactly `claim` (see the guarantees). */
  unclaim(claim: BlockClaim): Promise<UnclaimResult>;
  /** Publishes a block's allocations (replacing what was published before). Owner only. */
  publish(block: PublishedBlock): Promise<void>;
  /**
   * Publishes a loan pool of `block.node` (`block.loan`), replacing what any node published under
   * its key before (the address's last borrower). Absent on a tier that publishes no loans.
   */
  publishLoan?(block: PublishedBlock): Promise<void>;
  /**
   * The publication of block `key`, whoever's it is: what a claimer reads before it claims a block
   * nobody holds (a claim that vanished leaves its publication: tiered/claim-guard.ts).
   */
  publicationOf(key: string): Promise<PublishedBlock | undefined>;
  /** Removes the publication of loan pool `key` if it is still `node`'s (a loan given back, a node forgotten). */
  withdrawLoan?(key: string, node: string): Promise<void>;
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
   * Tells `listener` of address requests created or changed, soon after (a watch), until the
   * function returned is called (or the tier closes). A hint only: it may come late, twice, or not
   * at all (a watch reconnecting); a lender answers on it and a borrower looks at its request on it
   * at once, while the periodic readings stay what correctness rests on. Absent: timers alone.
   */
  watchRequests?(listener: (request: AddressRequest) => void): () => void;
  /**
   * Removes what else the tier keeps of a node gone for good, beyond its claims (etcd: its
   * documents of the old one-tier layout); called by node forget before the claims are freed.
   */
  forgetNode?(node: string): Promise<void>;
  /** What is left of an older layout the tier moves from (etcd's one-tier store), for `warren doctor`. */
  legacyLeft?(): Promise<LegacyLeft>;
  /** Agents' liveness and one-off chores (Leases on Kubernetes). */
  readonly membership: Membership;
  /** Admission of ranges into their address space, across nodes. */
  readonly spaces: AddressSpaces;
  /**
   * Addresses held for holders other than one pod (cluster-holdings.ts): StatefulSet ordinals,
   * IPAMClaims. Absent on a tier that cannot keep them (etcd, for now).
   */
  readonly holdings?: ClusterHoldings;
  /** Throws when the cluster cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
