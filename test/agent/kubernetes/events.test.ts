/**
 * Events on the pod, sent to the fake API server (real wire, TLS, bearer token): repeats
 * aggregated into one Event by PATCH, a burst limited, refusals (403, 422) reported and never
 * retried, a missing permission reported until an Event is accepted again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Writable } from 'node:stream';
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { CoreApi } from '../../../src/sources/kubernetes/core-api.ts';
import { OnDemandClient } from '../../../src/sources/kubernetes/on-demand-client.ts';
import { pino } from 'pino';
import { ClusterEvents, nodeInvolved, podInvolved } from '../../../src/agent/kubernetes/events.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { flush } from '../../helpers/event-loop.ts';
import { silentLogger } from '../../helpers/logger.ts';

describe('Events on the pod', () => {
  let api: FakeKubeApi;
  let core: CoreApi;
  let client: OnDemandClient;
  const pod = podInvolved({ uid: 'u-1', namespace: 'default', name: 'web-0' });

  before(async () => {
    api = await startFakeKubeApi();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    client = OnDemandClient.of(kc);
    core = new CoreApi(client);
  });
  after(async () => {
    client?.close();
    await api?.stop();
  });

  const events = (clock: ManualClock, over: { burst?: number; perMinute?: number } = {}) =>
    new ClusterEvents({ api: core, node: 'n1', clock, logger: silentLogger, ...over });

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
    for (let i = 0; i < 5; i++)
      await e.record(podInvolved({ uid: `b-${i}`, namespace: 'default', name: `b-${i}` }), 'Normal', 'R', `m${i}`);
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

  /** A logger whose warn lines (JSON) are kept. */
  const recording = () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    return { lines, logger: pino({ level: 'warn' }, sink) };
  };

  it('logs the missing permission by name once, for an operator reading the log', async () => {
    const { lines, logger } = recording();
    const e = new ClusterEvents({ api: core, node: 'n1', clock: new ManualClock(0), logger });
    api.forbid('create', 'events');
    try {
      for (let i = 0; i < 3; i++) await e.record(pod, 'Normal', 'IPAddressGarbageCollected', `log ${i}`);
    } finally {
      api.allow('create', 'events');
    }
    await flush();
    const refusals = lines.filter((l) => l.missingPermission !== undefined);
    assert.equal(refusals.length, 1, JSON.stringify(lines));
    assert.equal(refusals[0]?.missingPermission, 'create events');
    assert.match(String(refusals[0]?.msg), /may not create events/);
  });

  it('stops reporting a missing permission once an Event is accepted with that verb again (the role fixed, no restart)', async () => {
    const clock = new ManualClock(0);
    const e = events(clock);
    const other = podInvolved({ uid: 'u-fixed', namespace: 'default', name: 'fixed-0' });
    api.forbid('create', 'events');
    try {
      await e.record(other, 'Normal', 'IPAddressGarbageCollected', 'refused');
    } finally {
      api.allow('create', 'events');
    }
    assert.equal(e.status().forbidden, 'create events');
    await e.record(other, 'Normal', 'IPAddressGarbageCollected', 'accepted');
    assert.equal(e.status().forbidden, undefined, 'create accepted: the refusal is over');
    // The same for patch: the repeat of an Event sent is a PATCH.
    api.forbid('patch', 'events');
    try {
      await e.record(other, 'Normal', 'IPAddressGarbageCollected', 'accepted');
    } finally {
      api.allow('patch', 'events');
    }
    assert.equal(e.status().forbidden, 'patch events');
    await e.record(other, 'Normal', 'IPAddressGarbageCollected', 'accepted');
    assert.equal(e.status().forbidden, undefined, 'patch accepted: the refusal is over');
    assert.equal(e.status().refused, 2);
  });

  it('does not take a 403 for a namespace being deleted for a missing permission', async () => {
    // The API server's NamespaceLifecycle answer: 403 Forbidden with the cause NamespaceTerminating.
    api.terminateNamespace('shop');
    const e = new ClusterEvents({ api: core, node: 'n1', clock: new ManualClock(0), logger: silentLogger });
    await e.record(
      podInvolved({ uid: 'u-t', namespace: 'shop', name: 'web-1' }),
      'Normal',
      'IPAddressGarbageCollected',
      'x',
    );
    assert.equal(e.status().refused, 1);
    assert.equal(e.status().forbidden, undefined);
    assert.match(e.status().lastError ?? '', /being terminated/);
  });

  /** An API whose creates are refused with a 403 Status: wordings the fake does not give. */
  const refusingWith = (status: { message: string; details: object }) => {
    const refusal = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403 };
    const body = JSON.stringify({ ...refusal, ...status });
    return {
      createNamespacedEvent: async () => {
        throw new ApiException(403, 'Forbidden', body, {});
      },
      patchNamespacedEvent: async () => {
        throw new Error('not called');
      },
    } as unknown as Pick<CoreApi, 'createNamespacedEvent' | 'patchNamespacedEvent'>;
  };
  const shop = podInvolved({ uid: 'u-w', namespace: 'shop', name: 'web-1' });

  it('knows a namespace being deleted by its Status cause, in whatever words the message puts it', async () => {
    const cause = { reason: 'NamespaceTerminating', message: 'shop is going away', field: 'metadata.namespace' };
    const refusing = refusingWith({
      message: 'events "web-1.1" is forbidden: namespace shop is going away',
      details: { kind: 'events', causes: [cause] },
    });
    const e = new ClusterEvents({ api: refusing, node: 'n1', clock: new ManualClock(0), logger: silentLogger });
    await e.record(shop, 'Normal', 'IPAddressGarbageCollected', 'x');
    assert.equal(e.status().refused, 1);
    assert.equal(e.status().forbidden, undefined, 'nothing is missing from the role');
  });

  it('does not take a 403 that merely says "because it is being terminated" for a deleted namespace', async () => {
    const refusing = refusingWith({
      message:
        'events is forbidden: User "x" cannot create resource "events" in API group "" in the namespace "shop" ' +
        '(its binding is gone because it is being terminated)',
      details: { kind: 'events' },
    });
    const e = new ClusterEvents({ api: refusing, node: 'n1', clock: new ManualClock(0), logger: silentLogger });
    await e.record(shop, 'Normal', 'IPAddressGarbageCollected', 'x');
    assert.equal(e.status().forbidden, 'create events', 'without the cause it is a missing permission');
  });
});
