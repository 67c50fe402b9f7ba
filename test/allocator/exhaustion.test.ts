/**
 * The refusal of an ADD in a full range says this node's share and the range's state across the
 * cluster (issue 34: "pool … has no free address (14 allocated)" when 30 of 30 were in use across
 * two nodes). Real parts: two nodes, each a TieredStore on its own SQLite file, one MemoryTier, the
 * allocator with blocks and lending, a ManualClock; and the figures' reading and phrasing alone.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FIGURES_KEPT_MS } from '../../src/allocator/exhaustion.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { blockKey } from '../../src/ipam/blocks.ts';
import { describeFigures, publishedFigures } from '../../src/store/tiered/published-figures.ts';
import { owner, rangesOf } from '../store/tiered/nodes.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { LendingCluster } from './lending/lending-nodes.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

/** Two blocks of 15 addresses: one per node. */
const SHARED = rangesOf({ range: '10.13.0.0/27', block_size: 28 });

async function refusal(c: LendingCluster, node: string, id: string): Promise<string> {
  const refused = await c.settle(c.node(node).allocator.allocate({ owner: owner(id), ranges: SHARED })).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(isWarrenError(refused, 'POOL_EXHAUSTED'), `the ADD on ${node} was not refused as full: ${refused}`);
  return refused.message;
}

describe('the refusal of an ADD in a full range shared by nodes', () => {
  it("says this node's share and the range across the cluster, not one node's share as the pool's", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    for (const node of ['n1', 'n2']) {
      for (let i = 0; i < 15; i++)
        await c.settle(c.node(node).allocator.allocate({ owner: owner(`${node}-${i}`), ranges: SHARED }));
      await c.node(node).store.flush();
    }
    const pool = SHARED[0]?.pool;
    assert.equal(
      await refusal(c, 'n1', 'n1-16th'),
      `pool ${pool} has no free address on node n1 (15 allocated here, 0 resting after release); ` +
        'across the cluster 30 of 30 allocated, 0 resting (n1 15, n2 15), as published',
    );
  });

  it('reads the figures once per interval on the clock, then afresh', async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    for (const node of ['n1', 'n2']) {
      for (let i = 0; i < 15; i++)
        await c.settle(c.node(node).allocator.allocate({ owner: owner(`${node}-${i}`), ranges: SHARED }));
      await c.node(node).store.flush();
    }
    assert.match(await refusal(c, 'n1', 'a'), /\(n1 15, n2 15\)/);
    // n2's container ends; its address rests an hour (published as resting): still none free for n1.
    await c.node('n2').allocator.release(owner('n2-0'), 3600);
    await c.node('n2').store.flush();
    assert.match(await refusal(c, 'n1', 'b'), /30 of 30 allocated, 0 resting \(n1 15, n2 15\)/, 'kept');
    c.clock.advance(FIGURES_KEPT_MS);
    assert.match(await refusal(c, 'n1', 'c'), /29 of 30 allocated, 1 resting \(n1 15, n2 14\)/, 'read again');
  });
});

describe('publishedFigures', () => {
  it('sums what the owners published by node, counts loans as lent (not again as allocated), and says when it read only part', async () => {
    const clock = new ManualClock(0);
    const tier = new MemoryTier({ clock });
    const range = { pool: 'r', space: 's', subnet: '10.14.0.0/24', first: '10.14.0.1', last: '10.14.0.254' };
    const blocks = [
      ['10.14.0.0/28', 'n2', 3, 1],
      ['10.14.0.16/28', 'n1', 5, 0],
      ['10.14.0.32/28', 'n2', 2, 0],
    ] as const;
    for (const [cidr, node, allocated, resting] of blocks) {
      const key = blockKey('r', cidr);
      assert.ok(await tier.claim({ ...range, blockPrefix: 28 }, key, node));
      await tier.publish({ key, node, counts: { allocated, resting }, allocations: [], publishedAt: 0 });
    }
    await tier.publishLoan?.({
      key: 'r#10.14.0.20/32',
      node: 'n2',
      counts: { allocated: 1, resting: 0 },
      allocations: [],
      publishedAt: 0,
      loan: true,
    });
    const all = await publishedFigures((f, p) => tier.published(f, p), 'r');
    assert.deepEqual(all, {
      allocated: 10,
      resting: 1,
      blocks: 3,
      lent: 1,
      byNode: [
        { node: 'n1', blocks: 1, allocated: 5, resting: 0, borrowed: 0 },
        { node: 'n2', blocks: 2, allocated: 5, resting: 1, borrowed: 1 },
      ],
      partial: false,
    });
    assert.equal(describeFigures(all, '254'), '10 of 254 allocated, 1 resting (n1 5, n2 5)');
    const part = await publishedFigures((f, p) => tier.published(f, p), 'r', 1);
    assert.equal(part.partial, true);
    assert.match(describeFigures(part), /, in the first \d+ blocks read$/);
  });
});
