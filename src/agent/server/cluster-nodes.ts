/**
 * Every node's blocks and counts as the cluster publishes them, for `warren nodes` on a store whose
 * nodes each keep their own addresses (kubernetes): the node's own store knows only its own blocks,
 * so the other nodes' come from their published blocks (ClusterTier.published), read a page at a
 * time, and are summed as each page comes (one page of blocks in memory at a time, the totals per
 * node kept).
 *
 * Guarantees:
 * - `this node` is left to its own store (fresher than its publications): its published blocks are
 *   skipped here;
 * - counts are of containers: a published bookkeeping record (ipam/bookkeeping.ts) is not an
 *   allocation; a lender's placeholder counts as `lent` by the publishing node. A publication
 *   trimmed for size keeps its counts (store/kubernetes/objects.ts), so the allocations are its
 *   count less the bookkeeping records it lists; a published loan ledger (a borrowed address) is no
 *   block of its node, but the container in it is the node's allocation;
 * - the read pages through the view until it says there is no more; a failure is thrown, never a
 *   partial answer taken for the whole.
 */
import { defined } from '../../core/defined.ts';
import { bookkeepingNetwork, isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { PublishedView } from './allocation-pages.ts';

/** Blocks read from the published view at a time. */
export const NODE_BLOCKS_PER_READ = 100;

/** What the cluster says of one node: its blocks, the allocations of containers in them, what it lent. */
export interface PublishedNode {
  readonly blocks: string[];
  allocations: number;
  lent: number;
}

/** Every other node's published blocks and counts, by node name. */
export async function publishedNodes(
  published: PublishedView,
  self: string,
  perRead = NODE_BLOCKS_PER_READ,
): Promise<Map<string, PublishedNode>> {
  const nodes = new Map<string, PublishedNode>();
  const lent = bookkeepingNetwork('lent');
  let token: string | undefined;
  do {
    const page = await published({}, { limit: perRead, ...defined({ continue: token }) });
    for (const block of page.items) {
      if (block.node === self) continue;
      const entry = nodes.get(block.node) ?? { blocks: [], allocations: 0, lent: 0 };
      const kept = block.allocations.filter(isBookkeeping);
      nodes.set(block.node, entry);
      // A loan ledger is no block of the node's: its containers are the node's allocations all the same.
      if (block.loan === true) {
        entry.allocations += block.allocations.length - kept.length;
        continue;
      }
      entry.blocks.push(block.key);
      entry.allocations += Math.max(0, block.counts.allocated - kept.length);
      entry.lent += kept.filter((a) => a.network === lent).length;
    }
    token = page.continue === '' ? undefined : page.continue;
  } while (token !== undefined);
  return nodes;
}
