/**
 * `warren nodes` on a store whose nodes keep their own addresses (kubernetes): every node's blocks
 * and counts, the other nodes' read from what the cluster published, page by page
 * (agent/server/cluster-nodes.ts), this node's from its own store; bookkeeping records counted as
 * lent, not as allocations. Real parts: TieredStores on SQLite files and one MemoryTier lending to
 * each other (test/allocator/lending/lending-nodes.ts), on a manual clock.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { publishedNodes } from '../../../src/agent/server/cluster-nodes.ts';
import { nodeReports } from '../../../src/agent/server/operator-reports.ts';
import type { PublishedView } from '../../../src/agent/server/allocation-pages.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster } from '../../allocator/lending/lending-nodes.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

const SMALL = rangesOf({ range: '10.39.0.0/28', block_size: 28 });
const WIDE = rangesOf({ range: '10.39.1.0/24', block_size: 28 });

describe('warren nodes on a store of per-node addresses', () => {
  it("shows every node's blocks from the cluster's published pages, not only this node's", async () => {
    const c = new LendingCluster(['lender', 'borrower']);
    clusters.push(c);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    for (let i = 0; i < 17; i++) await c.node('lender').allocator.allocate({ owner: owner(`w${i}`), ranges: WIDE });
    await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    for (const n of c.nodes) await n.store.flush();

    const reads: number[] = [];
    const view: PublishedView = async (filter, page) => {
      const got = await c.cluster.published(filter, page);
      reads.push(got.items.length);
      return got;
    };
    const borrower = c.node('borrower').store;
    const reports = nodeReports(
      [],
      await borrower.ledgers(),
      await borrower.list(),
      await publishedNodes(view, 'borrower', 1),
    );
    assert.deepEqual(
      reports.map((r) => ({ node: r.node, blocks: r.blocks.length, allocations: r.allocations, lent: r.lent })),
      [
        { node: 'borrower', blocks: 0, allocations: 1, lent: undefined },
        // l0 and 17 in two blocks of the /24; the lent address is its placeholder, not an allocation.
        { node: 'lender', blocks: 3, allocations: 18, lent: 1 },
      ],
    );
    assert.ok(reads.length >= 3, `read a page at a time (${reads.join(', ')})`);
    assert.ok(
      reads.every((n) => n <= 1),
      'no read larger than its page',
    );
  });

  it('reads nothing of the cluster for this node: its own store answers for it', async () => {
    const c = new LendingCluster(['n1']);
    clusters.push(c);
    await c.node('n1').allocator.allocate({ owner: owner('a'), ranges: WIDE });
    await c.node('n1').store.flush();
    assert.deepEqual([...(await publishedNodes((f, p) => c.cluster.published(f, p), 'n1'))], []);
  });
});
