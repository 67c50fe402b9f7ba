/**
 * The fake Kubernetes API's custom resources and Leases read and written by @kubernetes/client-node
 * 2.0.1 itself (CustomObjectsApi, CoordinationV1Api, Watch): what Warren's cluster tier will meet
 * through the library works on the fake, errors included; and the watch events of a finalizer's
 * removal (one DELETED, no MODIFIED).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ApiException,
  CoordinationV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { BLOCKS, block, call, eventsAtLeast, openWatch, startedWith } from './kube-wire.ts';

// biome-ignore lint/suspicious/noExplicitAny: custom objects are untyped in the library
type Any = any;

async function refusal(promise: Promise<unknown>): Promise<{ code: number; body: Any }> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
    return { code: error.code, body: JSON.parse(error.body as string) };
  }
  throw new Error('expected the call to be refused');
}

describe('fake Kubernetes API: custom resources and Leases through @kubernetes/client-node', () => {
  it('creates, lists, replaces, merge-patches and deletes with preconditions through CustomObjectsApi', async (t) => {
    const fake = await startedWith(t);
    const kc = new KubeConfig();
    kc.loadFromFile(fake.kubeconfigPath);
    const api = kc.makeApiClient(CustomObjectsApi);
    const at = { group: 'ipam.example.com', version: 'v1', plural: 'ipamblocks' };
    const created: Any = await api.createClusterCustomObject({ ...at, body: block('b1', { node: 'n1' }) });
    assert.equal(created.metadata.generation, 1);
    await api.createClusterCustomObject({ ...at, body: block('b2', { node: 'n2' }) });
    const listed: Any = await api.listClusterCustomObject({ ...at, labelSelector: 'node=n1' });
    assert.deepEqual(
      listed.items.map((i: Any) => i.metadata.name),
      ['b1'],
    );
    const exists = await refusal(api.createClusterCustomObject({ ...at, body: block('b1') }));
    assert.deepEqual([exists.code, exists.body.reason], [409, 'AlreadyExists']);

    const replaced: Any = await api.replaceClusterCustomObject({
      ...at,
      name: 'b1',
      body: { ...created, spec: { cidr: '10.0.2.0/26' } },
    });
    assert.equal(replaced.metadata.generation, 2);
    const stale = await refusal(api.replaceClusterCustomObject({ ...at, name: 'b1', body: created }));
    assert.deepEqual([stale.code, stale.body.reason], [409, 'Conflict']);
    const patched: Any = await api.patchClusterCustomObjectStatus(
      { ...at, name: 'b1', body: { status: { used: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    assert.deepEqual([patched.status, patched.metadata.generation], [{ used: 3 }, 2]);
    const jsonPatched: Any = await api.patchClusterCustomObject({
      ...at,
      name: 'b1',
      body: [{ op: 'add', path: '/spec/affinity', value: 'host:n5' }],
    });
    assert.equal(jsonPatched.spec.affinity, 'host:n5');
    const wrong = await refusal(
      api.deleteClusterCustomObject({ ...at, name: 'b1', body: { preconditions: { uid: 'not-it' } } }),
    );
    assert.deepEqual([wrong.code, wrong.body.details.kind], [409, 'IPAMBlock']);
    const deleted: Any = await api.deleteClusterCustomObject({
      ...at,
      name: 'b1',
      body: { preconditions: { uid: created.metadata.uid, resourceVersion: jsonPatched.metadata.resourceVersion } },
    });
    assert.deepEqual([deleted.status, deleted.details.uid], ['Success', created.metadata.uid]);
  });

  it('creates and renews a Lease through CoordinationV1Api with V1MicroTime (six fractional digits)', async (t) => {
    const fake = await startedWith(t);
    const kc = new KubeConfig();
    kc.loadFromFile(fake.kubeconfigPath);
    const api = kc.makeApiClient(CoordinationV1Api);
    const now = new V1MicroTime('2026-11-24T22:30:40.242Z');
    const lease = await api.createNamespacedLease({
      namespace: 'default',
      body: {
        metadata: { name: 'node-a' },
        spec: { holderIdentity: 'node-a', leaseDurationSeconds: 15, renewTime: now },
      },
    });
    const stored: Any = fake.object('leases', 'node-a', 'default');
    assert.equal(stored.spec.renewTime, '2026-11-24T22:30:40.242000Z');
    const renewed = await api.replaceNamespacedLease({
      namespace: 'default',
      name: 'node-a',
      body: { ...lease, spec: { ...lease.spec, renewTime: new V1MicroTime('2026-11-24T22:30:45.000Z') } },
    });
    assert.notEqual(renewed.metadata?.resourceVersion, lease.metadata?.resourceVersion);
    const plainDate = await refusal(
      api.createNamespacedLease({
        namespace: 'default',
        body: { metadata: { name: 'node-b' }, spec: { renewTime: new Date('2026-11-24T22:30:40.242Z') } },
      }),
    );
    assert.equal(plainDate.code, 400, 'a plain Date goes out with three digits, which the apiserver refuses');
  });

  it('removing the last finalizer deletes the object: watchers see one DELETED at a new RV, with the finalizer', async (t) => {
    const fake = await startedWith(t);
    const held = { ...block('f1'), metadata: { name: 'f1', finalizers: ['ipam.example.com/hold'] } };
    assert.equal((await call(fake, 'POST', BLOCKS, { body: held })).status, 201);
    const marked = await call(fake, 'DELETE', `${BLOCKS}/f1`);
    const stream = await openWatch(fake, `${BLOCKS}?watch=1&resourceVersion=${marked.json.metadata.resourceVersion}`);
    t.after(() => stream.close());
    const released = await call(fake, 'PATCH', `${BLOCKS}/f1`, {
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
      contentType: 'application/json-patch+json',
    });
    assert.equal(released.json.metadata.resourceVersion, marked.json.metadata.resourceVersion);
    await eventsAtLeast('the DELETED event', stream, 1);
    await call(fake, 'POST', BLOCKS, { body: block('after') });
    await eventsAtLeast('the next ADDED', stream, 2);
    const [deleted, next] = stream.events;
    assert.deepEqual([deleted.type, deleted.object.metadata.finalizers], ['DELETED', ['ipam.example.com/hold']]);
    assert.ok(Number(deleted.object.metadata.resourceVersion) > Number(marked.json.metadata.resourceVersion));
    assert.equal(next.type, 'ADDED', 'no MODIFIED before the DELETED');
  });
});
