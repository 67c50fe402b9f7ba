/**
 * Addresses `warren migrate whereabouts` recorded as grants (lender `whereabouts`, with the pod that
 * holds each): the pod's node adopts them as the pod's allocations, a node claiming the block they
 * lie in never hands them out, and the pod's release frees them like any other.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { isBookkeeping } from '../../../src/ipam/bookkeeping.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster, recordMigrated } from './lending-nodes.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

const SMALL = rangesOf({ range: '10.11.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';

/** What the migration writes for a pod on `node` holding `address` under whereabouts. */
async function migrate(c: LendingCluster, node: string, address: string, pod: string): Promise<Allocation> {
  return recordMigrated(c, POOL, { node, address, pod });
}

describe('lending: addresses a migration recorded', () => {
  it("are recorded as their pod's allocation on its node, and the pod's release frees them", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    const holder = await migrate(c, 'n2', '10.11.0.5', 'web-0');
    await c.lendAll();
    const [adopted] = await c.node('n2').allocator.held(owner('sandbox-web-0'));
    assert.equal(adopted?.address, '10.11.0.5');
    assert.equal(adopted?.podUID, holder.podUID);
    // A retried ADD of the pod gets its own address back.
    const [again] = await c.node('n2').allocator.allocate({ owner: owner('sandbox-web-0'), ranges: SMALL });
    assert.equal(again?.allocation.address, '10.11.0.5');
    assert.equal(again?.fresh, false);
    // Adopting again (the next round) records nothing twice (the pod's record: a placeholder, or the
    // given-back mark its loan ledger keeps once its block took the record over, records no pod).
    await c.lendAll();
    const records = await c.node('n2').store.list({ address: '10.11.0.5' });
    assert.equal(records.filter((a) => !isBookkeeping(a)).length, 1);
    // The pod goes: its release frees the address like any other, and the loan is given back later.
    const released = await c.node('n2').allocator.release({ network: 'net', containerID: 'sandbox-web-0' });
    assert.deepEqual(
      released.map((a) => a.address),
      ['10.11.0.5'],
    );
    await c.lendAll({ returnGraceMs: 0 });
    await c.lendAll({ returnGraceMs: 0 });
    assert.deepEqual((await c.tier.requestOf(POOL, 'n2'))?.grants, []);
    // Once released, a lending round never records the pod's allocation again.
    assert.deepEqual(await c.node('n2').allocator.held({ network: 'net', containerID: 'sandbox-web-0' }), []);
  });

  it('are never handed out by the node that claims their block', async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    await migrate(c, 'n2', '10.11.0.1', 'db-0');
    await migrate(c, 'n2', '10.11.0.14', 'db-1');
    const got: string[] = [];
    // n1 claims the range's one block with its first ADD, and fills it.
    for (let i = 0; i < 12; i++) {
      const [a] = await c.node('n1').allocator.allocate({ owner: owner(`p${i}`), ranges: SMALL });
      got.push(a?.allocation.address ?? '');
    }
    assert.ok(!got.includes('10.11.0.1') && !got.includes('10.11.0.14'), `handed out: ${got.join(', ')}`);
    await assert.rejects(c.node('n1').allocator.allocate({ owner: owner('p12'), ranges: SMALL }), {
      code: 'POOL_EXHAUSTED',
    });
    const placeholders = await c.node('n1').store.list({ network: LENT_NETWORK });
    assert.deepEqual(placeholders.map((p) => [p.address, p.containerID]).sort(), [
      ['10.11.0.1', 'n2'],
      ['10.11.0.14', 'n2'],
    ]);
    // The pods' node adopts them; the claimer keeps its placeholders while the grants stand.
    await c.lendAll({ orphanGraceMs: 0 });
    await c.lendAll({ orphanGraceMs: 0 });
    assert.equal((await c.node('n1').store.list({ network: LENT_NETWORK })).length, 2);
    await c.assertNoDuplicate(POOL);
  });
});
