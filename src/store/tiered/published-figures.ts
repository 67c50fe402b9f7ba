/**
 * What a range holds across the cluster, from what its nodes published (ClusterRecords.published, store/cluster.ts):
 * addresses allocated, resting and lent, in all and by node. On a shared range a node's own figures are
 * its share only; these say the range's state, so an operator can tell "this node is full" from
 * "the range is full" (issue 34: "no free address (14 allocated)" when 30 of 30 were in use).
 *
 * Guarantees:
 * - read only off the common path (an ADD refused for a full range, `warren pools`), a page of
 *   blocks at a time and at most `maxBlocks` blocks: a range larger than that is said to be read in
 *   part (`partial`), never read whole on one request's account;
 * - a borrower's loan publication is not counted: its lender's placeholder already counts the address;
 * - figures are as published: up to the settle interval behind each owner (tiered/publisher.ts: an
 *   ADD of an address the publication announced, or a DEL, is written within it; any other change
 *   at the next run). Announced addresses (`ahead`) are not counted: they are free until taken;
 *   a released address is counted until written.
 */
import { defined } from '../../core/defined.ts';
import type { PublishedView } from '../cluster.ts';

/** Blocks read per request. */
const PAGE = 100;
/** Default most blocks read for one range's figures. */
export const FIGURES_MAX_BLOCKS = 1000;

export interface PublishedFigures {
  readonly allocated: number;
  readonly resting: number;
  /** Blocks read (claimed blocks whose owner published; loans not counted). */
  readonly blocks: number;
  /** Addresses in use on a node that borrowed them (its loan publications): counted in `allocated` at their lender. */
  readonly lent: number;
  /** Each node's share, in name order: a node that only borrows has allocated 0. */
  readonly byNode: readonly NodeShare[];
  /** The range has more published blocks than were read: the figures are of the first `blocks`. */
  readonly partial: boolean;
}

/** What one node holds of a range, as published. */
export interface NodeShare {
  readonly node: string;
  /** Its claimed blocks read (0 for a node that only borrows). */
  readonly blocks: number;
  /** In its own blocks, what it lent out included. */
  readonly allocated: number;
  readonly resting: number;
  /** Addresses of other nodes' blocks it holds on loan. */
  readonly borrowed: number;
}

export async function publishedFigures(
  published: PublishedView,
  rangePool: string,
  maxBlocks = FIGURES_MAX_BLOCKS,
): Promise<PublishedFigures> {
  let [allocated, resting, blocks, lent] = [0, 0, 0, 0];
  const byNode = new Map<string, { blocks: number; allocated: number; resting: number; borrowed: number }>();
  const shareOf = (node: string) => {
    const known = byNode.get(node);
    if (known !== undefined) return known;
    const share = { blocks: 0, allocated: 0, resting: 0, borrowed: 0 };
    byNode.set(node, share);
    return share;
  };
  let from: string | undefined;
  let read = 0;
  do {
    const limit = Math.min(PAGE, maxBlocks - read);
    const page = await published({ pool: rangePool }, { limit, ...defined({ continue: from }) });
    read += page.items.length;
    for (const block of page.items) {
      const share = shareOf(block.node);
      if (block.loan === true) {
        lent += block.counts.allocated;
        share.borrowed += block.counts.allocated;
        continue;
      }
      allocated += block.counts.allocated;
      resting += block.counts.resting;
      blocks += 1;
      share.blocks += 1;
      share.allocated += block.counts.allocated;
      share.resting += block.counts.resting;
    }
    from = page.continue === '' ? undefined : page.continue;
  } while (from !== undefined && read < maxBlocks);
  const nodes = [...byNode].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([node, s]) => ({ node, ...s }));
  return { allocated, resting, blocks, lent, byNode: nodes, partial: from !== undefined };
}

/** The figures as a phrase: `30 of 30 allocated, 0 resting (n1 14, n2 16)`; capacity when known. */
export function describeFigures(f: PublishedFigures, capacity?: string): string {
  const of = capacity === undefined ? '' : ` of ${capacity}`;
  const nodes = f.byNode
    .filter((s) => s.blocks > 0)
    .map((s) => `${s.node} ${s.allocated}`)
    .join(', ');
  const part = f.partial ? `, in the first ${f.blocks} blocks read` : '';
  return `${f.allocated}${of} allocated, ${f.resting} resting${nodes === '' ? '' : ` (${nodes})`}${part}`;
}
