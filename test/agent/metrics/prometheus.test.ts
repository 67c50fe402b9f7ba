/**
 * Warren's metrics in process, fed by the real CNI service over a SQLite store: the figures a
 * scrape reads, the exposition parsed by a Prometheus text-format parser, and cardinality bounded
 * whatever the callers send — ten thousand containers add no series, and networks past the bound
 * fold into `_other` (adding up, never dropped).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { MeasuredStore } from '../../../src/agent/metrics/measured-store.ts';
import { AgentMetrics } from '../../../src/agent/metrics/prometheus.ts';
import { BoundedLabel, OTHER } from '../../../src/agent/metrics/labels.ts';
import { ReleaseHistory } from '../../../src/agent/metrics/release-history.ts';
import { fanOut } from '../../../src/agent/metrics/telemetry.ts';
import { histogramCount, parseExposition, sample, seriesCount } from '../../helpers/prometheus.ts';
import { tempDir } from '../../helpers/processes.ts';

function setup(maxLabelValues?: number) {
  const clock = new ManualClock(1_000_000);
  const sqlite = new SqliteStore({ path: join(tempDir('warren-metrics-'), 'warren.db'), synchronous: 'NORMAL' });
  let pending = 0;
  const metrics = new AgentMetrics({
    version: '9.9.9',
    processMetrics: false,
    ...(maxLabelValues === undefined ? {} : { maxLabelValues }),
    readings: {
      pools: async () =>
        (await sqlite.ledgers()).map((p) => ({
          pool: p.ledger,
          allocated: p.allocated,
          resting: p.resting,
          ...(p.description === undefined ? {} : { capacity: Number(p.description.capacity) }),
        })),
      journal: () => ({ pending, setAside: 0 }),
      queueDepth: () => ({ journal: pending }),
      ready: async () => true,
    },
  });
  const history = new ReleaseHistory(clock, 5);
  const telemetry = fanOut(history, metrics);
  const store = new MeasuredStore(sqlite, telemetry);
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const service = new CniService({ allocator, readiness: async () => undefined, clock, gcGraceMs: 0, telemetry });
  return { clock, metrics, history, service, setPending: (n: number) => (pending = n), close: () => sqlite.close() };
}

const config = (name = 'wnet', range = '10.80.0.0/16') => ({
  cniVersion: '1.1.0',
  name,
  ipam: { type: 'warren', range },
});
const call = (service: CniService, command: string, containerID: string, cfg: unknown = config()) =>
  service.handle({ command, containerID, netns: `/var/run/netns/${containerID}`, ifname: 'eth0', config: cfg });

describe('AgentMetrics', () => {
  it('keeps the same series with 10,000 containers as with 10: no container ID, address or pod becomes a label', async () => {
    const { metrics, service, close } = setup();
    try {
      for (let i = 0; i < 10; i++) assert.equal((await call(service, 'ADD', `c-${i}`)).kind, 'result');
      for (let i = 0; i < 10; i += 2) assert.equal((await call(service, 'DEL', `c-${i}`)).kind, 'silent');
      const few = parseExposition(await metrics.exposition());
      for (let i = 10; i < 10_000; i++) assert.equal((await call(service, 'ADD', `c-${i}`)).kind, 'result');
      for (let i = 10; i < 10_000; i += 2) assert.equal((await call(service, 'DEL', `c-${i}`)).kind, 'silent');
      const text = await metrics.exposition();
      const many = parseExposition(text);
      assert.equal(seriesCount(many), seriesCount(few));
      assert.ok(seriesCount(many) < 200, `${seriesCount(many)} series`);
      assert.ok(!text.includes('c-9999'), 'no container ID in the exposition');
      assert.equal(sample(many, 'warren_allocations_total', { network: 'wnet' }), 10_000);
      assert.equal(sample(many, 'warren_releases_total', { source: 'cni-del' }), 5_000);
      assert.equal(sample(many, 'warren_pool_allocated_addresses', { pool: '10.80.0.0/16' }), 5_000);
      assert.equal(sample(many, 'warren_pool_capacity_addresses', { pool: '10.80.0.0/16' }), 65_534);
    } finally {
      await close();
    }
  });

  it('folds networks and pools past the bound into _other, where they still add up', async () => {
    const { metrics, service, close } = setup(3);
    try {
      for (let i = 0; i < 6; i++)
        assert.equal((await call(service, 'ADD', `c-${i}`, config(`net-${i}`, `10.90.${i}.0/24`))).kind, 'result');
      const families = parseExposition(await metrics.exposition());
      for (const i of [0, 1, 2]) assert.equal(sample(families, 'warren_allocations_total', { network: `net-${i}` }), 1);
      assert.equal(sample(families, 'warren_allocations_total', { network: OTHER }), 3);
      assert.equal(sample(families, 'warren_pool_allocated_addresses', { pool: OTHER }), 3);
      assert.equal(sample(families, 'warren_pool_capacity_addresses', { pool: OTHER }), 3 * 254);
    } finally {
      await close();
    }
  });

  it("labels CNI calls by command and outcome code, and a command that is none of the spec's as invalid", async () => {
    const { metrics, service, close } = setup();
    try {
      await call(service, 'ADD', 'a');
      await call(service, 'ADD', 'b', config('wnet', '10.0.0.0/33'));
      await call(service, 'CHECK', 'a');
      await call(service, `BOGUS-${'x'.repeat(100)}`, 'a');
      const families = parseExposition(await metrics.exposition());
      const count = (labels: Record<string, string>) =>
        histogramCount(families, 'warren_cni_request_duration_seconds', labels);
      assert.equal(count({ command: 'ADD', code: '0' }), 1);
      assert.equal(count({ command: 'ADD', code: '7' }), 1);
      assert.equal(count({ command: 'CHECK', code: '0' }), 1);
      assert.equal(count({ command: 'invalid' }), 1);
    } finally {
      await close();
    }
  });

  it('reads gauges when scraped: the journal, the queue, readiness and the last audit', async () => {
    const { metrics, setPending, close } = setup();
    try {
      setPending(4);
      metrics.audited({ healthy: 7, stale: 2, suspect: 1 });
      let families = parseExposition(await metrics.exposition());
      assert.equal(sample(families, 'warren_journal_pending_intents'), 4);
      assert.equal(sample(families, 'warren_release_queue_depth', { source: 'journal' }), 4);
      assert.equal(sample(families, 'warren_release_queue_depth', { source: 'containerd' }), 0);
      assert.equal(sample(families, 'warren_audit_findings', { verdict: 'stale' }), 2);
      assert.equal(sample(families, 'warren_audits_total'), 1);
      assert.equal(sample(families, 'warren_ready'), 1);
      setPending(0);
      families = parseExposition(await metrics.exposition());
      assert.equal(sample(families, 'warren_journal_pending_intents'), 0);
      assert.equal(sample(families, 'warren_build_info', { version: '9.9.9' }), 1);
    } finally {
      await close();
    }
  });

  it('keeps the last releases newest first, bounded, with their totals by source', async () => {
    const { history, service, close } = setup();
    try {
      for (let i = 0; i < 8; i++) await call(service, 'ADD', `h-${i}`);
      for (let i = 0; i < 8; i++) await call(service, 'DEL', `h-${i}`);
      const recent = history.recent();
      assert.equal(recent.length, 5);
      assert.deepEqual(
        recent.map((r) => r.containerID),
        ['h-7', 'h-6', 'h-5', 'h-4', 'h-3'],
      );
      assert.equal(recent[0]?.source, 'cni-del');
      assert.equal(recent[0]?.reason, 'CNI DEL');
      assert.equal(history.totals()['cni-del'], 8);
    } finally {
      await close();
    }
  });
});

describe('BoundedLabel', () => {
  it('keeps the first values it sees and gives _other for every later new one', () => {
    const label = new BoundedLabel(2);
    assert.deepEqual(
      ['a', 'b', 'c', 'a', 'd', 'b'].map((v) => label.of(v)),
      ['a', 'b', OTHER, 'a', OTHER, 'b'],
    );
  });
});
