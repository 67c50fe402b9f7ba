/**
 * The pod source against the fake Kubernetes API: only this node's pods, reduced to PodFacts; a
 * listing as the explicit start (and after every relist, the truth); pods deleted gracefully or by
 * force, and pods that finish, each `gone` once. Backoff runs on a ManualClock; waits are polls
 * with a deadline; each test starts and stops its own server.
 */
import assert from 'node:assert/strict';
import { type TestContext, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../../src/core/clock.ts';
import {
  MIRROR_ANNOTATION,
  type PodFact,
  type PodItem,
  PodSource,
  podFactOf,
} from '../../../src/sources/kubernetes/pod-source.ts';
import {
  type FakeKubeApi,
  type FakeKubeApiOptions,
  type KubeObject,
  startFakeKubeApi,
} from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

const NODE = 'node-1';

function pod(
  name: string,
  options: { node?: string; phase?: string; annotations?: Record<string, string> } = {},
): KubeObject {
  return {
    metadata: {
      name,
      namespace: 'default',
      ...(options.annotations === undefined ? {} : { annotations: options.annotations }),
    },
    spec: { nodeName: options.node ?? NODE, containers: [] },
    status: { phase: options.phase ?? 'Running' },
  };
}

interface Running {
  readonly api: FakeKubeApi;
  readonly clock: ManualClock;
  readonly source: PodSource;
  readonly items: PodItem[];
}

async function start(
  t: TestContext,
  options: { fake?: FakeKubeApiOptions; seed?: (api: FakeKubeApi) => void } = {},
): Promise<Running> {
  const api = await startFakeKubeApi(options.fake);
  options.seed?.(api);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(api.kubeconfigPath);
  const clock = new ManualClock(Date.now());
  const source = new PodSource({ kubeConfig, node: NODE, clock, logger: silentLogger });
  const abort = new AbortController();
  const items: PodItem[] = [];
  const done = (async () => {
    for await (const item of source.events(abort.signal)) items.push(item);
  })();
  t.after(async () => {
    abort.abort();
    await done;
    await api.stop();
  });
  return { api, clock, source, items };
}

/** What the consumer saw, one word each: "listed:a,b", "pod:c", "gone:d:deleted". */
function seen(items: readonly PodItem[]): string[] {
  return items.map((item) => {
    switch (item.kind) {
      case 'listed':
        return `listed:${[...item.pods.values()]
          .map((p) => p.name)
          .sort()
          .join(',')}`;
      case 'pod':
        return `pod:${item.pod.name}${item.pod.deleting ? ':deleting' : ''}`;
      case 'gone':
        return `gone:${item.pod.name}:${item.because}`;
      default: {
        const never: never = item;
        throw new Error(`unexpected ${JSON.stringify(never)}`);
      }
    }
  });
}

async function until(what: string, probe: () => boolean): Promise<void> {
  await waitFor(what, () => (probe() ? true : undefined));
}

async function watching(r: Running): Promise<void> {
  await until('the watch', () => r.api.watchCount('pods') === 1 && r.source.status().state === 'watching');
}

const uidOf = (api: FakeKubeApi, name: string): string => api.getPod('default', name)?.metadata.uid as string;

describe('PodSource', () => {
  it("lists this node's pods as PodFacts, first, and never shows another node's pods", async (t) => {
    const r = await start(t, {
      seed: (api) => {
        api.createPod(pod('web'));
        api.createPod(pod('job', { phase: 'Succeeded' }));
        api.createPod(pod('kube-proxy-node-1', { annotations: { [MIRROR_ANNOTATION]: 'static-uid-1' } }));
        api.createPod(pod('leaving'));
        api.deletePod('default', 'leaving');
        api.createPod(pod('theirs', { node: 'node-2' }));
        api.createPod({ ...pod('no-uid'), metadata: { name: 'no-uid', namespace: 'default', uid: '' } });
      },
    });
    await watching(r);
    const [listed] = r.items;
    assert.equal(listed?.kind, 'listed');
    if (listed?.kind !== 'listed') return;
    const byName = new Map([...listed.pods.values()].map((p) => [p.name, p]));
    assert.deepEqual([...byName.keys()].sort(), ['job', 'kube-proxy-node-1', 'leaving', 'web']);
    assert.deepEqual(byName.get('web'), {
      uid: uidOf(r.api, 'web'),
      namespace: 'default',
      name: 'web',
      phase: 'Running',
      terminal: false,
      deleting: false,
    });
    assert.equal(byName.get('job')?.terminal, true);
    assert.equal(byName.get('leaving')?.deleting, true);
    assert.equal(byName.get('kube-proxy-node-1')?.mirrorOf, 'static-uid-1');
    for (const [uid, fact] of listed.pods) assert.equal(uid, fact.uid);
    assert.deepEqual([...r.source.live().keys()].sort(), [...listed.pods.keys()].sort());
    assert.equal(r.source.status().malformed, 1, 'the pod without a UID is skipped and counted');

    // Another node's pods come and go unseen; this node's next pod comes right after the listing.
    r.api.createPod(pod('theirs-2', { node: 'node-2' }));
    r.api.updatePod('default', 'theirs', (p) => (p.metadata.labels = { x: 'y' }));
    r.api.setPodPhase('default', 'theirs', 'Succeeded');
    r.api.deletePod('default', 'theirs', { force: true });
    r.api.createPod(pod('mine'));
    await until('mine', () => r.items.length === 2);
    assert.deepEqual(seen(r.items), ['listed:job,kube-proxy-node-1,leaving,web', 'pod:mine']);
    const s = r.source.status();
    assert.equal(s.node, NODE);
    assert.equal(s.pods, 5);
    assert.equal(s.state, 'watching');
  });

  it('says a pod deleted gracefully is deleting, then gone when the kubelet removes it; a force-deleted pod is gone at once', async (t) => {
    const r = await start(t, { seed: (api) => ['graceful', 'forced'].forEach((name) => api.createPod(pod(name))) });
    await watching(r);
    const graceful = uidOf(r.api, 'graceful');
    r.api.deletePod('default', 'graceful');
    await until('the deletion mark', () => r.items.length === 2);
    assert.equal(r.source.live().get(graceful)?.deleting, true);
    r.api.deletePod('default', 'graceful');
    r.api.deletePod('default', 'forced', { force: true });
    await until('both gone', () => r.items.length === 4);
    assert.deepEqual(seen(r.items), [
      'listed:forced,graceful',
      'pod:graceful:deleting',
      'gone:graceful:deleted',
      'gone:forced:deleted',
    ]);
    const gone = r.items[2];
    assert.equal(gone?.kind === 'gone' ? gone.pod.uid : undefined, graceful);
    assert.equal(r.source.live().size, 0);
  });

  it('says a pod that finishes is gone once: not again on its later changes, nor on its deletion', async (t) => {
    const r = await start(t, { seed: (api) => ['ok', 'bad'].forEach((name) => api.createPod(pod(name))) });
    await watching(r);
    r.api.setPodPhase('default', 'ok', 'Succeeded');
    r.api.updatePod('default', 'ok', (p) => (p.metadata.labels = { finished: 'yes' }));
    r.api.setPodPhase('default', 'bad', 'Failed');
    r.api.deletePod('default', 'ok');
    r.api.deletePod('default', 'bad');
    r.api.createPod(pod('marker'));
    await until('the marker', () => r.items.some((i) => i.kind === 'pod' && i.pod.name === 'marker'));
    assert.deepEqual(seen(r.items), ['listed:bad,ok', 'gone:ok:succeeded', 'gone:bad:failed', 'pod:marker']);
    assert.deepEqual(
      [...r.source.live().values()].map((p) => p.name),
      ['marker'],
    );
  });

  it('does not say gone for a pod the listing already showed finished', async (t) => {
    const r = await start(t, { seed: (api) => api.createPod(pod('done', { phase: 'Failed' })) });
    await watching(r);
    r.api.updatePod('default', 'done', (p) => (p.metadata.labels = { seen: 'again' }));
    r.api.deletePod('default', 'done');
    r.api.createPod(pod('marker'));
    await until('the marker', () => r.items.length === 2);
    assert.deepEqual(seen(r.items), ['listed:done', 'pod:marker']);
  });

  it('after 410 Gone, lists again: the new listing is the truth, and live() follows it', async (t) => {
    const r = await start(t, { seed: (api) => ['stays', 'goes'].forEach((name) => api.createPod(pod(name))) });
    await watching(r);
    r.api.createPod(pod('moves-rv'));
    await until('moves-rv', () => r.items.length === 2);
    r.api.breakWatches();
    await until('the backoff', () => r.source.status().state === 'backing-off');
    r.api.deletePod('default', 'goes', { force: true });
    r.api.createPod(pod('new'));
    r.api.compactHistory();
    r.clock.advance(1_000);
    await until('the second listing', () => r.items.length === 3);
    assert.deepEqual(seen(r.items), ['listed:goes,stays', 'pod:moves-rv', 'listed:moves-rv,new,stays']);
    assert.deepEqual([...r.source.live().values()].map((p: PodFact) => p.name).sort(), ['moves-rv', 'new', 'stays']);
    assert.equal(r.source.status().relists, 1);
  });
});

describe('podFactOf', () => {
  it('reads what a release needs, and refuses objects without a UID, namespace or name', () => {
    const base = { metadata: { uid: 'u', namespace: 'ns', name: 'n' } };
    assert.deepEqual(podFactOf(base), {
      uid: 'u',
      namespace: 'ns',
      name: 'n',
      phase: '',
      terminal: false,
      deleting: false,
    });
    assert.deepEqual(
      podFactOf({
        ...base,
        status: { phase: 'Failed' },
        metadata: {
          ...base.metadata,
          deletionTimestamp: '2026-01-01T00:00:00Z',
          annotations: { [MIRROR_ANNOTATION]: 'h' },
        },
      }),
      {
        uid: 'u',
        namespace: 'ns',
        name: 'n',
        phase: 'Failed',
        terminal: true,
        deleting: true,
        mirrorOf: 'h',
      },
    );
    for (const bad of [
      null,
      undefined,
      'x',
      {},
      { metadata: { uid: 'u', namespace: 'ns' } },
      { metadata: { uid: '', namespace: 'ns', name: 'n' } },
      { metadata: { uid: 1, namespace: 'ns', name: 'n' } },
    ]) {
      assert.equal(podFactOf(bad), undefined, JSON.stringify(bad));
    }
  });
});
