/**
 * The store interface every backend implements (SQLite now, etcd next). It is asynchronous and
 * optimistic: a caller reads a pool with its revision, decides, and commits a list of operations
 * that applies only if the pool is still at that revision. The engine never holds a lock in the
 * store, so a distributed backend can implement the same contract with compare-and-swap.
 *
 * Guarantees every implementation keeps (checked by test/store/conformance.ts):
 * - a commit applies all of its operations or none;
 * - a commit against a stale revision returns `conflict` and changes nothing;
 * - an address is held by at most one allocation per pool;
 * - releasing an address that is not allocated is a no-op.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';

/** Opaque, strictly increasing per pool; 0 for a pool never written. */
export type Revision = number;

export interface RestingAddress {
  readonly address: string;
  /** Milliseconds since the epoch. */
  readonly reusableAt: number;
}

export interface PoolSnapshot {
  readonly kind: 'snapshot';
  readonly pool: string;
  readonly revision: Revision;
  readonly cursor?: string;
  readonly allocations: readonly string[];
  readonly resting: readonly RestingAddress[];
}

export type PoolRead = PoolSnapshot | { readonly kind: 'unchanged'; readonly revision: Revision };

/** Facts about a pool kept for operators (utilisation), refreshed at each ADD. */
export interface PoolDescription {
  readonly subnet: string;
  readonly first: string;
  readonly last: string;
  readonly capacity: string;
  readonly cooldownSeconds: number;
}

export type PoolOp =
  | { readonly op: 'allocate'; readonly allocation: Allocation }
  | { readonly op: 'release'; readonly address: string; readonly reusableAt?: number }
  | { readonly op: 'unrest'; readonly address: string }
  | { readonly op: 'cursor'; readonly address: string }
  | { readonly op: 'describe'; readonly description: PoolDescription };

export type CommitResult =
  | { readonly kind: 'committed'; readonly revision: Revision }
  | { readonly kind: 'conflict'; readonly reason: string };

export interface PoolSummary {
  readonly pool: string;
  readonly revision: Revision;
  readonly allocated: number;
  readonly resting: number;
  readonly description?: PoolDescription;
}

export interface AllocationFilter {
  readonly pool?: string;
  readonly network?: string;
  readonly containerID?: string;
  readonly ifname?: string;
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  readonly node?: string;
  readonly address?: string;
}

export interface Store {
  /** A human-readable name of the backend and where it keeps data. */
  readonly description: string;
  /**
   * Reads a pool. When `knownRevision` equals the current revision, answers `unchanged` without
   * the contents, so a cached picture is revalidated cheaply.
   */
  readPool(pool: string, knownRevision?: Revision): Promise<PoolRead>;
  /** Applies `ops` atomically if the pool is still at `expected`; otherwise `conflict`. */
  commit(pool: string, expected: Revision, ops: readonly PoolOp[]): Promise<CommitResult>;
  /** Allocations of one owner; ifname undefined matches every interface. */
  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]>;
  list(filter?: AllocationFilter): Promise<Allocation[]>;
  pools(): Promise<PoolSummary[]>;
  /** Throws when the store cannot take writes. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
