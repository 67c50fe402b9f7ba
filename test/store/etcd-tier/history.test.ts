/**
 * `warren doctor` on etcd's history, against real etcd members: one run as etcd runs by default
 * (no --auto-compaction-*), compacted by the client when the test says so, and one with a quota of
 * one MiB that fills. What the agent reports (doctorFacts over the real store `--store etcd` opens) is judged as
 * `warren doctor` judges it and rendered as it prints it; and once as an operator runs it, the
 * doctor a child process asking a real agent on etcd.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { doctorFacts } from '../../../src/agent/server/doctor-facts.ts';
import { resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { NO_COMPACTION_REVISIONS, historyFindings } from '../../../src/cli/doctor/etcd-history.ts';
import { type Finding, exitCodeOf } from '../../../src/cli/doctor/finding.ts';
import { renderHuman } from '../../../src/cli/doctor/report.ts';
import type { EtcdTieredStore } from '../../../src/store/etcd-tier/tiered.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { openTieredOnEtcd } from '../../helpers/etcd-tiered.ts';
import { startAgent } from '../../helpers/agent.ts';
import { WARREN_BIN, run, tempDir } from '../../helpers/processes.ts';

const QUOTA_BYTES = 1024 * 1024;

/** What the agent on `etcd` reports of its store, as `warren doctor` asks for it. */
async function factsOf(etcd: EtcdCluster, store: EtcdTieredStore) {
  const options = resolveAgentOptions(
    {
      stateDir: tempDir('warren-history-'),
      store: 'etcd',
      etcdEndpoints: etcd.endpoints.join(','),
      netnsDirs: '',
      metricsAddress: '',
    },
    {},
    0,
    '/',
  );
  return doctorFacts({ options, store, observer: new NetnsObserver([]), clock: systemClock, version: '0.0.0' });
}

/** `count` writes, each its own revision, a few at a time in flight. */
async function write(client: Etcd3, count: number, value = 'x'): Promise<void> {
  for (let done = 0; done < count; ) {
    const batch = Math.min(128, count - done);
    await Promise.all(Array.from({ length: batch }, (_, i) => client.put(`/other/k${(done + i) % 64}`).value(value)));
    done += batch;
  }
}

