/**
 * A `claim` commit on the two-tier store (tiered/store.ts): the block claimed in the cluster first
 * (its range pinned there once), then recorded in the node's file. Guarantees: a stale local revision
 * costs no request; the first claim of a range checks that its admission still stands; a block
 * nobody holds is claimed only if its publication allows (tiered/claim-guard.ts); a claim of this
 * node that stands already is never used: its file does not record it (it is claiming the block), so
 * it is one a crash left, or a restore of the cluster's data brought back while the block may be
 * another node's now; it is given back and the commit is a conflict, claimed afresh at the next try
 * (tiered/stray-claims.ts); a claim whose local commit lost is given back, so no block stays claimed
 * by a node that never uses it. Commits
 * to other ledgers the caller names (`precededBy`, CommitOptions) are made in the local commit's
 * transaction, before it: all or none. A claim of this node is published before its commit returns,
 * and no address of the block is handed out before (tiered/claim-announcements.ts).
 */
import { defined } from '../../core/defined.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { AdmissionGuard, CommitResult, LedgerCommit, LedgerOp, Revision, Store } from '../store.ts';
import type { TieredAdmissions } from './admissions.ts';
import type { TieredClaims } from './claims.ts';
import type { BlockClaim, ClusterTier } from './cluster-tier.ts';
import type { RangePins } from './range-pins.ts';
import { recordFromKey } from './ranges.ts';
import type { ClaimKeeper } from './reclaim.ts';
import type { ClaimAnnouncements } from './claim-announcements.ts';
import { failpoint } from '../../core/failpoints.ts';
import { madeAnother } from './stray-claims.ts';

export interface ClaimCommitParts {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  readonly claims: TieredClaims;
  readonly keeper: ClaimKeeper;
  readonly admissions: TieredAdmissions;
  readonly ranges: RangePins;
  /** Marks block `key` changed, for the publisher. */
  readonly mark: (key: string) => void;
  /** Writes block `key`'s publication now, as the node's store holds it (TieredPublisher.publishBlock). */
  readonly publish: (key: string) => Promise<void>;
  readonly announcements: ClaimAnnouncements;
}

export function conflict(reason: string, admissionLost?: true): CommitResult {
  return { kind: 'conflict', reason, ...defined({ admissionLost }) };
}

/** The commit, `claiming` its block throughout (ClaimAnnouncements.committing: the claim keeper leaves it alone). */
export function commitClaim(
  p: ClaimCommitParts,
  key: string,
  expected: Revision,
  ops: readonly LedgerOp[],
  guard: AdmissionGuard | undefined,
  precededBy?: readonly LedgerCommit[],
): Promise<CommitResult> {
  return p.announcements.committing(key, () => claimThenRecord(p, key, expected, ops, guard, precededBy));
}

async function claimThenRecord(
  p: ClaimCommitParts,
  key: string,
  expected: Revision,
  ops: readonly LedgerOp[],
  guard: AdmissionGuard | undefined,
  precededBy: readonly LedgerCommit[] | undefined,
): Promise<CommitResult> {
  const claimOp = ops.find((op) => op.op === 'claim');
  const node = claimOp?.op === 'claim' ? claimOp.node : p.node;
  const rangePool = rangePoolOfKey(key);
  // A claim costs the cluster a write: check the local revision first so a stale round costs none.
  const file = await p.local.readLedger(key);
  if (file.revision !== expected) return conflict(`block ${key} changed`);
  await p.claims.load(rangePool);
  // A range in which this node holds a block cannot be retired (it holds something: the cluster's
  // spaces refuse): only the first claim in a range asks whether the admission still stands.
  const first = guard !== undefined && p.claims.of(rangePool).length === 0;
  const lost = first ? await p.admissions.check(guard) : undefined;
  if (lost !== undefined) return conflict(lost, true);
  const range = (await p.ranges.rangeOf(rangePool)) ?? (await p.tier.pinRange(recordFromKey(key)));
  const refused = await p.keeper.mayClaim(key, node);
  if (refused !== undefined) return conflict(refused);
  let claim = await p.tier.claim(range, key, node);
  if (claim === undefined) {
    const held = await p.tier.claimOf(key);
    // Claimed by nobody: the tier refused it for its range's admission (etcd), or, where blocks
    // grow, for a block overlapping it claimed first; admit again (a look-up when it stands).
    if (held === undefined)
      return conflict(
        `block ${key} was not claimed: another block holds some of it, or its range is not admitted`,
        true,
      );
    if (held.node !== node) return conflict(`block ${key} is claimed by node ${held.node}`);
    // Recorded in the file as this node's (claimed again after its claim vanished: claim-again.ts), it is
    // its own; not when the file made another claim record and holds nothing there (stray-claims.ts).
    const another = file.kind === 'snapshot' && file.allocations.length === 0 && madeAnother(p.local, key, held.uid);
    if (file.kind !== 'snapshot' || file.affinity !== node || another)
      return conflict(await unrecordedGivenBack(p, held));
    claim = held;
  }
  failpoint('claim-unrecorded');
  const made = claim;
  // The file keeps which claim record it made, in the same commit (stray-claims.ts).
  const recorded = ops.map((op) => (op.op === 'claim' && op.node === p.node ? { ...op, uid: made.uid } : op));
  const record = async (): Promise<CommitResult> => {
    const result = await p.local.commit(key, expected, recorded, undefined, precededBy && { precededBy });
    if (result.kind === 'conflict') {
      // Not recorded here: give the block back, or it would stay claimed by a node that never uses it.
      await p.tier.unclaim(made).catch(() => undefined);
      return result;
    }
    if (node === p.node) p.claims.record(made);
    p.mark(key);
    return result;
  };
  // This node's claim is published before any address of the block is handed out (claim-announcements.ts).
  return node === p.node ? p.announcements.announced(key, record, () => p.publish(key)) : record();
}

/**
 * Gives back `held`, this node's claim that its file never recorded (a crash's, or one a restore of the
 * cluster's data brought back while its block may be another node's now: tiered/stray-claims.ts); why it is not used.
 */
async function unrecordedGivenBack(p: ClaimCommitParts, held: BlockClaim): Promise<string> {
  const outcome = await p.tier.unclaim(held);
  return (
    `block ${held.key} was claimed for node ${held.node} already, by a claim its file never recorded (a crash, or ` +
    `a restore of ${p.tier.description}): ${outcome === 'released' ? 'given back' : `the claim ${outcome}`}, ` +
    'never used; claimed afresh at the next try'
  );
}
