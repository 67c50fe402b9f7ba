/**
 * The fake Kubernetes API server (its CRDs from deploy/) that a lending test file's clusters share:
 * `session(clock)` opens one node's Kubernetes tier on it; the clusters and abort controllers the
 * file registers are closed, and the server stopped, after the file's tests.
 */
import { after } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { ManualClock } from '../../../src/core/clock.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import type { LendingCluster } from './lending-nodes.ts';

export interface KubeLending {
  readonly fakeReady: Promise<FakeKubeApi>;
  readonly clusters: LendingCluster[];
  readonly aborts: AbortController[];
  session(clock: ManualClock): Promise<KubeTier>;
}

export function kubeLending(): KubeLending {
  const fakeReady = startFakeKubeApi({ crds: 'deploy' });
  const clusters: LendingCluster[] = [];
  const aborts: AbortController[] = [];
  after(async () => {
    for (const a of aborts) a.abort();
    for (const c of clusters) await c.close();
    await (await fakeReady).stop();
  });
  return {
    fakeReady,
    clusters,
    aborts,
    async session(clock) {
      const fake = await fakeReady;
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(fake.kubeconfigPath);
      return openKubeTier({ kubeConfig, namespace: 'warren-system', leaseSeconds: 15, clock });
    },
  };
}
