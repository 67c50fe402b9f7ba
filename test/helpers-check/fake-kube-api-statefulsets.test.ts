/**
 * StatefulSets (apps/v1) in the fake API server, as far as Warren reads them: created in Go struct
 * key order with a generation and the apiserver's default of one replica, `spec.replicas` below 0
 * refused (422), and listed and watched through the agent's own list-watch (the sticky addresses'
 * chore: src/agent/kubernetes/sticky-release.ts) — the listing, a scale (MODIFIED), a delete.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { systemClock } from '../../src/core/clock.ts';
import { type KubeObjectMeta, ListWatch, type ListWatchItem } from '../../src/sources/kubernetes/list-watch.ts';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { silentLogger } from '../helpers/logger.ts';
import { waitFor } from '../helpers/processes.ts';

const PATH = '/apis/apps/v1/namespaces/shop/statefulsets';

describe('the fake API server: StatefulSets', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  let kubeConfig: KubeConfig;
  before(async () => {
    api = await startFakeKubeApi();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.kubeconfigPath);
    client = await KubeApiClient.open({ kubeConfig });
  });
  after(async () => {
    client?.close();
    await api?.stop();
  });

  const make = (name: string, spec: Record<string, unknown>) =>
    client.send('make a StatefulSet', {
      method: 'POST',
      path: PATH,
      body: { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name, namespace: 'shop' }, spec },
    });

  it('creates one in struct order with a generation and one replica by default; refuses replicas below 0', async () => {
    const made = await make('db', { serviceName: 'db' });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const body = made.body as { metadata: { generation?: number }; spec: { replicas?: number } };
    assert.deepEqual(Object.keys(made.body as object).slice(0, 3), ['kind', 'apiVersion', 'metadata']);
    assert.equal(body.metadata.generation, 1);
    assert.equal(body.spec.replicas, 1);
    assert.equal((await make('bad', { replicas: -1 })).status, 422);
  });

  it("is listed and watched by the agent's list-watch: listing, scale, delete", async () => {
    const watch = new ListWatch<KubeObjectMeta>({
      kubeConfig,
      path: '/apis/apps/v1/statefulsets',
      clock: systemClock,
      logger: silentLogger,
    });
    const stop = new AbortController();
    const seen: ListWatchItem<KubeObjectMeta>[] = [];
    const run = (async () => {
      for await (const item of watch.events(stop.signal)) seen.push(item);
    })();
    try {
      await waitFor('the listing', () => (seen.some((i) => i.kind === 'listed') ? true : undefined));
      const listed = seen.find((i) => i.kind === 'listed');
      assert.ok(listed?.kind === 'listed' && listed.objects.length === 1);
      const current = (await client.send('read', { method: 'GET', path: `${PATH}/db` })).body as {
        metadata: Record<string, unknown>;
        spec: Record<string, unknown>;
      };
      const scaled = await client.send('scale', {
        method: 'PUT',
        path: `${PATH}/db`,
        body: { ...current, spec: { ...current.spec, replicas: 0 } },
      });
      assert.equal(scaled.status, 200, JSON.stringify(scaled.body));
      await waitFor('the scale', () => (seen.some((i) => i.kind === 'modified') ? true : undefined));
      assert.equal((await client.send('delete', { method: 'DELETE', path: `${PATH}/db` })).status, 200);
      await waitFor('the delete', () => (seen.some((i) => i.kind === 'deleted') ? true : undefined));
    } finally {
      stop.abort();
      await run;
    }
  });
});
