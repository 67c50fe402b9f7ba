/**
 * The listing of a collection in pages (collection-requests.ts): asked `limit` objects at a time,
 * each next page by the `continue` the server gave, with the same selectors, until it gives none;
 * the objects of every page in order, at the first page's resourceVersion. Against a stub client
 * (the fake API server answers core lists whole, as a real one may). A cluster's Nodes listed
 * whole outgrow the client's 16 MiB cap on an answer at a few thousand nodes. And a watch whose
 * connection stays silent past its limit is closed and ends as a failure (a dead connection),
 * against the fake API server, which sends a pods watch nothing while nothing changes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { loadKubeConfig } from '../../../src/sources/kubernetes/kubeconfig.ts';
import { CollectionRequests } from '../../../src/sources/kubernetes/collection-requests.ts';
import { OnDemandClient } from '../../../src/sources/kubernetes/on-demand-client.ts';
import type { ApiAnswer, ApiRequest, KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import type { KubeAccess } from '../../../src/store/kubernetes/kube-access.ts';

const NO_CONFIG: KubeAccess = {
  getCurrentCluster: () => null,
  applyToHTTPSOptions: async () => undefined,
};

/** A client whose `send` answers `pages` in turn, and the requests it was sent. */
function pagedClient(pages: readonly unknown[]): { client: OnDemandClient; asked: ApiRequest[] } {
  const asked: ApiRequest[] = [];
  const stub = {
    async send(_what: string, request: ApiRequest): Promise<ApiAnswer> {
      const body = pages[asked.length];
      asked.push(request);
      return { status: 200, body, json: true, failure: { message: '' } };
    },
  } as unknown as KubeApiClient;
  return { client: new OnDemandClient(async () => stub), asked };
}

describe('CollectionRequests.list', () => {
  it('reads a listing page by page, by the continue the server gives, at the first page’s resourceVersion', async () => {
    const { client, asked } = pagedClient([
      { items: [{ n: 1 }, { n: 2 }], metadata: { resourceVersion: '7', continue: 'c1' } },
      { items: [{ n: 3 }], metadata: { resourceVersion: '7', continue: 'c2' } },
      { items: [], metadata: { resourceVersion: '7', continue: '' } },
    ]);
    const requests = new CollectionRequests<{ n: number }>({
      kubeConfig: NO_CONFIG,
      client,
      path: '/api/v1/nodes',
      labelSelector: 'a=b',
    });
    const listing = await requests.list(new AbortController().signal);
    assert.deepEqual(listing, { kind: 'listed', objects: [{ n: 1 }, { n: 2 }, { n: 3 }], resourceVersion: '7' });
    assert.deepEqual(
      asked.map((r) => r.query),
      [undefined, 'c1', 'c2'].map((from) => ({
        fieldSelector: undefined,
        labelSelector: 'a=b',
        limit: 500,
        continue: from,
      })),
    );
  });

  it('is a failure when a page is refused (an expired continue token), not a part of the listing', async () => {
    const asked: ApiRequest[] = [];
    const stub = {
      async send(_what: string, request: ApiRequest): Promise<ApiAnswer> {
        asked.push(request);
        return asked.length === 1
          ? {
              status: 200,
              body: { items: [{}], metadata: { resourceVersion: '1', continue: 'old' } },
              json: true,
              failure: { message: '' },
            }
          : { status: 410, body: {}, json: true, failure: { code: 410, reason: 'Expired', message: 'too old' } };
      },
    } as unknown as KubeApiClient;
    const requests = new CollectionRequests({
      kubeConfig: NO_CONFIG,
      client: new OnDemandClient(async () => stub),
      path: '/api/v1/nodes',
    });
    assert.deepEqual(await requests.list(new AbortController().signal), {
      kind: 'failed',
      failure: { code: 410, reason: 'Expired', message: 'too old' },
    });
  });
});

describe('CollectionRequests.watch', () => {
  it('ends a watch silent past its limit as a failure (Timeout), after the server accepted it', async (t) => {
    const api = await startFakeKubeApi();
    t.after(() => api.stop());
    const requests = new CollectionRequests({
      kubeConfig: loadKubeConfig(api.kubeconfigPath),
      path: '/api/v1/pods',
      watchSilenceMs: 300,
    });
    t.after(() => requests.close());
    const listing = await requests.list(new AbortController().signal);
    assert.equal(listing.kind, 'listed');
    let accepted = 0;
    const handlers = {
      change: () => assert.fail('no change was made'),
      bookmark: () => undefined,
      accepted: () => {
        accepted += 1;
      },
      unknown: () => undefined,
    };
    const startedAt = Date.now();
    const end = await requests.watch(
      listing.kind === 'listed' ? listing.resourceVersion : '',
      handlers,
      new AbortController().signal,
    );
    assert.equal(end.kind, 'failed');
    assert.equal(end.kind === 'failed' ? end.failure.reason : undefined, 'Timeout');
    assert.ok(Date.now() - startedAt >= 250, 'not before the silence limit');
    assert.equal(accepted, 1);
  });
});
