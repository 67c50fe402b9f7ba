/**
 * Blocks that grow, through allocators on a shared cluster (each node its own two-tier store on one
 * MemoryTier, lending driven on the clock: lending/lending-nodes.ts): bursts and ADDs one by one on
 * a /24 whose config sets no block_size (blocks from /31 to /27) never hand one address out twice,
 * claims never overlap, and every address of the range is still served, the last ones lent.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isWarrenError } from '../../src/core/errors.ts';
import { blockKeysOverlap } from '../../src/ipam/blocks.ts';
import { owner, rangesOf } from '../store/tiered/nodes.ts';
import { LendingCluster } from './lending/lending-nodes.ts';

const RANGE = rangesOf({ range: '10.47.0.0/24' });
const POOL = RANGE[0]?.pool ?? '';
const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

describe('blocks that grow, on nodes sharing a /24', () => {
  it('serves every address of the range through bursts, never one twice, claims never overlapping', async () => {
    const c = new LendingCluster(['n1', 'n2', 'n3', 'n4']);
    clusters.push(c);
    const add = (node: string, id: string) => c.node(node).allocator.allocate({ owner: owner(id), ranges: RANGE });
    let served = 0;
    // A burst of 30 at once on n1, 12 one by one on n2, a burst of 60 on n3, then the rest round the nodes.
    served += (await c.settle(Promise.all(Array.from({ length: 30 }, (_, k) => add('n1', `burst-a-${k}`))))).length;
    for (let k = 0; k < 12; k++) served += (await c.settle(add('n2', `one-${k}`))).length;
    served += (await c.settle(Promise.all(Array.from({ length: 60 }, (_, k) => add('n3', `burst-b-${k}`))))).length;
    const claims = (await c.tier.claimsIn(POOL)).items;
    for (const a of claims)
      for (const b of claims) assert.ok(a === b || !blockKeysOverlap(a.key, b.key), `${a.key} overlaps ${b.key}`);
    assert.ok(claims.length < 30, `${claims.length} claims for ${served} addresses: blocks grew`);
    for (let k = 0; served < 254; k++) {
      const node = `n${(k % 4) + 1}`;
      served += (await c.settle(add(node, `rest-${k}`))).length;
    }
    assert.equal((await c.assertNoDuplicate(POOL)).length, 254);
    const refused = await c.settle(add('n4', 'one-too-many')).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(isWarrenError(refused) && refused.code === 'POOL_EXHAUSTED', `the 255th ADD: ${String(refused)}`);
  });
});
