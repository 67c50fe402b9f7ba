/**
 * Issue 36's full pool, known in O(1) requests: a node whose own blocks are full, in a range whose
 * every block is claimed, learns that no block is free from the range's fully-claimed mark (one GET
 * of its WarrenRange: kubernetes/fully-claimed.ts), not by listing every claim (Calico's search of a
 * full pool reads every block: 3 minutes at 1,024 nodes). Counted by the fake, per node, for ADDs on
 * ranges of 16 and 1,024 blocks: the reads of the range's claims and mark an ADD costs are the same.
 *
 * Before the mark, each such ADD listed every claim of the range twice (placement, then again once
 * the grant came): 2 pages of 250 at 16 blocks, 10 at 1,024.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeOf } from '../../../bench/scale/api-server.ts';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { blockOfKey, firstUnclaimedBlock } from '../../../src/ipam/blocks.ts';
import { openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { loadKubeConfig } from '../../../src/sources/kubernetes/kubeconfig.ts';
import { SCALE_NAMESPACE } from '../../../bench/scale/simulated-node.ts';
import { NODE_LABEL } from '../../../src/store/kubernetes/names.ts';
import type { RequestRecord } from '../../helpers/fake-kube-api.ts';

/** Reads of the range's claims and of its mark, per ADD, for ADDs on node-0000 of a fully claimed range. */
async function readsPerAdd(range: string, blockSize: number, adds: number): Promise<string[]> {
  const cluster = await ScaleCluster.start({ nodes: 3, range, blockSize });
  try {
    await cluster.add(2, 'lender-first'); // pins the range and claims its first block: it lends
    const kubeConfig = loadKubeConfig(fakeOf(cluster).clientKubeconfig('claimer'));
    const tier = await openKubeTier({ kubeConfig, namespace: SCALE_NAMESPACE, leaseSeconds: 90, clock: cluster.clock });
    const spec = { ...(cluster.ranges[0] as (typeof cluster.ranges)[0]), blockPrefix: blockSize };
    const record = await tier.pinRange({ pool: spec.pool, space: '', subnet: '', first: '', last: '', blockPrefix: 0 });
    const claimed = (await tier.claimsIn(spec.pool)).items.flatMap((c) => blockOfKey(spec, c.key) ?? []);
    for (
      let free = firstUnclaimedBlock(spec, claimed), n = 0;
      free !== undefined;
      free = firstUnclaimedBlock(spec, claimed)
    ) {
      await tier.claim(record, free.key, `other-${n++}`);
      claimed.push(free);
    }
    await tier.close();
    await added(cluster, 1, 'finds-it-full'); // the node that finds the range full marks it
    const reads: string[] = [];
    for (let k = 0; k < adds; k++) {
      const before = fakeOf(cluster).requests.length;
      await added(cluster, 0, `full-${k}`);
      const mine = fakeOf(cluster)
        .requests.slice(before)
        .filter((r) => r.client === 'node-0000');
      reads.push(mine.flatMap((r) => (isRangeRead(r) ? [`${r.verb} ${r.resource}`] : [])).join(', '));
    }
    return reads;
  } finally {
    await cluster.stop();
  }
}

/**
 * A read of the range's claims (a page of them all: no node label, more than one record) or of its
 * mark (its WarrenRange). Listings of this node's own claims, and the admission's look for any claim
 * (one record), are not reads of the range.
 */
function isRangeRead(r: RequestRecord): boolean {
  if (r.resource === 'warrenranges') return r.verb === 'get';
  const selector = r.query.labelSelector ?? '';
  return r.resource === 'warrenblocks' && r.verb === 'list' && !selector.includes(NODE_LABEL) && r.query.limit !== '1';
}

/** An ADD on node `i` that waits for a lender's grant: the clock moves until it is answered. */
async function added(cluster: ScaleCluster, i: number, id: string): Promise<void> {
  let done = false;
  const add = cluster.add(i, id).finally(() => {
    done = true;
  });
  // The clock moves only once the cluster is quiet (every request answered), so however slow the
  // machine, the ADD's wait is measured in the steps it needed, never in real time.
  for (let step = 0; step < 60 && !done; step++) {
    await cluster.settle();
    if (!done) await cluster.advance(500, 500);
  }
  await add;
}

describe('an ADD on a range whose every block is claimed (issue 36: a full pool known in O(1) requests)', () => {
  it('reads as much of the range at 1,024 blocks as at 16: the mark, no listing of every claim', async (t) => {
    const small = await readsPerAdd('10.0.0.0/24', 28, 2); // 16 blocks: one page, listed
    const large = await readsPerAdd('10.0.0.0/18', 28, 2); // 1,024 blocks: four pages and more
    t.diagnostic(`reads per ADD at 16 blocks: ${small.join(' | ')}; at 1,024: ${large.join(' | ')}`);
    for (const [k, reads] of large.entries()) {
      const count = reads === '' ? 0 : reads.split(', ').length;
      assert.ok(!reads.includes('list warrenblocks'), `ADD ${k} at 1,024 blocks listed the claims: ${reads}`);
      const atSmall = (small[k] ?? '').split(', ').length;
      assert.ok(count <= atSmall, `ADD ${k}: ${reads} at 1,024 blocks, ${small[k]} at 16`);
    }
  });
});
