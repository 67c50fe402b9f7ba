/**
 * The agent's own requests to etcd, counted (src/store/etcd-tier/etcd-requests.ts, counted where they
 * leave in etcd-tier/client.ts) and shown (`warren_etcd_requests_total`, the rate in `warren status`
 * and `warren doctor`): each message is named by its kind; on a real etcd member, what the counter
 * says an idle two-tier store sent is what etcd says it received (its own gRPC counters), kind by
 * kind, and its rate while idle is its lease's keep-alives only, which doctor tells as they are.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { registerEtcdRequests } from '../../../src/agent/metrics/etcd-requests.ts';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { describeEtcdRate, etcdApiFindings } from '../../../src/cli/doctor/etcd-api-checks.ts';
import { requestRateLines } from '../../../src/cli/request-rate-lines.ts';
import { ManualClock, systemClock } from '../../../src/core/clock.ts';
import { EtcdRequestCounter, etcdRequestKindOf } from '../../../src/store/etcd-tier/etcd-requests.ts';
import { openEtcdTiered } from '../../../src/store/etcd-tier/tiered.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { etcdRequests } from '../../helpers/etcd-metrics.ts';
import { tempDir, waitFor } from '../../helpers/processes.ts';

const HOUR_MS = 3_600_000;

/** The gRPC method etcd counts each kind under. */
const METHOD_OF: Readonly<Record<string, string>> = {
  range: 'Range',
  put: 'Put',
  txn: 'Txn',
  delete: 'DeleteRange',
  'lease-grant': 'LeaseGrant',
  'lease-revoke': 'LeaseRevoke',
  'lease-keepalive': 'LeaseKeepAlive',
  'watch-create': 'Watch',
  'watch-cancel': 'Watch',
  'watch-progress': 'Watch',
  status: 'Status',
};

describe('a request to etcd', () => {
  it('is named by its kind: the method, and on the watch stream what the message asks', () => {
    assert.equal(etcdRequestKindOf('/etcdserverpb.KV/Range', {}), 'range');
    assert.equal(etcdRequestKindOf('/etcdserverpb.KV/Txn', {}), 'txn');
    assert.equal(etcdRequestKindOf('/etcdserverpb.KV/DeleteRange', {}), 'delete');
    assert.equal(etcdRequestKindOf('/etcdserverpb.Lease/LeaseGrant', { TTL: 15 }), 'lease-grant');
    assert.equal(etcdRequestKindOf('/etcdserverpb.Lease/LeaseKeepAlive', { ID: '1' }), 'lease-keepalive');
    assert.equal(etcdRequestKindOf('/etcdserverpb.Watch/Watch', { create_request: { key: 'a' } }), 'watch-create');
    assert.equal(etcdRequestKindOf('/etcdserverpb.Watch/Watch', { cancel_request: { watch_id: 1 } }), 'watch-cancel');
    assert.equal(etcdRequestKindOf('/etcdserverpb.Cluster/MemberList', {}), 'member-list');
  });

  it('is counted by kind since the start, and exposed as warren_etcd_requests_total{kind}', async () => {
    const counter = new EtcdRequestCounter(new ManualClock(0));
    const registry = new Registry();
    registerEtcdRequests(registry, counter);
    for (const kind of ['range', 'txn', 'txn', 'lease-keepalive']) counter.count(kind);
    const text = await registry.metrics();
    assert.match(text, /# TYPE warren_etcd_requests_total counter/);
    assert.match(text, /warren_etcd_requests_total\{kind="txn"\} 2/);
    assert.match(text, /warren_etcd_requests_total\{kind="range"\} 1/);
    // Read again at the next scrape: the same counts, not doubled.
    assert.match(await registry.metrics(), /kind="txn"\} 2\n/);
  });

  it('warns in doctor when an idle agent keeps reading etcd, and says ok when it only keeps its lease', () => {
    const clock = new ManualClock(0);
    const polling = new EtcdRequestCounter(clock);
    for (let i = 0; i < 6; i++) polling.count('range');
    for (let i = 0; i < 12; i++) polling.count('lease-keepalive');
    const quiet = new EtcdRequestCounter(clock);
    for (let i = 0; i < 12; i++) quiet.count('lease-keepalive');
    clock.advance(60_000);
    const [warned] = etcdApiFindings({ etcdApi: polling.rate() } as unknown as DoctorFacts);
    assert.equal(warned?.id, 'etcd-idle-reads');
    assert.equal(warned?.severity, 'warning');
    assert.match(warned?.detail ?? '', /Ranges while idle: 6\/min/);
    assert.deepEqual(
      etcdApiFindings({ etcdApi: quiet.rate() } as unknown as DoctorFacts).map((f) => [f.id, f.severity, f.title]),
      [['etcd-request-rate', 'ok', 'etcd requests: 12/min over the last 1 min (lease-keepalive 12, range 0)']],
    );
    assert.deepEqual(etcdApiFindings({} as DoctorFacts), []);
  });
});

