/**
 * `warren pools` on a store shared by nodes: each range split into blocks also as the cluster holds
 * it, from what its nodes published (store/tiered/published-figures.ts). This node's store knows its own
 * blocks only, so its figures are its share: a node that can allocate nothing showed "50% used"
 * while the range was full across two nodes (issue 34).
 *
 * The figures: allocated, resting, lent (in use on a node that borrowed it) and free across the
 * cluster, and each node's share, so an operator sees where a range's addresses are.
 *
 * Guarantees: a range's figures are read a page at a time and bounded (published-figures.ts), one
 * range after another; a range whose publications cannot be read (the cluster is away) carries the
 * error instead, and the rest of the report is this node's as always. Blocks are left as they are.
 */
import { messageOf } from '../../core/errors.ts';
import type { ClusterPoolFigures, PoolReport } from '../../api/protocol.ts';
import { publishedFigures } from '../../store/tiered/published-figures.ts';
import type { PublishedView } from './allocation-pages.ts';

export async function withClusterFigures(
  reports: readonly PoolReport[],
  published: PublishedView,
): Promise<PoolReport[]> {
  const out: PoolReport[] = [];
  for (const report of reports) {
    if (report.blockPrefix === undefined) {
      out.push(report);
      continue;
    }
    out.push({ ...report, cluster: await figuresOf(report, published) });
  }
  return out;
}

async function figuresOf(report: PoolReport, published: PublishedView): Promise<ClusterPoolFigures> {
  try {
    const f = await publishedFigures(published, report.pool);
    const capacity = report.capacity === undefined ? 0 : Number(report.capacity);
    // Free in bigint: an IPv6 range's capacity is past what a double keeps exactly.
    const free =
      report.capacity === undefined || !/^\d+$/.test(report.capacity) || f.partial
        ? undefined
        : BigInt(report.capacity) - BigInt(f.allocated) - BigInt(f.resting);
    return {
      allocated: f.allocated,
      resting: f.resting,
      lent: f.lent,
      ...(free === undefined ? {} : { free: String(free < 0n ? 0n : free) }),
      ...(capacity === 0 ? {} : { utilisation: f.allocated / capacity }),
      nodes: f.byNode.filter((s) => s.blocks > 0).length,
      blocks: f.blocks,
      byNode: f.byNode,
      ...(f.partial ? { partial: true as const } : {}),
    };
  } catch (error) {
    return { allocated: 0, resting: 0, nodes: 0, blocks: 0, error: messageOf(error) };
  }
}
