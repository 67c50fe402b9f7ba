/**
 * The pod directory: answers from what the watches brought (no GET), one GET on a miss, a pod of
 * another UID than the ref's is not the pod asked for, a StatefulSet's new pod is not removed by the
 * old one's DELETED, and a listing replaces what it covers.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PodDirectory, podViewOf } from '../../../src/agent/kubernetes/pod-directory.ts';

const pod = (name: string, uid: string, extra: Record<string, unknown> = {}) => ({
  metadata: { namespace: 'ns', name, uid, ...extra },
  spec: { nodeName: 'n1' },
});

function setup() {
  const gets: string[] = [];
  const remote = new Map<string, unknown>();
  const directory = new PodDirectory({
    fetchPod: async (namespace, name) => {
      gets.push(`pod ${namespace}/${name}`);
      return remote.get(`${namespace}/${name}`);
    },
    fetchNamespace: async (name) => {
      gets.push(`namespace ${name}`);
      return remote.get(name);
    },
  });
  return { directory, gets, remote };
}

describe('PodDirectory', () => {
  it('keeps labels, annotations and owners, and answers a watched pod without a GET', async () => {
    const { directory, gets } = setup();
    const owners = [
      { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'ss-1', controller: true },
      { kind: 'Other', name: 'x' },
    ];
    directory.observePods({
      kind: 'listed',
      objects: [pod('db-0', 'u0', { labels: { app: 'db' }, annotations: { a: 'b', n: 5 }, ownerReferences: owners })],
    });
    const view = await directory.pod({ namespace: 'ns', name: 'db-0', uid: 'u0' });
    assert.deepEqual(view, {
      uid: 'u0',
      namespace: 'ns',
      name: 'db-0',
      nodeName: 'n1',
      labels: { app: 'db' },
      annotations: { a: 'b' },
      owners: [{ kind: 'StatefulSet', name: 'db', uid: 'ss-1', controller: true }],
    });
    assert.deepEqual(await directory.pod({ namespace: 'ns', name: 'db-0' }), view, 'no UID asked: the cached one');
    assert.deepEqual(gets, []);
  });

  it('GETs a pod it has not seen, or one of another UID, and answers undefined for a pod of another UID', async () => {
    const { directory, gets, remote } = setup();
    directory.observePods({ kind: 'listed', objects: [pod('db-0', 'old')] });
    remote.set('ns/db-0', pod('db-0', 'new'));
    assert.equal((await directory.pod({ namespace: 'ns', name: 'db-0', uid: 'new' }))?.uid, 'new');
    assert.equal(await directory.pod({ namespace: 'ns', name: 'db-0', uid: 'older' }), undefined);
    assert.equal(await directory.pod({ namespace: 'ns', name: 'absent' }), undefined);
    assert.deepEqual(gets, ['pod ns/db-0', 'pod ns/db-0', 'pod ns/absent']);
  });

  it("keeps a StatefulSet's new pod when the old one's DELETED comes after it", async () => {
    const { directory, gets } = setup();
    directory.observePods({ kind: 'listed', objects: [pod('db-0', 'old')] });
    directory.observePods({ kind: 'added', object: pod('db-0', 'new') });
    directory.observePods({ kind: 'deleted', object: pod('db-0', 'old') });
    assert.equal((await directory.pod({ namespace: 'ns', name: 'db-0', uid: 'new' }))?.uid, 'new');
    directory.observePods({ kind: 'deleted', object: pod('db-0', 'new') });
    assert.equal(directory.status().pods, 0);
    assert.deepEqual(gets, []);
  });

  it('answers namespaces from the watch once listed, a GET before (kept until a listing replaces it)', async () => {
    const { directory, gets, remote } = setup();
    remote.set('team', { metadata: { name: 'team', labels: { tier: 'gold' } } });
    assert.deepEqual((await directory.namespace('team'))?.labels, { tier: 'gold' });
    assert.deepEqual((await directory.namespace('team'))?.labels, { tier: 'gold' });
    assert.deepEqual(gets, ['namespace team'], 'one GET, then kept');
    directory.observeNamespaces({
      kind: 'listed',
      objects: [{ metadata: { name: 'team', labels: { tier: 'silver' }, annotations: { 'warren.dev/pools': 'p' } } }],
    });
    assert.deepEqual(await directory.namespace('team'), {
      name: 'team',
      labels: { tier: 'silver' },
      annotations: { 'warren.dev/pools': 'p' },
    });
    remote.delete('team');
    directory.observeNamespaces({ kind: 'deleted', object: { metadata: { name: 'team' } } });
    assert.equal(await directory.namespace('team'), undefined, 'gone from the cluster: a GET answers 404');
    assert.equal(directory.status().namespacesListed, true);
  });

  it('skips objects without a UID, namespace or name', () => {
    assert.equal(podViewOf({ metadata: { namespace: 'ns', name: 'x' } }), undefined);
    assert.equal(podViewOf({ metadata: { uid: 'u', name: 'x' } }), undefined);
    assert.equal(podViewOf(null), undefined);
  });
});
