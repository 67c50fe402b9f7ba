/**
 * The agent's own Kubernetes API requests, counted (src/store/kubernetes/api-requests.ts): each
 * verb, resource and outcome; the rate over the last minutes on the injected clock; the metric's
 * exposition; doctor's finding on an idle agent that keeps LISTing; and a request to the fake API
 * server counted and attributed to its node by the User-Agent (issue 36).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { registerKubeApiRequests } from '../../../src/agent/metrics/kube-requests.ts';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { describeApiRate, kubeApiFindings } from '../../../src/cli/doctor/kube-api-checks.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import {
  ApiRequestCounter,
  kubeUserAgent,
  outcomeOf,
  requestKindOf,
} from '../../../src/store/kubernetes/api-requests.ts';
import { Resource, warrenKind } from '../../../src/store/kubernetes/resources.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import type { KubeObject } from '../../../src/store/kubernetes/objects.ts';
import { KubeContinuity } from '../../../src/store/kubernetes/continuity.ts';

describe('ApiRequestCounter', () => {
  it('names each request by verb and resource, as an audit log does', () => {
    const base = '/apis/warren.dev/v1alpha1';
    assert.deepEqual(requestKindOf('GET', `${base}/warrenblocks`), { verb: 'list', resource: 'warrenblocks' });
    assert.deepEqual(requestKindOf('GET', `${base}/warrenblocks`, true), { verb: 'watch', resource: 'warrenblocks' });
    assert.deepEqual(requestKindOf('GET', `${base}/warrenblocks/b1`), { verb: 'get', resource: 'warrenblocks' });
    assert.deepEqual(requestKindOf('POST', `${base}/warrenblocks`), { verb: 'create', resource: 'warrenblocks' });
    const leases = '/apis/coordination.k8s.io/v1/namespaces/warren/leases';
    assert.deepEqual(requestKindOf('PUT', `${leases}/n1`), { verb: 'update', resource: 'leases' });
    assert.deepEqual(requestKindOf('DELETE', `${leases}/n1`), { verb: 'delete', resource: 'leases' });
    assert.deepEqual(requestKindOf('PATCH', '/api/v1/namespaces/default/events/e1'), {
      verb: 'patch',
      resource: 'events',
    });
    assert.deepEqual(requestKindOf('GET', '/api/v1/pods?fieldSelector=x'), { verb: 'list', resource: 'pods' });
    assert.deepEqual(requestKindOf('GET', '/api/v1/namespaces'), { verb: 'list', resource: 'namespaces' });
    assert.deepEqual(requestKindOf('GET', '/api/v1/namespaces/kube-system'), { verb: 'get', resource: 'namespaces' });
    assert.deepEqual(requestKindOf('GET', '/prefix/api/v1/nodes/n1'), { verb: 'get', resource: 'nodes' });
    assert.deepEqual(requestKindOf('GET', '/apis/k8s.cni.cncf.io/v1alpha1'), { verb: 'get', resource: 'discovery' });
  });

  it('classes each outcome: 2xx, 404, 409, 410, the other 4xx, 5xx, and no answer', () => {
    assert.deepEqual([200, 201, 404, 409, 410, 403, 422, 500, 503, undefined].map(outcomeOf), [
      '2xx',
      '2xx',
      '404',
      '409',
      '410',
      '4xx',
      '4xx',
      '5xx',
      '5xx',
      'unreachable',
    ]);
  });

  it('counts every verb, resource and code since the start', () => {
    const counter = new ApiRequestCounter(new ManualClock(0));
    counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
    counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
    counter.count({ verb: 'create', resource: 'leases' }, 409);
    counter.countRequest('GET', '/api/v1/pods', true, undefined);
    const totals = counter.totals().sort((a, b) => a.resource.localeCompare(b.resource));
    assert.deepEqual(totals, [
      { verb: 'create', resource: 'leases', code: '409', count: 1 },
      { verb: 'watch', resource: 'pods', code: 'unreachable', count: 1 },
      { verb: 'list', resource: 'warrenblocks', code: '2xx', count: 2 },
    ]);
  });

  it('gives the rate over the last ten minutes on the clock, forgetting older minutes', () => {
    const clock = new ManualClock(0);
    const counter = new ApiRequestCounter(clock, 10);
    // Twenty minutes of one LIST every 10 s and one Lease update a minute.
    for (let second = 0; second < 20 * 60; second += 10) {
      counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
      if (second % 60 === 0) counter.count({ verb: 'update', resource: 'leases' }, 200);
      clock.advance(10_000);
    }
    const rate = counter.rate();
    assert.equal(rate.minutes, 10);
    assert.equal(rate.byVerb.list, 6);
    assert.equal(rate.byVerb.update, 1);
    assert.deepEqual(rate.byKind[0], { verb: 'list', resource: 'warrenblocks', perMinute: 6 });
    // Half a minute on: half of the oldest minute has left the window, half a new one came in.
    for (let i = 0; i < 3; i++) {
      counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
      clock.advance(10_000);
    }
    assert.equal(counter.rate().byVerb.list, 6);
    // An hour of silence: nothing left in the window, and the ring holds no more than its minutes.
    clock.advance(60 * 60_000);
    assert.deepEqual(counter.rate().byKind, []);
    assert.equal(counter.rate().perMinute, 0);
  });

  it("takes a young agent's rate over its life, not the whole window", () => {
    const clock = new ManualClock(0);
    const counter = new ApiRequestCounter(clock, 10);
    for (let i = 0; i < 6; i++) counter.count({ verb: 'list', resource: 'warrenranges' }, 200);
    clock.advance(2 * 60_000);
    assert.equal(counter.rate().perMinute, 3);
    assert.equal(counter.rate().minutes, 2);
  });

  it('is exposed as warren_kube_api_requests_total{verb,resource,code}', async () => {
    const counter = new ApiRequestCounter(new ManualClock(0));
    const registry = new Registry();
    registerKubeApiRequests(registry, counter);
    counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
    counter.count({ verb: 'create', resource: 'leases' }, 409);
    counter.count({ verb: 'create', resource: 'leases' }, 409);
    const text = await registry.metrics();
    assert.match(text, /# TYPE warren_kube_api_requests_total counter/);
    assert.match(text, /warren_kube_api_requests_total\{verb="list",resource="warrenblocks",code="2xx"\} 1/);
    assert.match(text, /warren_kube_api_requests_total\{verb="create",resource="leases",code="409"\} 2/);
    // Read again at the next scrape: the same counts, not doubled.
    assert.match(await registry.metrics(), /code="409"\} 2\n/);
  });
});

describe("doctor's view of the request rate", () => {
  function factsWith(counter: ApiRequestCounter): DoctorFacts {
    return { kubeApi: counter.rate() } as unknown as DoctorFacts;
  }

  it('warns, naming the resource, when an idle agent keeps LISTing it', () => {
    const clock = new ManualClock(0);
    const counter = new ApiRequestCounter(clock);
    for (let i = 0; i < 18; i++) counter.count({ verb: 'list', resource: 'warrenblocks' }, 200);
    for (let i = 0; i < 6; i++) counter.count({ verb: 'update', resource: 'leases' }, 200);
    counter.count({ verb: 'watch', resource: 'pods' }, 200);
    clock.advance(60_000);
    const [finding] = kubeApiFindings(factsWith(counter));
    assert.equal(finding?.id, 'kube-api-idle-lists');
    assert.equal(finding?.severity, 'warning');
    assert.match(finding?.title ?? '', /warrenblocks/);
    assert.match(finding?.detail ?? '', /warrenblocks 18\/min/);
    assert.equal(describeApiRate(counter.rate()), '25/min over the last 1 min (list 18, watch 1, update 6)');
  });

  it('says ok when the agent watches instead, and is silent without a rate', () => {
    const clock = new ManualClock(0);
    const counter = new ApiRequestCounter(clock);
    counter.count({ verb: 'watch', resource: 'warrenblocks' }, 200);
    clock.advance(60_000);
    assert.deepEqual(
      kubeApiFindings(factsWith(counter)).map((f) => [f.id, f.severity]),
      [['kube-api-rate', 'ok']],
    );
    assert.deepEqual(kubeApiFindings({} as DoctorFacts), []);
  });
});

describe('a request to the fake API server', () => {
  let fake: FakeKubeApi;
  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    await fake.stop();
  });

  it('is counted once and carries the User-Agent that names the node', async () => {
    const config = new KubeConfig();
    config.loadFromFile(fake.kubeconfigPath);
    const counter = new ApiRequestCounter(new ManualClock(0));
    const userAgent = kubeUserAgent('9.9.9', 'node-a');
    const api = await KubeApiClient.open({ kubeConfig: config, requests: counter, userAgent });
    try {
      fake.clearRequests();
      const blocks = new Resource(api, warrenKind('warrenblocks'));
      await blocks.list('list blocks', '', 10);
      assert.equal(await blocks.get('read a block', 'none'), undefined);
      assert.deepEqual(
        counter.totals().sort((a, b) => a.verb.localeCompare(b.verb)),
        [
          { verb: 'get', resource: 'warrenblocks', code: '404', count: 1 },
          { verb: 'list', resource: 'warrenblocks', code: '2xx', count: 1 },
        ],
      );
      assert.deepEqual(
        fake.requests.map((r) => r.userAgent),
        ['warren/9.9.9 (node node-a)', 'warren/9.9.9 (node node-a)'],
      );
    } finally {
      api.close();
    }
  });
  it('never reads a PUT that changed nothing as data gone backwards (its answer keeps the old resourceVersion)', async () => {
    // Found with publications written at claim time (issue 38): a block published again exactly as
    // it stood answered its old resourceVersion, and the store halted as if its etcd was restored.
    const config = new KubeConfig();
    config.loadFromFile(fake.kubeconfigPath);
    const api = await KubeApiClient.open({ kubeConfig: config });
    try {
      const continuity = new KubeContinuity('the fake');
      const blocks = new Resource(api, warrenKind('warrenblocks'), continuity.observer(true));
      const block = (name: string): KubeObject => ({
        apiVersion: 'warren.dev/v1alpha1',
        kind: 'WarrenBlock',
        metadata: { name },
        spec: { node: 'n1', pool: 'p', cidr: '10.0.0.0/28' },
      });
      const made = await blocks.create('create a block', block('noop-put'));
      assert.equal(made.kind, 'created');
      const object = made.kind === 'created' ? (made.object as KubeObject) : undefined;
      for (let i = 0; i < 3; i++) await blocks.create('create another block', block(`noop-put-${i}`)); // it moves on
      await blocks.list('list blocks', '', 10); // and this agent has seen it move
      const again = await blocks.replace('write the block as it is', object as KubeObject);
      assert.equal(again.kind, 'replaced');
      assert.equal(continuity.halted(), undefined, continuity.halted()?.message);
    } finally {
      api.close();
    }
  });
});
