/**
 * KubeCollectionWatch against the fake API server: one listing, then watches resumed from the
 * version reached and never a listing again but after 410 Gone; the copy and the changes told
 * across a relisting; selectors narrowing both; refused objects left out; nothing after close;
 * `opening` until the server answered a watch, `watching` only once it did.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock, systemClock } from '../../../src/core/clock.ts';
import { loadKubeConfig } from '../../../src/sources/kubernetes/kubeconfig.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import { KubeContinuity } from '../../../src/store/kubernetes/continuity.ts';
import { type CollectionChange, KubeCollectionWatch } from '../../../src/store/kubernetes/collection-watch.ts';
import { Resource, leaseKind } from '../../../src/store/kubernetes/resources.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';

const NS = 'cw-test';

interface Holder {
  readonly holder: string;
}

function lease(name: string, holder: string, labels: Record<string, string> = { kind: 'x' }) {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace: NS, labels },
    spec: { holderIdentity: holder },
  };
}

const decode = (object: unknown): Holder | undefined => {
  const holder = (object as { spec?: { holderIdentity?: unknown } }).spec?.holderIdentity;
  return typeof holder === 'string' && holder !== 'garbage' ? { holder } : undefined;
};

describe('KubeCollectionWatch', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  let leases: Resource;
  const watches: KubeCollectionWatch<Holder>[] = [];

  before(async () => {
    api = await startFakeKubeApi({ crds: [] });
    client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath) });
    leases = new Resource(client, leaseKind(NS));
  });
  after(async () => {
    for (const w of watches) w.close();
    client.close();
    await api.stop();
  });

  function watch(selectors: { labelSelector?: string; fieldSelector?: string } = {}, timeoutSeconds?: number) {
    const w = new KubeCollectionWatch<Holder>({
      resource: leases,
      what: 'the test leases',
      selectors,
      decode,
      clock: systemClock,
      ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }),
    });
    watches.push(w);
    return w;
  }

  /** A watch of `resource`'s leases labelled `labelSelector`, on a clock that never moves: only events end its waits. */
  function stillWatch(resource: Resource, labelSelector: string) {
    const w = new KubeCollectionWatch<Holder>({
      resource,
      what: 'the test leases',
      selectors: { labelSelector },
      decode,
      clock: new ManualClock(Date.now()),
    });
    watches.push(w);
    return w;
  }

  const leaseRequests = (verb: string, since: number) =>
    api.requests.slice(since).filter((r) => r.verb === verb && r.resource === 'leases');

  it('lists once, then learns every change from watches resumed where they ended, never listing again', async () => {
    await leases.create('make a', lease('a', 'n1'));
    const since = api.requests.length;
    const w = watch({ labelSelector: 'kind=x' }, 1);
    const changes: CollectionChange<Holder>[] = [];
    w.listen((c) => changes.push(c));
    w.start();
    await w.synced();
    assert.deepEqual(w.values(), [{ holder: 'n1' }]);
    await leases.create('make b', lease('b', 'n2'));
    await waitFor('b seen', () => w.get('b')?.holder === 'n2' || undefined);
    // The server ends each watch after 1 s; each is opened again from where it ended.
    await waitFor('three watches ended and opened again', () => w.status().reconnects >= 3 || undefined);
    await leases.create('make c', lease('c', 'n3'));
    await waitFor('c seen', () => w.get('c') !== undefined || undefined);
    assert.equal(leaseRequests('list', since).length, 1, 'one listing, the first');
    const watchesFrom = leaseRequests('watch', since).map((r) => r.query.resourceVersion);
    assert.ok(watchesFrom.length >= 4, `watches opened: ${watchesFrom.length}`);
    assert.ok(
      watchesFrom.every((v) => v !== undefined && v !== '0'),
      `every watch from the version the listing or the last watch reached: ${watchesFrom.join(', ')}`,
    );
    assert.deepEqual(
      changes.map((c) => `${c.type} ${c.name}`),
      ['added a', 'added b', 'added c'],
    );
  });

  it('lists again after 410 Gone and tells the changes it missed, each once', async () => {
    const w = watch({ labelSelector: 'kind=y' });
    await leases.create('make d', lease('d', 'n1', { kind: 'y' }));
    await leases.create('make e', lease('e', 'n1', { kind: 'y' }));
    const changes: string[] = [];
    w.listen((c) => changes.push(`${c.type} ${c.name}`));
    w.start();
    await w.synced();
    assert.deepEqual(changes.sort(), ['added d', 'added e']);
    changes.length = 0;
    // While no watch is open, d is deleted, e changed and f made; the history is compacted.
    api.expireNextWatch('status');
    api.deleteObject('leases', 'd', NS);
    const e = api.object('leases', 'e', NS);
    assert.ok(e);
    await leases.replace('change e', { ...lease('e', 'n9', { kind: 'y' }), metadata: { ...e.metadata } } as never);
    await leases.create('make f', lease('f', 'n1', { kind: 'y' }));
    api.compactHistory();
    api.endWatches();
    await waitFor(
      'relisted',
      () => (w.status().relists === 1 && w.get('f') !== undefined && w.get('d') === undefined) || undefined,
    );
    await waitFor('e changed', () => w.get('e')?.holder === 'n9' || undefined);
    assert.deepEqual(changes.sort(), ['added f', 'deleted d', 'modified e']);
  });

  it('narrows by field selector to one named object', async () => {
    await leases.create('make g', lease('g', 'n1', { kind: 'z' }));
    await leases.create('make h', lease('h', 'n1', { kind: 'z' }));
    const w = watch({ fieldSelector: 'metadata.name=h' });
    w.start();
    await w.synced();
    assert.deepEqual(
      w.values().map((v) => v.holder),
      ['n1'],
    );
    assert.equal(w.get('g'), undefined);
  });

  it('leaves out what decode refuses, and drops an object that becomes unusable', async () => {
    await leases.create('make i', lease('i', 'garbage', { kind: 'w' }));
    await leases.create('make j', lease('j', 'n1', { kind: 'w' }));
    const w = watch({ labelSelector: 'kind=w' });
    w.start();
    await w.synced();
    assert.equal(w.get('i'), undefined);
    assert.equal(w.status().refused, 1);
    const j = api.object('leases', 'j', NS);
    assert.ok(j);
    await leases.replace('spoil j', { ...lease('j', 'garbage', { kind: 'w' }), metadata: { ...j.metadata } } as never);
    await waitFor('j dropped', () => w.get('j') === undefined || undefined);
  });

  it('comes back with the API server: a watch waiting out its backoff opens as soon as another request is answered', async () => {
    // The soak (kubernetes seed 3839): after the API server was away a while, a node's watch of its
    // publications waited out a backoff grown to 30 s, and a publication deleted by hand meanwhile
    // was not written again for as long.
    // On a clock never advanced: the backoff ends only by the API server's return.
    const w = stillWatch(leases, 'kind=back');
    w.start();
    await w.synced();
    await waitFor('watching', () => w.status().state === 'watching' || undefined);
    await api.setUnavailable(true, '503');
    await waitFor('backing off', () => w.status().state === 'backing-off' || undefined);
    await api.setUnavailable(false);
    await leases.create('make back', lease('back', 'n9', { kind: 'back' })); // another request, answered
    await waitFor('watching again, the clock not moved', () => w.status().state === 'watching' || undefined);
    await waitFor('what was made meanwhile seen', () => (w.get('back')?.holder === 'n9' ? true : undefined));
  });

  it('never stays silent on the old store after the operator accepts an API server that lost its data: lists again at once', async () => {
    // The soak (kubernetes seed 3839, step 1166): after an API restore and the operator's accept, a
    // node's watch of its publications resumed from the version it had reached, which the restored
    // API server had not reached yet: silent, so a publication deleted by hand was never told gone,
    // and never written again.
    const continuity = new KubeContinuity('the fake API server');
    const kept = new Resource(client, leaseKind(NS), continuity.observer(true));
    const w = stillWatch(kept, 'kind=restored'); // on a clock never advanced: only the accept ends the silence
    await kept.create('make old', lease('old', 'n1', { kind: 'restored' }));
    const snapshot = api.snapshot();
    const changes: CollectionChange<Holder>[] = [];
    w.listen((c) => changes.push(c));
    w.start();
    await w.synced();
    for (const name of ['after1', 'after2', 'after3'])
      await kept.create(`make ${name}`, lease(name, 'n2', { kind: 'restored' }));
    await waitFor('the watch reached the newest', () => w.get('after3') !== undefined || undefined);
    api.restoreSnapshot(snapshot); // back to before the three; its watches end
    await waitFor('watching again', () => w.status().state === 'watching' || undefined);
    continuity.accept(); // the operator: the store as it is now
    await kept.create('make new', lease('new', 'n3', { kind: 'restored' })); // below the version reached
    await waitFor('the copy is the store accepted', () =>
      w.get('new')?.holder === 'n3' && w.get('after1') === undefined ? true : undefined,
    );
    assert.deepEqual(
      w
        .values()
        .map((h) => h.holder)
        .sort(),
      ['n1', 'n3'],
    );
    assert.deepEqual(
      changes
        .filter((c) => c.type === 'deleted')
        .map((c) => c.name)
        .sort(),
      ['after1', 'after2', 'after3'],
      'each told gone once',
    );
  });

  it('requests nothing after close', async () => {
    const w = watch({ labelSelector: 'kind=v' }, 1);
    w.start();
    await w.synced();
    w.close();
    const since = api.requests.length;
    await leases.create('make k', lease('k', 'n1', { kind: 'v' }));
    api.endWatches();
    // Another watch of the same kind proves time passed with the fake serving: the closed one stayed shut.
    const other = watch({ labelSelector: 'kind=v' });
    other.start();
    await other.synced();
    await waitFor('k seen by the other', () => other.get('k') !== undefined || undefined);
    assert.equal(leaseRequests('list', since).length, 1, 'only the other listed');
    assert.equal(w.status().state, 'closed');
  });

  it("says 'opening' until the server answered the watch, 'watching' once it did, and 'opening' again when it ended", async () => {
    const open: (() => void)[] = [];
    const ends: (() => void)[] = [];
    const held = {
      listAt: async () => ({ items: [], resourceVersion: '1' }),
      whenAccepted: () => () => undefined,
      watch: (...args: unknown[]) =>
        new Promise<string | undefined>((resolve) => {
          open.push(args[6] as () => void);
          ends.push(() => resolve(undefined));
        }),
    } as unknown as Resource;
    const w = new KubeCollectionWatch<Holder>({ resource: held, what: 'held watches', decode, clock: systemClock });
    watches.push(w);
    w.start();
    await w.synced();
    await waitFor('the watch asked for', () => open.length > 0 || undefined);
    assert.equal(w.status().state, 'opening', 'asked for, not answered: the server said nothing yet');
    open[0]?.();
    assert.equal(w.status().state, 'watching');
    ends[0]?.();
    await waitFor('the watch ended', () => (w.status().state === 'opening' ? true : undefined));
    w.close();
  });
});
