/**
 * A claim naming this node that its file does not record claiming, and in whose block the file holds
 * nothing: the cluster says the block is this node's, the node never recorded it. It is never used,
 * and it is given back at the first look (the file check at the store's start, the claim keeper's
 * checks while it runs), so a node that holds addresses in the block can claim it again. Its node
 * loses nothing: its file holds no address there. What makes such a claim:
 * - a kill between the cluster's claim and the file's commit (tiered/claim-commit.ts): the claim
 *   was announced, no address of the block handed out yet; given back, the block is free again;
 * - a restore of the cluster's data from an older copy: the claim is one this node gave up since,
 *   and the block may be another node's now, its claim and publication lost with the restore.
 *   Found by the soak twice (etcd seed 3943): once with this node's old publication still there
 *   (its file's revision of the block past it), once with none at all, when this node's file check
 *   recorded the claim as an empty block and handed out the address another node's live container
 *   held. Nothing in the cluster tells these apart from the first case, so both are given back;
 * - an object edited by hand (a WarrenBlock's `spec.node`, an etcd claim key's value), or
 *   re-created by hand under the wrong name: often in a block another node published in use, whose
 *   addresses its containers hold (tiered/claim-guard.ts would have refused this node the claim).
 *   Also when the file does record claiming the block, but another claim record than the one edited
 *   (the file keeps the uid of the claim it made: Store.recordedClaim): a copy of the file from
 *   before this node gave the block up, put back after another node claimed it and the claim was
 *   edited to name this node, took that claim for its own and handed out the other node's addresses
 *   (found by the soak, kubernetes seed 3839 step 1819).
 *
 * Where another node's publication of the block says it may be in use (tiered/claim-guard.ts: it lists
 * allocations, or its agent is alive), the claim is handed back to that node, never removed: removing it
 * left the block to whoever claimed first, and the owner's publication was then all that kept its
 * addresses from a claimer. Found by the soak (kubernetes seed 3839 step 18,423): an edit moved node 0's
 * claim to node 2, which gave it back; node 0's publication was then deleted by hand, and before node 0
 * claimed the block again node 2, restarted, found it claimed and published by nobody, claimed it and
 * handed out node 0's `.8`. Handed back, the claim never leaves its owner's name for long: the owner's
 * claim check finds it standing for it again (tiered/reclaim.ts), which also ends the halt it was in.
 *
 * Guarantees: only a claim of exactly this record (uid, version) is removed or moved, never one written
 * since (ClusterTier.unclaim, ClusterTier.moveClaim); each give-back is told once, naming the block,
 * why it is judged so and where the claim went. tiered/ranges.ts lists such a claim as nobody's to
 * hand out from while it stands.
 */
import type { BlockClaim, ClusterTier, PublishedBlock, UnclaimResult } from './cluster-tier.ts';
import type { LedgerSnapshot, Store } from '../store.ts';
import { claimRefusal } from './claim-guard.ts';

/**
 * Block `key` as `node`'s file holds it when the file does not record claiming it (or recorded
 * claiming another record than `uid`, the claim naming `node` now) and holds no address in it (a
 * claim of `node` there is unrecorded: a crash between claim and commit, a file lost or put back,
 * or a stray); undefined when the file records it or holds something there.
 */
export async function unrecordedIn(
  local: Store,
  key: string,
  node: string,
  uid: string,
): Promise<LedgerSnapshot | undefined> {
  const read = await local.readLedger(key);
  if (read.kind !== 'snapshot' || read.allocations.length > 0) return undefined;
  return read.affinity !== node || madeAnother(local, key, uid) ? read : undefined;
}

/** Whether the file recorded making another claim record of block `key` than `uid` (none recorded: not known). */
export function madeAnother(local: Store, key: string, uid: string): boolean {
  const recorded = local.recordedClaim?.(key);
  return recorded !== undefined && recorded !== uid;
}

/**
 * Gives `claim` (this node's in the cluster, not in its file, `file` its block there) back, unused (to
 * the node whose publication says it may be in use, if any): the outcome of the give-back (`changed`
 * or `gone`: judged again at the next look, never used either).
 * A file that recorded claiming the block by another record (`madeAnother`) gives it up as well: that
 * claim is gone from the cluster, and the block, empty here, is left to it.
 */
export async function giveBackUnrecorded(
  tier: ClusterTier,
  local: Store,
  claim: BlockClaim,
  file: LedgerSnapshot,
  notice: ((message: string) => void) | undefined,
): Promise<UnclaimResult> {
  const node = claim.node;
  // Read to say why, and to whom the claim goes back: it leaves this node whatever it shows.
  const published = await tier.publicationOf(claim.key);
  const other = published !== undefined && published.node !== node && published.loan !== true;
  const why = other
    ? `while node ${published.node} published it (an object edited by hand?)`
    : (resurrected(published, node, file) ??
      "claimed just before its agent stopped, or brought back by a restore of the cluster's data");
  // The owner's publication says its containers may hold addresses there: the claim is the owner's.
  const owner = (await claimRefusal(tier, claim.key, node, { published }))?.owner; // none for its own, a loan, or none
  const outcome = owner === undefined ? await tier.unclaim(claim) : await handBack(tier, claim, owner);
  // Conflict: the file moved meanwhile (judged again at the next look, the claim gone by then).
  if (file.affinity === node && outcome !== 'changed')
    await local.commit(claim.key, file.revision, [{ op: 'unclaim' }]).catch(() => undefined);
  if (outcome === 'gone') return outcome; // given back already (the file check and a check of the keeper both saw it)
  const back =
    owner === undefined ? 'given back' : `given back to node ${owner}, whose containers may hold its addresses`;
  const done = outcome === 'released' ? back : `not given back (the claim ${outcome})`;
  notice?.(
    `block ${claim.key} is claimed for node ${node} in ${tier.description}, which never recorded claiming it ` +
      `and holds nothing in it, ${why}: ${done}, never used`,
  );
  return outcome;
}

/**
 * Moves `claim` to `owner` (ClusterTier.moveClaim), if it is still exactly `claim`: `released` once it
 * names the owner, else `changed` or `gone`. A tier that cannot move a claim removes it (`unclaim`).
 */
async function handBack(tier: ClusterTier, claim: BlockClaim, owner: string): Promise<UnclaimResult> {
  if (tier.moveClaim === undefined) return tier.unclaim(claim);
  if ((await tier.moveClaim(claim, { node: owner })) !== undefined) return 'released';
  return (await tier.claimOf(claim.key)) === undefined ? 'gone' : 'changed';
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

/**
 * Why block `key`, which this node does not claim in the cluster, is not handed out from here. A file
 * that still records claiming it while holding nothing there (a copy put back from before the node
 * gave the block up, another node's now) gives it up: every ADD in the range picked it and
 * conflicted, since no check of vanished claims unclaims a claim this process never saw.
 */
export async function notClaimedHere(local: Store, key: string, node: string): Promise<string> {
  const read = await local.readLedger(key);
  if (read.kind === 'snapshot' && read.affinity === node && read.allocations.length === 0)
    await local.commit(key, read.revision, [{ op: 'unclaim' }]).catch(() => undefined);
  return `block ${key} is not claimed by node ${node}`;
}
