/**
 * A `claim` commit on the two-tier store (tiered/store.ts): the block claimed in the cluster first
 * (its range pinned there once), then recorded in the node's file. Guarantees: a stale local revision
 * costs no request; the first claim of a range checks that its admission still stands; a block
 * nobody holds is claimed only if its publication allows (tiered/claim-guard.ts); a claim of this
 * node whose local commit never happened (a crash in between) is this node's to use; a claim whose
 * local commit lost is given back, so no block stays claimed by a node that never uses it. Commits
 * to other ledgers the caller names (`precededBy`, CommitOptions) are made in the local commit's
 * transaction, before it: all or none. A claim of this node is published before its commit returns,
 * and no address of the block is handed out before (tiered/claim-announcements.ts).
 */
import { defined } from '../../core/defined.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { AdmissionGuard, CommitResult, LedgerCommit, LedgerOp, Revision, Store } from '../store.ts';
import type { TieredAdmissions } from './admissions.ts';
import type { TieredClaims } from './claims.ts';
import type { ClusterTier } from './cluster-tier.ts';
import type { RangePins } from './range-pins.ts';
import { recordFromKey } from './ranges.ts';
import type { ClaimKeeper } from './reclaim.ts';
import type { ClaimAnnouncements } from './claim-announcements.ts';
import { failpoint } from '../../core/failpoints.ts';

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

export async function commitClaim(
  p: ClaimCommitParts,
  key: string,
  expected: Revision,
  ops: readonly LedgerOp[],
  guard: AdmissionGuard | undefined,
  precededBy?: readonly LedgerCommit[],
): Promise<CommitResult> {
  const claimOp = ops.find((op) => op.op === 'claim');
  const node = claimOp?.op === 'claim' ? claimOp.node : p.node;
  const rangePool = rangePoolOfKey(key);
  // A claim costs the cluster a write: check the local revision first so a stale round costs none.
  if ((await p.local.readLedger(key)).revision !== expected) return conflict(`block ${key} changed`);
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
    // Ours already (a claim whose local commit never happened: a crash in between) is ours to use.
    const held = await p.tier.claimOf(key);
    // Claimed by nobody: the tier refused it for its range's admission (etcd), or, where blocks
    // grow, for a block overlapping it claimed first; admit again (a look-up when it stands).
    if (held === undefined)
      return conflict(
        `block ${key} was not claimed: another block holds some of it, or its range is not admitted`,
        true,
      );
    if (held.node !== node) return conflict(`block ${key} is claimed by node ${held.node}`);
    claim = held;
  }
  failpoint('claim-unrecorded');
  const made = claim;
  const record = async (): Promise<CommitResult> => {
    const result = await p.local.commit(key, expected, ops, undefined, precededBy && { precededBy });
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
