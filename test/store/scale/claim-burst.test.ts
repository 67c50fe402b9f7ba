/**
 * Issue 36's claims, amortised: what a burst of ADDs on a fresh node costs the API server in
 * writes, counted by the fake (each request attributed to its node by its own token), on a /24
 * whose config sets no block_size (blocks of /31 that grow up to /27: ipam/range.ts). Another node
 * uses the range first, so the range's own records are not the burst's.
 *
 * Before blocks grew, a /24 was split into /31 blocks only: a burst of 30 on a fresh node claimed
 * 15 blocks, each a block object and a publication: 30 writes, one a ADD (2.3 requests a ADD).
 * Now the burst claims one block as large as the ADDs under way (32 addresses) and publishes it:
 * at most 3 writes, 0.1 a ADD. ADDs one after another grow the node's blocks geometrically.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fakeOf } from '../../../bench/scale/api-server.ts';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import type { RequestRecord } from '../../helpers/fake-kube-api.ts';

const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
const BURST = 30;

/** `node`'s writes among `records`, as "<verb> <resource>" lines. */
function writesOf(records: readonly RequestRecord[], node: string): string[] {
  return records.filter((r) => r.client === node && WRITES.has(r.verb ?? '')).map((r) => `${r.verb} ${r.resource}`);
}

describe(`a burst of ${BURST} ADDs on a fresh node on a /24 (issue 36's claims, amortised)`, () => {
  let cluster: ScaleCluster;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: 3, range: '10.0.0.0/24' });
    await cluster.add(2, 'first-user'); // pins the range and admits it: not the burst's to pay
    await cluster.advance(5_000, 1000);
  });
  after(async () => {
    await cluster?.stop();
  });

  it(`costs at most ${BURST / 10} writes, its publication included, when the ADDs arrive at once`, async () => {
    fakeOf(cluster).clearRequests();
    await Promise.all(Array.from({ length: BURST }, (_, k) => cluster.add(0, `burst-${k}`)));
    await cluster.advance(5_000, 1000); // the publication of what the burst allocated
    const writes = writesOf(fakeOf(cluster).requests, 'node-0000');
    assert.ok(writes.length <= BURST / 10, `${writes.length} writes for ${BURST} ADDs:\n${writes.join('\n')}`);
    assert.equal(writes.filter((w) => w === 'create warrenblocks').length, 1, 'one claim');
  });

  it('grows the blocks of a node that keeps filling them: ADDs one after another claim O(log n) blocks', async () => {
    fakeOf(cluster).clearRequests();
    for (let k = 0; k < BURST; k++) await cluster.add(1, `one-by-one-${k}`);
    await cluster.advance(5_000, 1000);
    const claims = writesOf(fakeOf(cluster).requests, 'node-0001').filter((w) => w === 'create warrenblocks');
    assert.ok(claims.length <= 5, `${claims.length} claims for ${BURST} ADDs one after another (16 with /31 blocks)`);
  });

  it('holds no address twice, every block apart from every other', async () => {
    const { held, duplicates } = await cluster.audit();
    assert.deepEqual(duplicates, []);
    assert.equal(held, 1 + 2 * BURST);
  });
});
