/**
 * A grant removed by someone else (its request edited or deleted by hand) while the borrower still
 * uses the loan (allocator/lending/loan-check.ts): the borrower's upkeep finds it, says so by name
 * and writes the grant back, so the lender keeps its placeholder until the use ends and never hands
 * the address out a second time. Real parts: TieredStores on SQLite files, one MemoryTier, the
 * allocator with blocks, a ManualClock (lending-nodes.ts).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster } from './lending-nodes.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

const SMALL = rangesOf({ range: '10.19.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';
const GRACE = 60_000;

/** A lender holding the whole /28 and a borrower using one address of it, lent. */
async function lentAndUsed() {
  const c = new LendingCluster(['lender', 'borrower']);
  clusters.push(c);
  await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
  const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
  assert.ok(lent);
  return { c, address: lent.allocation.address };
}

/** One lending round of every node with the grace of the test; what the borrower's round restored. */
async function round(c: LendingCluster): Promise<string[]> {
  await c.node('lender').allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
  const report = await c.node('borrower').allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
  assert.deepEqual(report.errors, []);
  return report.restored ?? [];
}

/** Every address the lender can still hand out, taken: the lent one must never be among them. */
async function lenderTakesAll(c: LendingCluster): Promise<string[]> {
  const got: string[] = [];
  for (let i = 1; i < 14; i++) {
    const taken = await c
      .node('lender')
      .allocator.allocate({ owner: owner(`l${i}`), ranges: SMALL })
      .catch(() => []);
    for (const a of taken) got.push(a.allocation.address);
  }
  return got;
}

describe('a grant removed while its loan is in use', () => {
  it("never lets the lender let go of a placeholder while the borrower publishes the loan in use, the borrower's agent down", async () => {
    const { c, address } = await lentAndUsed();
    await c.node('borrower').store.flush();
    const request = await c.tier.requestOf(POOL, 'borrower');
    assert.ok(request);
    assert.ok(await c.tier.updateRequest(request, [], request.wanted), 'the grant removed by hand');
    // Only the lender's upkeep runs: the borrower's agent is down, its container is not.
    const lend = async () => c.node('lender').allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
    assert.deepEqual((await lend()).restored, []);
    c.clock.advance(GRACE);
    const kept = await lend();
    assert.deepEqual(kept.released, []);
    assert.equal(kept.restored?.length, 1);
    assert.match(kept.restored?.[0] ?? '', /placeholder of .* lent to node borrower kept: .* container b0 using it/);
    assert.deepEqual((await lend()).restored, [], 'said once');
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1);
    assert.ok(!(await lenderTakesAll(c)).includes(address), 'the lender handed the loan in use out');
  });

  it('never lets the lender hand out a loan in use whose grant someone else removed from the request', async () => {
    const { c, address } = await lentAndUsed();
    const request = await c.tier.requestOf(POOL, 'borrower');
    assert.ok(request);
    assert.ok(await c.tier.updateRequest(request, [], request.wanted), 'the grant removed by hand');

    const restored = await round(c);
    assert.equal(restored.length, 1);
    assert.match(restored[0] ?? '', new RegExp(`loan ${address.replaceAll('.', '\\.')} of .* in use on node borrower`));
    assert.match(restored[0] ?? '', /container b0/);
    assert.match(restored[0] ?? '', /granted back from node lender/);
    assert.deepEqual(
      (await c.tier.requestOf(POOL, 'borrower'))?.grants.map((g) => [g.address, g.lender]),
      [[address, 'lender']],
    );
    // Past the lender's grace for grants gone: its placeholder stays, for the grant is back.
    c.clock.advance(GRACE);
    assert.deepEqual(await round(c), [], 'said once, while it was missing');
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1);
    assert.ok(!(await lenderTakesAll(c)).includes(address), 'the lender handed the loan in use out');
    await c.assertNoDuplicate(POOL);
  });

  it('makes the request again when it was deleted, and the loan ends the ordinary way after the use', async () => {
    const { c, address } = await lentAndUsed();
    c.tier.deleteRequest(POOL, 'borrower');
    const restored = await round(c);
    assert.match(restored.join('\n'), /the request is gone/);
    assert.deepEqual(
      (await c.tier.requestOf(POOL, 'borrower'))?.grants.map((g) => g.address),
      [address],
    );
    // The use ends: the loan goes back and the lender has its address again.
    await c.node('borrower').allocator.release(owner('b0'));
    for (let i = 0; i < 4; i++) {
      assert.deepEqual(await round(c), [], 'an idle loan is not granted back');
      c.clock.advance(GRACE);
    }
    assert.deepEqual((await c.tier.requestOf(POOL, 'borrower'))?.grants, []);
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
    assert.ok((await lenderTakesAll(c)).includes(address), 'the address came back to its lender');
    await c.assertNoDuplicate(POOL);
  });
});
