/**
 * The claimer's side of "either side may forget" (docs/kubernetes-store.md, "A claim that vanishes"):
 * a block nobody holds in the cluster may still be in use. Its claim may have vanished (deleted by
 * hand, the cluster's data restored from an older copy) while its owner's containers keep their
 * addresses; what is left to see of the owner is the block's publication, a record apart from the
 * claim on every tier.
 *
 * `claimRefusal` answers why a node must not claim such a block, read before the claim is made:
 * - another node's publication of the block lists allocations, or announces addresses its owner
 *   hands out next (`ahead`: one taken since needed no write, tiered/publication-need.ts): those
 *   addresses may be in use, and the owner claims the block again by name (tiered/reclaim.ts);
 * - another node's publication lists none, but that node's agent is alive (its Lease, its etcd
 *   announcement): it may have allocated since it last published, and it will claim the block again.
 * A block with no publication, or only this node's own, or one of a node gone (no agent alive) that
 * lists nothing, may be claimed. Reading the liveness costs a listing of the live nodes, made only
 * for a block that has a stray publication: a block given back normally has none.
 */
import type { ClusterTier, PublishedBlock } from './cluster-tier.ts';

export async function claimRefusal(
  tier: ClusterTier,
  key: string,
  node: string,
  /** The block's publication, when the caller read it already. */
  read?: { readonly published: PublishedBlock | undefined },
): Promise<{ readonly reason: string; readonly owner: string } | undefined> {
  const published = read === undefined ? await tier.publicationOf(key) : read.published;
  if (published === undefined || published.node === node || published.loan === true) return undefined;
  const owner = published.node;
  const listed = Math.max(published.counts.allocated, published.allocations.length);
  const announced = published.ahead?.length ?? 0;
  const vanished = `block ${key} is claimed by nobody, but node ${owner} published it: its claim vanished`;
  if (listed > 0 || announced > 0)
    return {
      owner,
      reason:
        `${vanished} while its publication lists ${listed} allocations` +
        `${announced === 0 ? '' : ` and announces ${announced} addresses handed out next`}, which may be in use: ` +
        `node ${owner} claims it again`,
    };
  if ((await tier.membership.liveNodes()).some((n) => n.node === owner))
    return {
      owner,
      reason: `${vanished} and the agent of node ${owner} is alive: it may hold addresses there and claims it again`,
    };
  return undefined;
}
