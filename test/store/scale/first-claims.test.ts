/**
 * Issue 36's first claims, in requests that do not grow with the nodes: a node claiming its first
 * block of a large range (more than a page of claims: here a /16 of 4,096 blocks of /28) probes a
 * block its name picks (allocator/range-placer.ts) instead of listing every WarrenBlock of the range,
 * and a probe that meets another node's block tries the next one. Counted by the fake, per node.
 *
 * Before, every first claim listed every claim of the range, page by page, and once more after each
 * race it lost: ~4 LISTs a node at 200 nodes, 22.5 at 5,000 (BENCHMARKS.md, issue 36 part three).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeOf } from '../../../bench/scale/api-server.ts';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { holdBlocks } from '../../../bench/scale/scenarios.ts';
import { NODE_LABEL } from '../../../src/store/kubernetes/names.ts';
import type { RequestRecord } from '../../helpers/fake-kube-api.ts';

/** A page of the range's claims: a listing of WarrenBlocks not of one node's, nor the admission's look for any (limit 1). */
function isRangeListing(r: RequestRecord): boolean {
  const selector = r.query.labelSelector ?? '';
  return r.resource === 'warrenblocks' && r.verb === 'list' && !selector.includes(NODE_LABEL) && r.query.limit !== '1';
}

interface FirstClaims {
  /** Pages of the range's claims listed, by any node. */
  readonly rangeListings: number;
  /** The most LISTs of WarrenBlocks, the most LISTs and the most requests of any one node. */
  readonly maxBlockLists: number;
  readonly maxLists: number;
  readonly maxRequests: number;
  readonly duplicates: readonly unknown[];
}

/** `nodes` nodes on a /16 of /28 blocks each allocate 2 addresses: what their first claims cost. */
async function firstClaims(nodes: number): Promise<FirstClaims> {
  const cluster = await ScaleCluster.start({ nodes, range: '10.0.0.0/16', blockSize: 28 });
  try {
    fakeOf(cluster).clearRequests();
    await holdBlocks(cluster, 2);
    const mine = fakeOf(cluster).requests.filter((r) => r.client?.startsWith('node-') === true);
    const perNode = (pick: (r: RequestRecord) => boolean) =>
      Math.max(...cluster.nodes.map((n) => mine.filter((r) => r.client === n.name && pick(r)).length));
    const { duplicates } = await cluster.audit();
    return {
      rangeListings: mine.filter(isRangeListing).length,
      maxBlockLists: perNode((r) => r.verb === 'list' && r.resource === 'warrenblocks'),
      maxLists: perNode((r) => r.verb === 'list'),
      maxRequests: perNode(() => true),
      duplicates,
    };
  } finally {
    await cluster.stop();
  }
}

describe("a node's first claims in a large range (issue 36: not by listing every block)", () => {
  it('list no page of the range, and cost each node as much at 40 nodes as at 10', async (t) => {
    const few = await firstClaims(10);
    const more = await firstClaims(40);
    t.diagnostic(`10 nodes: ${JSON.stringify(few)}; 40 nodes: ${JSON.stringify(more)}`);
    assert.equal(few.rangeListings, 0, 'pages of the range listed at 10 nodes');
    assert.equal(more.rangeListings, 0, 'pages of the range listed at 40 nodes');
    // This node's own claims, read once for the range, and the admission's look for any claim (limit 1).
    assert.ok(more.maxBlockLists <= 2, `a node listed WarrenBlocks ${more.maxBlockLists} times for its first claims`);
    assert.ok(more.maxLists <= few.maxLists, `most LISTs a node: ${few.maxLists} at 10, ${more.maxLists} at 40`);
    assert.ok(
      more.maxRequests <= few.maxRequests + 3,
      `most requests a node: ${few.maxRequests} at 10, ${more.maxRequests} at 40`,
    );
    assert.deepEqual([...few.duplicates, ...more.duplicates], []);
  });
});
