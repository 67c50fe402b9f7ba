/**
 * Events on the pod, sent to the fake API server (real wire, TLS, bearer token): repeats
 * aggregated into one Event by PATCH, a burst limited, refusals (403, 422) reported and never
 * retried.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { ClusterEvents, nodeInvolved, podInvolved } from '../../src/agent/kubernetes-events.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';

describe('Events on the pod', () => {
  let api: FakeKubeApi;
  let core: CoreV1Api;
  const pod = podInvolved({ uid: 'u-1', namespace: 'default', name: 'web-0' });

  before(async () => {
    api = await startFakeKubeApi();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
  });
  after(async () => api?.stop());

  const events = (clock: ManualClock, over: { burst?: number; perMinute?: number } = {}) => new ClusterEvents({ api: core, node: 'n1', clock, logger: pino({ level: 'silent' }), ...over });

  it('sends one Event and raises its count for a repeat, by merge PATCH, never a second Event', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
    const e = events(clock);
    await e.record(pod, 'Normal', 'IPAddressGarbageCollected', 'released 10.0.0.2: sandbox deleted');
    clock.advance(5_000);
    await e.record(pod, 'Normal', 'IPAddressGarbageCollected', 'released 10.0.0.2: sandbox deleted');
    const sent = api.listEvents('default').filter((x) => (x.involvedObject as { uid?: string }).uid === 'u-1');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]?.count, 2);
    assert.equal(sent[0]?.lastTimestamp, '2026-11-22T10:00:05Z');
    assert.deepEqual(sent[0]?.source, { component: 'warren', host: 'n1' });
    const patch = api.requests.find((r) => r.verb === 'patch' && r.resource === 'events');
    assert.equal(patch?.contentType, 'application/merge-patch+json');
    assert.deepEqual(e.status(), { sent: 1, aggregated: 1, dropped: 0, refused: 0 });
  });

  it('limits a burst: past it, Events are dropped and counted, and the bucket refills with time', async () => {
    const clock = new ManualClock(0);
    const e = events(clock, { burst: 3, perMinute: 6 });
    for (let i = 0; i < 5; i++) await e.record(podInvolved({ uid: `b-${i}`, namespace: 'default', name: `b-${i}` }), 'Normal', 'R', `m${i}`);
    assert.equal(e.status().sent, 3);
    assert.equal(e.status().dropped, 2);
    clock.advance(10_000);
    await e.record(podInvolved({ uid: 'b-late', namespace: 'default', name: 'b-late' }), 'Normal', 'R', 'late');
    assert.equal(e.status().sent, 4);
  });

  it('reports a 403 with the permission it lacks and does not retry it; a 422 is refused the same way', async () => {
    const clock = new ManualClock(0);
    const e = events(clock);
    api.forbid('create', 'events');
    api.clearRequests();
    try {
      await e.record(pod, 'Warning', 'IPAddressGarbageCollectionFailed', 'could not');
    } finally {
      api.allow('create', 'events');
    }
    assert.equal(api.requests.filter((r) => r.verb === 'create').length, 1, 'one attempt, no retry');
    assert.equal(e.status().refused, 1);
    assert.match(e.status().forbidden ?? '', /create events/);
    // An Event about a Node in a namespace that does not match what the fake requires of involvedObject.
    await e.record({ ...nodeInvolved('gone-node'), namespace: 'default', kind: 'Node', name: '' }, 'Normal', 'R', 'x');
    assert.equal(e.status().refused, 2);
  });
});
