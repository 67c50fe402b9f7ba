/**
 * Forgetting nodes deleted from Kubernetes on the two-tier store (kubernetes), in process on a
 * MemoryTier and a manual clock: a Node deleted while this agent was down is found at the next
 * listing of Nodes through the cluster's claims, since the node's own store knows only its blocks.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { KubernetesNodes } from '../../../src/agent/kubernetes/nodes.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import type { NodeItem } from '../../../src/sources/kubernetes/node-source.ts';
import type { Membership } from '../../../src/store/store.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { waitFor } from '../../helpers/processes.ts';
import { type TieredCluster, owner, rangesOf, tieredCluster } from '../../store/tiered/nodes.ts';

describe('KubernetesNodes on the two-tier store', () => {
  const clusters: TieredCluster[] = [];
  const aborts: AbortController[] = [];
  const runs: Array<Promise<void>> = [];
  after(async () => {
    for (const a of aborts) a.abort();
    await Promise.allSettled(runs);
    for (const c of clusters) await c.close();
  });

  it("frees the blocks of a Node deleted while this agent was down, found through the cluster's claims", async () => {
    const c = tieredCluster(['n1', 'gone']);
    clusters.push(c);
    const [n1, gone] = c.nodes;
    assert.ok(n1 && gone);
    // `gone` held a block, then its machine died: it never announced, so nothing of it is alive.
    const r = rangesOf({ range: '10.31.0.0/24', block_size: 28 });
    await gone.allocator.allocate({ owner: owner('on-gone'), ranges: r });
    assert.deepEqual(await c.tier.claimHolders(), ['gone']);

    const membership = n1.store.cluster.membership as Membership;
    await membership.announce('n1', { since: c.clock.now(), version: 'test' });
    const nodes = new KubernetesNodes({
      store: n1.store,
      membership,
      allocator: { forgetNode: (name) => n1.allocator.forgetNode(name) },
      clock: c.clock,
      logger: silentLogger,
      node: 'n1',
      recheckMs: 2_000,
    });
    const items = new AsyncChannel<NodeItem>();
    const abort = new AbortController();
    abort.signal.addEventListener('abort', () => items.close(), { once: true });
    aborts.push(abort);
    runs.push(nodes.run(items, abort.signal));

    // This agent starts and lists the Nodes: `gone` is not among them, and no delete event comes.
    items.push({ kind: 'listed', names: new Set(['n1']) });
    await waitFor('n1 to forget the node it found through the claims', () =>
      nodes.status().forgotten.includes('gone') ? true : undefined,
    );
    assert.deepEqual(await c.tier.claimHolders(), [], "gone's block is freed");
  });
});
