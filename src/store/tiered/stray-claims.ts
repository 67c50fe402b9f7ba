/**
 * A claim naming this node that this node never made: the cluster says the block is this node's,
 * its file does not record claiming it, and another node published the block in use. Every claim
 * this node makes passes the claimer's guard first (tiered/claim-guard.ts: never a block another
 * node published in use, nor one of a live node), so such a claim was written by someone else: an
 * object edited by hand (a WarrenBlock's `spec.node`, an etcd claim key's value), or re-created by
 * hand under the wrong name. Using it would hand out addresses the other node's containers hold
 * (found by the soak, issue 38), so it is never used (tiered/ranges.ts lists it as nobody's to hand
 * out from) and is given back, so its owner can claim it again.
 *
 * A claim of this node resurrected by a restore of the cluster's data is one too: the file gave the
 * block up after this node's last publication of it (the file's revision of the block is past the
 * one published), and the cluster went back to before that; the block may be another node's
 * now, its claim lost with the restore (found by the soak, etcd seed 3943: this node used such a
 * claim and handed out an address another node's live container held). It is given back unused.
 *
 * Guarantees: only a claim of exactly this record (uid, version) is removed, never one written since
 * (ClusterTier.unclaim); a claim the guard allows (no other node's publication in use, its owner not
 * alive) is left alone (the file check records it as an empty block, given back after the block
 * grace); each give-back is told once, naming the block and the node whose publication kept it.
 */
import type { BlockClaim, ClusterTier, PublishedBlock } from './cluster-tier.ts';
import type { LedgerSnapshot, Store } from '../store.ts';
import { claimRefusal } from './claim-guard.ts';

/**
 * Block `key` as `node`'s file holds it when the file does not record claiming it and holds no
 * address in it (a claim of `node` there is unrecorded: a crash between claim and commit, a file
 * lost, or a stray); undefined when the file records it or holds something there.
 */
export async function unrecordedIn(local: Store, key: string, node: string): Promise<LedgerSnapshot | undefined> {
  const read = await local.readLedger(key);
  return read.kind !== 'snapshot' || read.affinity === node || read.allocations.length > 0 ? undefined : read;
}

/**
 * Gives `claim` (this node's in the cluster, not in its file, `file` its block there) back if another
 * node uses its block, or if the file gave the block up after this node's publication of it: true
 * when it must not be used (given back, or changed since: judged again at the next look).
 */
export async function giveBackStray(
  tier: ClusterTier,
  claim: BlockClaim,
  node: string,
  file: LedgerSnapshot,
  notice: ((message: string) => void) | undefined,
): Promise<boolean> {
  const published = await tier.publicationOf(claim.key); // read once: both judgements below ask it
  const refused = await claimRefusal(tier, claim.key, node, { published });
  const why =
    refused === undefined ? resurrected(published, node, file) : `while node ${refused.owner} published it in use`;
  if (why === undefined) return false;
  const outcome = await tier.unclaim(claim);
  notice?.(
    `block ${claim.key} is claimed for node ${node} in ${tier.description}, which never recorded claiming it, ` +
      `${why}: ${outcome === 'released' ? 'given back' : `not given back (the claim ${outcome})`}, never used` +
      `${refused === undefined ? '' : ' (an object edited by hand?)'}`,
  );
  return true;
}

/** Why `node`'s claim is older than its file's view of the block (`published`: its publication); undefined if not. */
function resurrected(published: PublishedBlock | undefined, node: string, file: LedgerSnapshot): string | undefined {
  if (published?.node !== node || published.loan === true || published.revision === undefined) return undefined;
  // As new (a kill between the claim's announcement and the file's commit), or newer (the file went back): not it.
  if (file.revision <= published.revision) return undefined;
  return (
    `its file gave the block up (at revision ${file.revision}) after its publication of it (revision ` +
    `${published.revision}): the cluster's data went back (a restore)`
  );
}
