/**
 * What a range holds across the cluster, from what its nodes published (ClusterRecords.published, store/cluster.ts):
 * addresses allocated and resting, in all and by node. On a shared range a node's own figures are
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
  /** Allocated per node, in name order. */
  readonly byNode: ReadonlyArray<readonly [node: string, allocated: number]>;
  /** The range has more published blocks than were read: the figures are of the first `blocks`. */
  readonly partial: boolean;
}

export async function publishedFigures(
  published: PublishedView,
  rangePool: string,
  maxBlocks = FIGURES_MAX_BLOCKS,
): Promise<PublishedFigures> {
  let [allocated, resting, blocks] = [0, 0, 0];
  const byNode = new Map<string, number>();
  let from: string | undefined;
  let read = 0;
  do {
    const limit = Math.min(PAGE, maxBlocks - read);
    const page = await published({ pool: rangePool }, { limit, ...defined({ continue: from }) });
    read += page.items.length;
    for (const block of page.items) {
      if (block.loan === true) continue;
      allocated += block.counts.allocated;
      resting += block.counts.resting;
      blocks += 1;
      byNode.set(block.node, (byNode.get(block.node) ?? 0) + block.counts.allocated);
    }
    from = page.continue === '' ? undefined : page.continue;
  } while (from !== undefined && read < maxBlocks);
  const nodes = [...byNode].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { allocated, resting, blocks, byNode: nodes, partial: from !== undefined };
}

/** The figures as a phrase: `30 of 30 allocated, 0 resting (n1 14, n2 16)`; capacity when known. */
export function describeFigures(f: PublishedFigures, capacity?: string): string {
  const of = capacity === undefined ? '' : ` of ${capacity}`;
  const nodes = f.byNode.map(([node, n]) => `${node} ${n}`).join(', ');
  const part = f.partial ? `, in the first ${f.blocks} blocks read` : '';
  return `${f.allocated}${of} allocated, ${f.resting} resting${nodes === '' ? '' : ` (${nodes})`}${part}`;
}