describe("warren doctor on etcd's history", () => {
  let plain: EtcdCluster;
  let small: EtcdCluster;
  let client: Etcd3;
  let smallClient: Etcd3;

  before(async () => {
    [plain, small] = await Promise.all([
      startEtcd(1),
      startEtcd(1, undefined, ['--quota-backend-bytes', `${QUOTA_BYTES}`]),
    ]);
    const { Etcd3: Client } = await import('etcd3');
    client = new Client({ hosts: plain.endpoints });
    smallClient = new Client({ hosts: small.endpoints });
  });
  after(async () => {
    client?.close();
    smallClient?.close();
    await Promise.all([plain?.stop(), small?.stop()]);
  });

  it('warns before an etcd without compaction fills its quota and refuses every ADD, and stops once it compacts', async () => {
    const store = await openTieredOnEtcd({
      endpoints: plain.endpoints,
      prefix: '/warren/',
      node: 'h',
      historyIntervalMs: 0,
    });
    try {
      const young = await factsOf(plain, store);
      assert.ok(young.store.history !== undefined && !('error' in young.store.history), JSON.stringify(young.store));
      assert.equal(young.store.history.compacted, false);
      assert.deepEqual(
        historyFindings(young).map((f) => [f.id, f.severity]),
        [['etcd-history-in-bounds', 'ok']],
        'a short history is not yet worth a word',
      );

      await write(client, NO_COMPACTION_REVISIONS + 1);
      const grown = await factsOf(plain, store);
      const history = grown.store.history;
      assert.ok(history !== undefined && !('error' in history), JSON.stringify(grown.store));
      assert.ok(history.revision > NO_COMPACTION_REVISIONS, `revision ${history.revision}`);
      assert.equal(history.compacted, false);
      assert.equal(history.quotaBytes, 2 * 1024 ** 3, "etcd's default quota, read from the member's metrics");
      const findings = historyFindings(grown);
      assert.deepEqual(
        findings.map((f) => [f.id, f.severity]),
        [['etcd-no-compaction', 'warning']],
      );
      const text = renderHuman(findings);
      assert.match(text, /^! etcd never compacts its history {2}\[etcd-no-compaction\]$/m);
      assert.match(text, new RegExp(`revision ${history.revision} and no revision ever compacted away`));
      assert.match(
        text,
        /fix: start every etcd member with --auto-compaction-mode=periodic --auto-compaction-retention=1h/,
      );
      assert.match(text, new RegExp(`etcdctl compact ${history.revision}\\) and defragment every member`));
      assert.equal(exitCodeOf(findings), 0, 'a warning: nothing fails yet');

      await client.kv.compact({ revision: String(history.revision), physical: true });
      const compacted = await factsOf(plain, store);
      assert.ok(compacted.store.history !== undefined && !('error' in compacted.store.history));
      assert.equal(compacted.store.history.compacted, true);
      assert.deepEqual(
        historyFindings(compacted).map((f) => [f.id, f.severity]),
        [['etcd-history-in-bounds', 'ok']],
      );
    } finally {
      await store.close();
    }
  });

  it('reads etcd at most once an interval, however often doctor asks', async () => {
    const store = await openTieredOnEtcd({ endpoints: plain.endpoints, prefix: '/warren/', node: 'h' });
    try {
      const first = await store.history.read();
      await write(client, 20);
      const second = await store.history.read();
      assert.equal(second.revision, first.revision, 'the reading of a moment ago, not a new one');
    } finally {
      await store.close();
    }
  });

  it('says etcd refuses every write once it raised NOSPACE, and how to get it back', async () => {
    const store = await openTieredOnEtcd({
      endpoints: small.endpoints,
      prefix: '/warren/',
      node: 'h',
      historyIntervalMs: 0,
    });
    try {
      const big = 'y'.repeat(100 * 1024);
      let refused: unknown;
      for (let i = 0; i < 200 && refused === undefined; i++) {
        try {
          await smallClient.put(`/other/big${i}`).value(big);
        } catch (error) {
          refused = error;
        }
      }
      assert.match(String(refused), /database space exceeded/, 'the member filled its quota');
      const full = await factsOf(small, store);
      const history = full.store.history;
      assert.ok(history !== undefined && !('error' in history), JSON.stringify(full.store));
      assert.equal(history.noSpace, true);
      assert.equal(history.quotaBytes, QUOTA_BYTES, "the member's own quota, read from its metrics");
      const findings = historyFindings(full);
      assert.deepEqual(
        findings.map((f) => [f.id, f.severity]),
        [['etcd-nospace', 'error']],
      );
      const text = renderHuman(findings);
      assert.match(
        text,
        /^✗ etcd has run out of space and refuses every write \(NOSPACE alarm\) {2}\[etcd-nospace\]$/m,
      );
      assert.match(text, /NOSPACE on member [0-9a-f]+/);
      assert.match(text, /etcdctl alarm disarm/);
      assert.match(text, /--auto-compaction-mode=periodic --auto-compaction-retention=1h/);
      assert.equal(exitCodeOf(findings), 1, 'an error: ADDs fail now');

      // Disarmed without making room: no alarm, but the database is still at its quota.
      // A client of its own: the refused puts left the first one's circuit breaker open.
      const { Etcd3: Client } = await import('etcd3');
      const operator = new Client({ hosts: small.endpoints });
      try {
        const raised = await operator.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
        for (const alarm of raised.alarms)
          await operator.maintenance.alarm({ action: 'Deactivate', memberID: alarm.memberID, alarm: alarm.alarm });
      } finally {
        operator.close();
      }
      const disarmed = await factsOf(small, store);
      assert.deepEqual(
        historyFindings(disarmed).map((f) => [f.id, f.severity]),
        [['etcd-near-quota', 'warning']],
      );
    } finally {
      await store.close();
    }
  });

  it('names an etcd without compaction when an operator runs warren doctor against an agent on it', async () => {
    const etcd = await startEtcd(1);
    const { Etcd3: Client } = await import('etcd3');
    const writer = new Client({ hosts: etcd.endpoints });
    try {
      await write(writer, NO_COMPACTION_REVISIONS + 1);
      const agent = await startAgent({ args: ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')] });
      try {
        const json = await run(process.execPath, [WARREN_BIN, 'doctor', '--socket', agent.socket, '--json']);
        const report = JSON.parse(json.stdout) as { findings: Finding[] };
        const f = report.findings.find((x) => x.id === 'etcd-no-compaction');
        assert.ok(f, JSON.stringify(report.findings, null, 2));
        assert.equal(f.severity, 'warning');
        assert.match(f.fix ?? '', /--auto-compaction-mode=periodic --auto-compaction-retention=1h/);
        const human = await run(process.execPath, [WARREN_BIN, 'doctor', '--socket', agent.socket]);
        assert.ok(human.stdout.includes(`! ${f.title}  [etcd-no-compaction]`), human.stdout);
        assert.ok(human.stdout.includes(`    fix: ${f.fix}`), human.stdout);
      } finally {
        await agent.stop();
      }
    } finally {
      writer.close();
      await etcd.stop();
    }
  });
});
