/**
 * The two-tier store on the Kubernetes tier, through the fake API server (which speaks the real
 * wire protocol and serves deploy/crds/): the Store conformance suite, and the common ADD and DEL
 * counted in API requests by the server itself.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { Allocator } from '../../src/allocator/allocator.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { openKubeTier } from '../../src/store/kubernetes/kube-tier.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';
import type { Store } from '../../src/store/store.ts';
import { TieredStore } from '../../src/store/tiered-store.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { tempDir } from '../helpers/processes.ts';
import { storeConformance } from './conformance.ts';
import { owner, rangesOf } from './tiered-nodes.ts';

const clock = new ManualClock(Date.now());
const fakeReady: Promise<FakeKubeApi> = startFakeKubeApi({ crds: 'deploy' });
const paths = new WeakMap<Store, string>();

async function tiered(node: string, path = join(tempDir(), 'warren.db')): Promise<TieredStore> {
  const fake = await fakeReady;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(fake.kubeconfigPath);
  const tier = await openKubeTier({ kubeConfig, namespace: 'warren-system', leaseSeconds: 15, clock });
  const store = new TieredStore({ local: new SqliteStore({ path }), tier, node, clock });
  paths.set(store, path);
  return store;
}

after(async () => {
  await (await fakeReady).stop();
});

storeConformance('tiered: SQLite file and the Kubernetes tier (fake API server)', {
  create: () => tiered('n1'),
  reopen: (store) => tiered('n1', paths.get(store)),
});

describe('TieredStore on the Kubernetes tier', () => {
  it('makes no API request on an ADD or a DEL in an own block (counted by the server)', async () => {
    const fake = await fakeReady;
    const store = await tiered('kube-n1');
    try {
      const allocator = new Allocator({ store, clock, node: 'kube-n1', blocks: true });
      const r = rangesOf({ range: '10.30.0.0/16', network_name: 'tiered-kube' });
      await allocator.allocate({ owner: owner('first'), ranges: r });
      fake.clearRequests();
      for (let i = 0; i < 5; i++) await allocator.allocate({ owner: owner(`c${i}`), ranges: r });
      await allocator.release(owner('c0'));
      assert.deepEqual(
        fake.requests.map((q) => `${q.method} ${q.path}`),
        [],
      );
    } finally {
      await store.close();
    }
  });
});
