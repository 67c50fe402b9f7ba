/**
 * A block handed over to its borrower on the Kubernetes tier (the fake API server, its CRDs from
 * deploy/): the `WarrenBlock` offered, moved to the borrower (its node label with it), settled;
 * the lender's claim check lets go of it, never claims it again. src/allocator/lending/handover.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RETURNED_NETWORK, LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster } from './lending-nodes.ts';
import { kubeLending } from './kube-sessions.ts';

const { clusters, session } = kubeLending();

const GRACE = 300_000;

async function rounds(c: LendingCluster, times: number): Promise<void> {
  for (let i = 0; i < times; i++)
    for (const n of c.nodes) {
      const report = await n.allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
      assert.deepEqual(report.errors, [], `${n.name}'s round`);
      await n.store.check();
    }
}

describe('a block handed over to its borrower (Kubernetes tier, fake API server)', () => {
  it('moves the WarrenBlock to the borrower, its loan becoming its allocation there, and the lender lets go', async () => {
    const ranges = rangesOf({ range: '10.31.0.0/28', block_size: 28 });
    const pool = ranges[0]?.pool ?? '';
    const c = await LendingCluster.open(['lender', 'borrower'], session);
    clusters.push(c);
    const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges }));
    assert.ok(first && lent);
    const block = first.allocation.pool;
    await c.node('lender').allocator.release(owner('l0'));
    await rounds(c, 1);
    c.clock.advance(GRACE);
    await rounds(c, 2);
    const claim = await c.cluster.claimOf(block);
    assert.deepEqual([claim?.node, claim?.offeredTo, claim?.takenFrom], ['borrower', undefined, undefined]);
    assert.deepEqual(
      (await c.cluster.claimsOf('borrower')).map((x) => x.key),
      [block],
    );
    assert.deepEqual(await c.cluster.claimsOf('lender'), []);
    const [pod] = await c.node('borrower').store.findByOwner(owner('b0'));
    assert.deepEqual([pod?.pool, pod?.address], [block, lent.allocation.address]);
    assert.equal((await c.node('borrower').store.list({ network: RETURNED_NETWORK })).length, 1);
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
    assert.deepEqual((await c.cluster.requestOf(pool, 'borrower'))?.grants ?? [], []);
    await c.node('lender').store.ping();
    const [next] = await c.node('borrower').allocator.allocate({ owner: owner('b1'), ranges });
    assert.equal(next?.allocation.pool, block);
    await c.assertNoDuplicate(pool);
  });
});
