/**
 * A grant removed by someone else while its loan is in use, on the Kubernetes tier through the fake
 * API server (deploy/crds/ served): the borrower's WarrenAddressRequest deleted or its grants
 * emptied as `kubectl` would, the borrower's upkeep writes the grant back by name, and the lender
 * never hands the address out a second time (allocator/lending/loan-check.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { requestName } from '../../../src/store/kubernetes/names.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { kubeLending } from './kube-sessions.ts';
import { LendingCluster } from './lending-nodes.ts';

const { fakeReady, clusters, session } = kubeLending();

const GRACE = 60_000;

async function round(c: LendingCluster): Promise<string[]> {
  await c.node('lender').allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
  const report = await c.node('borrower').allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
  assert.deepEqual(report.errors, []);
  return report.restored ?? [];
}

describe('a grant removed while its loan is in use (Kubernetes tier, fake API server)', () => {
  it('writes back the grant of a deleted WarrenAddressRequest, and the lender keeps the address from everyone else', async () => {
    const fake = await fakeReady;
    const ranges = rangesOf({ range: '10.29.0.0/28', block_size: 28 });
    const pool = ranges[0]?.pool ?? '';
    const c = await LendingCluster.open(['lender', 'borrower'], session);
    clusters.push(c);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges }));
    assert.ok(lent);
    const address = lent.allocation.address;

    assert.ok(fake.deleteObject('warrenaddressrequests', requestName(pool, 'borrower')), 'deleted as kubectl would');
    const restored = await round(c);
    assert.equal(restored.length, 1);
    assert.match(restored[0] ?? '', /the request is gone/);
    assert.match(restored[0] ?? '', /granted back from node lender/);
    assert.deepEqual(
      (await c.cluster.requestOf(pool, 'borrower'))?.grants.map((g) => [g.address, g.lender]),
      [[address, 'lender']],
    );

    c.clock.advance(GRACE);
    assert.deepEqual(await round(c), []);
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1);
    const got: string[] = [];
    for (let i = 1; i < 14; i++) {
      const taken = await c
        .node('lender')
        .allocator.allocate({ owner: owner(`l${i}`), ranges })
        .catch(() => []);
      for (const a of taken) got.push(a.allocation.address);
    }
    assert.ok(!got.includes(address), 'the lender handed the loan in use out');
    await c.assertNoDuplicate(pool);
  });
});