describe('the requests of an idle store on a real etcd', () => {
  let etcd: EtcdCluster;
  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    await etcd?.stop();
  });

  it('are counted as etcd counts them, and while idle are its lease keep-alives only, as doctor shows', async () => {
    const endpoint = etcd.endpoints[0] as string;
    // The counter's own clock, apart from the store's (whose chores a step would run): a one-minute
    // window, which the start's requests leave when it is moved two minutes on.
    const clock = new ManualClock(0);
    const counter = new EtcdRequestCounter(clock, 1);
    const received = async () => (await etcdRequests(endpoint)).received;
    const before = await received();
    const store = await openEtcdTiered({
      local: new SqliteStore({ path: join(tempDir(), 'warren.db') }),
      node: 'q1',
      clock: systemClock,
      endpoints: etcd.endpoints,
      prefix: `/etcd-requests-${process.pid}/`,
      leaseSeconds: 3, // a keep-alive a second
      claimCheckMs: HOUR_MS,
      publishIntervalMs: 50,
      requests: counter,
    });
    let closed = false;
    try {
      await store.cluster.membership.announce('q1', { since: 1, version: 'test' });
      store.start();
      await waitFor('the identity and announcement followed', () =>
        store.etcd.membership.followed() ? true : undefined,
      );
      assert.ok((counter.totals().find((t) => t.kind === 'watch-create')?.count ?? 0) > 0, 'watches counted');
      const sent = () => new Map(counter.totals().map((t) => [t.kind, t.count]));
      const keptAlive = (since: Map<string, number>, n: number) =>
        waitFor(`${n} keep-alives`, () =>
          (sent().get('lease-keepalive') ?? 0) - (since.get('lease-keepalive') ?? 0) >= n ? true : undefined,
        );
      // Settled: the first publication tick (50 ms after the start) read this node's claims once.
      await keptAlive(sent(), 2);
      clock.advance(120_000);
      const start = sent();
      await keptAlive(start, 3);
      const idle = [...sent()].filter(([kind, n]) => n !== (start.get(kind) ?? 0));
      const keepalives = (sent().get('lease-keepalive') ?? 0) - (start.get('lease-keepalive') ?? 0);
      assert.deepEqual(
        idle.map(([kind]) => kind),
        ['lease-keepalive'],
        'idle: only the lease kept alive',
      );
      const rate = counter.rate();
      assert.deepEqual(rate.byKind, [{ kind: 'lease-keepalive', perMinute: keepalives }]);
      assert.equal(
        describeEtcdRate(rate),
        `${keepalives}/min over the last 1 min (lease-keepalive ${keepalives}, range 0)`,
      );
      assert.deepEqual(requestRateLines({ etcdApi: rate }), [`etcd api:    requests: ${describeEtcdRate(rate)}`]);
      assert.equal(etcdApiFindings({ etcdApi: rate } as unknown as DoctorFacts)[0]?.id, 'etcd-request-rate');
      await store.close();
      closed = true;
      // Everything sent since it opened, close included, by etcd's own count of what it received.
      const counted = new Map<string, number>();
      for (const { kind, count } of counter.totals()) {
        const method = METHOD_OF[kind];
        assert.ok(method !== undefined, `a kind this test knows: ${kind}`);
        counted.set(method, (counted.get(method) ?? 0) + count);
      }
      const total = [...counted.values()].reduce((a, b) => a + b, 0);
      const seen = await waitFor('etcd to have received every request', async () => {
        const now = await received();
        const delta = new Map<string, number>();
        for (const [method, n] of now)
          if (n - (before.get(method) ?? 0) > 0) delta.set(method, n - (before.get(method) ?? 0));
        return [...delta.values()].reduce((a, b) => a + b, 0) >= total ? delta : undefined;
      });
      assert.deepEqual(new Map([...seen].sort()), new Map([...counted].sort()));
    } finally {
      if (!closed) await store.close();
    }
  });
});
