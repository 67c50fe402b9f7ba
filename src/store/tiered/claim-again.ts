/**
 * What `warren store accept` writes back after the cluster store lost its data, on either tier
 * (etcd-tier/tiered.ts, and the kubernetes store's wiring): this node claims again every block
 * its own SQLite file holds, each range's block sizes first (as this node split it, its smallest and
 * largest block, so another node splits it alike). The addresses are in the file, so nothing else
 * is written back; the claims go through the two-tier store's commit, so they are recorded and the
 * blocks published again.
 *
 * Guarantees: a block another node claimed meanwhile is never taken: it is reported as a conflict,
 * for the operator to resolve; a loan (another node's block lent here) is not claimed.
 */
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import type { ClusterTier } from './cluster-tier.ts';
import type { AcceptReport, CommitResult, Revision, Store } from '../store.ts';
import { spaceOfPool } from './ranges.ts';

export async function claimAgain(
  store: Pick<Store, 'commit'>,
  local: Store,
  tier: Pick<ClusterTier, 'pinRange'>,
  node: string,
): Promise<AcceptReport> {
  let addresses = 0;
  let blocks = 0;
  const conflicts: string[] = [];
  const pools = await local.ledgers();
  const ranges = new Map(pools.filter((p) => !isBlockKey(p.ledger)).map((p) => [p.ledger, p.description]));
  const pinned = new Set<string>();
  for (const p of pools) {
    if (!isBlockKey(p.ledger) || p.affinity !== node) continue;
    const rangePool = rangePoolOfKey(p.ledger);
    const d = ranges.get(rangePool);
    const blockPrefix = d?.blockPrefix;
    if (blockPrefix !== undefined && isLoanKey(p.ledger, blockPrefix)) continue; // a loan is no block of its own
    if (d !== undefined && blockPrefix !== undefined && !pinned.has(rangePool)) {
      // Its largest block size too: a range pinned again without it would read grown blocks as none.
      const { subnet, first, last, largestBlockPrefix } = d;
      const space = spaceOfPool(rangePool);
      await tier.pinRange({
        pool: rangePool,
        space,
        subnet,
        first,
        last,
        blockPrefix,
        ...defined({ largestBlockPrefix }),
      });
      pinned.add(rangePool);
    }
    const result = await claimAtLatest(store, local, p.ledger, p.revision, node);
    if (result.kind === 'not held') continue;
    if (result.kind === 'committed') {
      blocks += 1;
      addresses += p.allocated;
    } else conflicts.push(`block ${p.ledger} was not claimed again: ${result.reason}`);
  }
  return { addresses, blocks, conflicts };
}

/** How many times a block whose file record changed meanwhile is read again and claimed again. */
const LOCAL_ROUNDS = 5;

/**
 * Claims block `ledger` at the file's revision `revision`, read again while only the file moved
 * (the agent releasing or handing out an address in it meanwhile: found by the soak on etcd, where
 * that was reported as a CONFLICT and the block left unclaimed); a conflict at an unchanged
 * revision is the cluster's (another node's claim), answered as it is. A block the file no longer
 * holds for this node needs no claim.
 */
async function claimAtLatest(
  store: Pick<Store, 'commit'>,
  local: Store,
  ledger: string,
  revision: Revision,
  node: string,
): Promise<CommitResult | { readonly kind: 'conflict'; readonly reason: string } | { readonly kind: 'not held' }> {
  let at = revision;
  for (let round = 1; ; round++) {
    const result = await store.commit(ledger, at, [{ op: 'claim', node }]).catch((error: unknown) => ({
      kind: 'conflict' as const,
      reason: messageOf(error),
    }));
    if (result.kind === 'committed' || round >= LOCAL_ROUNDS) return result;
    const read = await local.readLedger(ledger);
    if (read.revision === at) return result; // the file did not move: the cluster said no
    if (read.kind === 'snapshot' && read.affinity !== node) return { kind: 'not held' };
    at = read.revision;
  }
}
