/**
 * The node source against the fake Kubernetes API: the names of the cluster's Nodes as a listing,
 * then additions and deletions; changes to a node that stays say nothing. Each test starts and
 * stops its own server; waits are polls with a deadline.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../../src/core/clock.ts';
import { type NodeItem, NodeSource } from '../../../src/sources/kubernetes/node-source.ts';
import { startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

function seen(items: readonly NodeItem[]): string[] {
  return items.map((item) =>
    item.kind === 'listed' ? `listed:${[...item.names].sort().join(',')}` : `${item.kind}:${item.name}`,
  );
}

describe('NodeSource', () => {
  it('lists the nodes, then says which come and which go, and after 410 Gone lists the truth again', async (t) => {
    const api = await startFakeKubeApi();
    const abort = new AbortController();
    const items: NodeItem[] = [];
    let done: Promise<void> = Promise.resolve();
    t.after(async () => {
      abort.abort();
      await done;
      await api.stop();
    });
    api.createNode('node-1');
    api.createNode('node-2');
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.kubeconfigPath);
    const clock = new ManualClock(Date.now());
    const source = new NodeSource({ kubeConfig, clock, logger: silentLogger });
    done = (async () => {
      for await (const item of source.events(abort.signal)) items.push(item);
    })();
    const until = (what: string, count: number) => waitFor(what, () => (items.length >= count ? true : undefined));
    await waitFor('the watch', () =>
      api.watchCount('nodes') === 1 && source.status().state === 'watching' ? true : undefined,
    );
    api.createNode('node-3');
    api.updateNode('node-1', (n) => (n.metadata.labels = { zone: 'a' }));
    api.deleteNode('node-2');
    await until('node-2 deleted', 3);
    assert.deepEqual(seen(items), ['listed:node-1,node-2', 'node-added:node-3', 'node-deleted:node-2']);
    assert.deepEqual([...source.names()].sort(), ['node-1', 'node-3']);
    assert.equal(source.status().nodes, 2);
    assert.equal(api.requests.find((r) => r.verb === 'list')?.path, '/api/v1/nodes');

    // A node deleted while the watch was away shows as missing from the next listing.
    api.breakWatches();
    await waitFor('the backoff', () => (source.status().state === 'backing-off' ? true : undefined));
    api.deleteNode('node-1');
    api.compactHistory();
    clock.advance(1_000);
    await until('the second listing', 4);
    assert.deepEqual(seen(items).at(-1), 'listed:node-3');
    assert.equal(source.status().relists, 1);
  });
});
