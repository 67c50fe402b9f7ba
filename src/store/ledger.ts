/**
 * A ledger as a store reads and commits it (store.ts, whose header states what every store
 * guarantees of them): a reading with its revision, the operations a commit applies, what a commit
 * answers, and a ledger's summary in listings. Shapes only; store.ts re-exports them.
 */
import type { BootStamp } from '../core/moment.ts';
import type { Allocation } from '../ipam/allocation.ts';

/** Opaque, strictly increasing per ledger; 0 for a ledger never written. */
export type Revision = number;

export interface RestingAddress {
  readonly address: string;
  /** Milliseconds since the epoch, on the releaser's wall clock: for people, and the last resort. */
  readonly reusableAt: number;
  /**
   * The same instant on the releasing boot's monotonic clock: what times the rest within that boot
   * (allocator/ledger-cache.ts). Absent in rests recorded by older Warrens.
   */
  readonly reusableStamp?: BootStamp;
}

export interface LedgerSnapshot {
  readonly kind: 'snapshot';
  readonly ledger: string;
  readonly revision: Revision;
  readonly cursor?: string;
  /** The node that claimed this ledger (a block), if any. */
  readonly affinity?: string;
  /**
   * Seconds an address released here rests when the releaser has no config of its own to say
   * (journal, runtime events), as last set by a `cooldown` op; absent when never set.
   */
  readonly cooldownSeconds?: number;
  readonly allocations: readonly string[];
  readonly resting: readonly RestingAddress[];
}

export type LedgerRead = LedgerSnapshot | { readonly kind: 'unchanged'; readonly revision: Revision };

/**
 * Facts about a ledger kept for operators (utilisation), written when the range or block is first
 * used and when its config changes. Read by operators' listings only: the cooldown a release applies
 * is the ledger's `cooldownSeconds` attribute, not this copy.
 */
export interface LedgerDescription {
  readonly subnet: string;
  readonly first: string;
  readonly last: string;
  readonly capacity: string;
  readonly cooldownSeconds: number;
  /** For a range split into blocks: the block prefix length, fixed at first use. */
  readonly blockPrefix?: number;
  /** For a range whose blocks grow: the prefix length of the largest block, fixed with `blockPrefix`. */
  readonly largestBlockPrefix?: number;
}

export type LedgerOp =
  | { readonly op: 'allocate'; readonly allocation: Allocation }
  | {
      readonly op: 'release';
      readonly address: string;
      readonly reusableAt?: number;
      readonly reusableStamp?: BootStamp;
    }
  /**
   * Records where the holder of `allocation.address` lives now: `allocation` is the record as held,
   * with its new network namespace (`netns`). The owner (network, containerID, ifname) must be the
   * one holding the address in this ledger, or the commit is a conflict.
   * A re-ADD of an attachment in a new namespace (a container restarted without a DEL) uses it.
   */
  | { readonly op: 'relocate'; readonly allocation: Allocation }
  | { readonly op: 'unrest'; readonly address: string }
  | { readonly op: 'cursor'; readonly address: string }
  | { readonly op: 'describe'; readonly description: LedgerDescription }
  /** Sets the ledger's `cooldownSeconds` attribute. */
  | { readonly op: 'cooldown'; readonly seconds: number }
  /**
   * Sets the ledger's affinity to `node` (claiming a block), with the identity of the cluster's claim
   * record this file made (its uid: tiered/stray-claims.ts tells it from a claim made since by it).
   */
  | { readonly op: 'claim'; readonly node: string; readonly uid?: string }
  /** Clears the ledger's affinity (giving a block back). */
  | { readonly op: 'unclaim' }
  /**
   * Moves the ledger's revision after this commit past `revision` (to `revision` + 1 when it would be
   * at or below it). The file check merges a publication newer than a file put back from an older
   * copy with it (tiered/file-check.ts): the file's revisions of the block then never repeat one that
   * publication (or an older copy of the cluster's data) carries, so a later comparison cannot take
   * the file for the older of the two.
   */
  | { readonly op: 'revisionPast'; readonly revision: Revision };

export type CommitResult =
  | {
      readonly kind: 'committed';
      readonly revision: Revision;
      /**
       * Present only when the commit asked `durableLater` and the store makes it durable after
       * answering: resolves once the commit survives power loss, rejects (IO_FAILURE) when it could
       * not be made so. Absent: the commit was durable when it was answered.
       */
      readonly durable?: Promise<void>;
    }
  /**
   * `admissionLost`: the commit's guard no longer holds (another range of its address space was
   * admitted since), so admit the range again before the next round instead of only re-reading.
   */
  | { readonly kind: 'conflict'; readonly reason: string; readonly admissionLost?: true };

/** One ledger's part of a commit to several (Store.commitAll). */
export type LedgerCommit = { readonly ledger: string; readonly expected: Revision; readonly ops: readonly LedgerOp[] };
/** How a commit is made and answered. */
export interface CommitOptions {
  /**
   * Answer as soon as the commit is applied (every later read sees it), before it is durable: a
   * store that can then makes it durable together with the commits around it (one disk sync for
   * several) and says so in `CommitResult.durable`. The caller tells nobody outside the process
   * of the commit before that resolves. A store, or a store wrapper, that ignores this answers
   * durable commits, as without it.
   */
  readonly durableLater?: boolean;
  /**
   * Commits to other ledgers applied first, in the same transaction: those and this one each at its
   * expected revision, or none (`conflict`). Given only to a store that offers `commitAll`, which
   * honours it; a claim in `ops` on a store shared by nodes is still made in the cluster first (a
   * block claimed with what a loan ledger of this node held: allocator/lending/migrated.ts).
   */
  readonly precededBy?: readonly LedgerCommit[];
}

export interface LedgerSummary {
  readonly ledger: string;
  readonly revision: Revision;
  readonly allocated: number;
  readonly resting: number;
  readonly description?: LedgerDescription;
  readonly affinity?: string;
}
