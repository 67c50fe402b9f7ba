/**
 * `warren doctor`'s rules for etcd's history as a table: what the agent read of etcd (its
 * revision, whether anything was ever compacted, its database against its quota, its alarms) in,
 * findings out. The bounds are tested at their edges; every warning and error names the etcd
 * flags and commands that fix it. Real etcd members: test/store/etcd-tier/history.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { agentFindings } from '../../../src/cli/doctor/agent-checks.ts';
import {
  ETCD_DEFAULT_QUOTA_BYTES,
  NEAR_QUOTA_RATIO,
  NO_COMPACTION_REVISIONS,
  historyFindings,
} from '../../../src/cli/doctor/etcd-history.ts';
import { exitCodeOf } from '../../../src/cli/doctor/finding.ts';
import { renderHuman } from '../../../src/cli/doctor/report.ts';
import type { HistoryReading } from '../../../src/store/store.ts';

const MiB = 1024 * 1024;
const QUOTA = 100 * MiB;

function reading(over: Partial<HistoryReading> = {}): HistoryReading {
  return {
    endpoint: 'http://10.0.0.1:2379',
    revision: 500,
    compacted: true,
    dbSizeBytes: 10 * MiB,
    dbSizeInUseBytes: 4 * MiB,
    quotaBytes: QUOTA,
    alarms: [],
    noSpace: false,
    ...over,
  };
}

function facts(history?: DoctorFacts['store']['history']): DoctorFacts {
  return {
    node: 'node-a',
    version: '1.2.3',
    pid: 42,
    socket: '/run/warren/warren.sock',
    stateDir: '/var/lib/warren',
    journalDir: '/var/lib/warren/journal',
    cniConfDir: '/etc/cni/net.d',
    manageCniConfig: false,
    store: {
      kind: 'etcd',
      description: 'etcd:http://10.0.0.1:2379/warren/',
      healthy: true,
      etcdEndpoints: ['http://10.0.0.1:2379'],
      ...(history === undefined ? {} : { history }),
    },
    netns: [],
    recordedNetns: [],
  };
}

const ids = (history?: DoctorFacts['store']['history']) =>
  historyFindings(facts(history)).map((f) => `${f.severity} ${f.id}`);

describe("warren doctor's judgement of etcd's history", () => {
  it('says nothing on a store that keeps no history (SQLite, Kubernetes): its facts carry none', () => {
    assert.deepEqual(ids(), []);
    const sqlite: DoctorFacts = { ...facts(), store: { kind: 'sqlite', description: 'sqlite', healthy: true } };
    assert.deepEqual(historyFindings(sqlite), []);
  });

  it('lets a never-compacted history grow to its bound, and warns one revision past it', () => {
    assert.deepEqual(ids(reading({ compacted: false, revision: NO_COMPACTION_REVISIONS })), [
      'ok etcd-history-in-bounds',
    ]);
    assert.deepEqual(ids(reading({ compacted: false, revision: NO_COMPACTION_REVISIONS + 1 })), [
      'warning etcd-no-compaction',
    ]);
  });

  it('does not call a compacted etcd uncompacted, however long its history', () => {
    assert.deepEqual(ids(reading({ compacted: true, revision: 50 * NO_COMPACTION_REVISIONS })), [
      'ok etcd-history-in-bounds',
    ]);
  });

  it('warns before the database reaches its quota and etcd refuses every ADD', () => {
    const edge = Math.ceil(NEAR_QUOTA_RATIO * QUOTA);
    assert.deepEqual(ids(reading({ dbSizeBytes: edge - 1 })), ['ok etcd-history-in-bounds']);
    const near = historyFindings(facts(reading({ dbSizeBytes: edge, dbSizeInUseBytes: 5 * MiB })));
    assert.deepEqual(
      near.map((f) => `${f.severity} ${f.id}`),
      ['warning etcd-near-quota'],
    );
    const text = renderHuman(near);
    assert.match(text, /^! etcd's database is near its quota \(80%\) {2}\[etcd-near-quota\]$/m);
    assert.match(text, /database 80\.0 MiB \(5\.0 MiB in use\), 80% of its quota 100\.0 MiB/);
    assert.match(text, /fix: compact etcd's history \(etcdctl compact 500\) and defragment every member/);
    assert.match(text, /--auto-compaction-mode=periodic --auto-compaction-retention=1h/);
    assert.match(text, /--quota-backend-bytes/);
  });

  it("judges against etcd's default quota when the member's own could not be read, and says so", () => {
    const { quotaBytes: _, ...unknown } = reading({ dbSizeBytes: NEAR_QUOTA_RATIO * ETCD_DEFAULT_QUOTA_BYTES });
    const found = historyFindings(facts(unknown));
    assert.deepEqual(
      found.map((f) => f.id),
      ['etcd-near-quota'],
    );
    assert.match(found[0]?.detail ?? '', /of etcd's default quota 2\.00 GiB \(the member's own could not be read\)/);
  });

  it('makes a raised NOSPACE an error that fails the run, with the way back, and names the missing compaction', () => {
    const full = reading({
      compacted: false,
      revision: 120_000,
      dbSizeBytes: QUOTA,
      alarms: ['NOSPACE on member 8e9e05c52164694d'],
      noSpace: true,
    });
    const found = historyFindings(facts(full));
    assert.deepEqual(
      found.map((f) => `${f.severity} ${f.id}`),
      ['error etcd-nospace', 'warning etcd-no-compaction'],
      'the near-quota warning is not said again beside the alarm',
    );
    assert.equal(exitCodeOf(found), 1);
    const text = renderHuman(found);
    assert.match(text, /NOSPACE on member 8e9e05c52164694d; database 100\.0 MiB/);
    assert.match(text, /no ADD or DEL commits until the alarm is disarmed/);
    assert.match(
      text,
      /etcdctl compact 120000\) and defragment every member \(etcdctl defrag --cluster\), then disarm/,
    );
    assert.match(text, /etcdctl alarm disarm/);
  });

  it('says why when the history could not be read, as a warning with what to check', () => {
    const found = historyFindings(facts({ error: 'etcd store unreachable (status): deadline exceeded' }));
    assert.deepEqual(
      found.map((f) => `${f.severity} ${f.id}`),
      ['warning etcd-history-unread'],
    );
    assert.match(found[0]?.detail ?? '', /deadline exceeded/);
  });

  it("is among the agent's findings, right after the store's", () => {
    const found = agentFindings(facts(reading({ compacted: false, revision: 20_000 })), undefined, {
      kind: 'absent',
      path: '/etc/containerd/config.toml',
    }).map((f) => f.id);
    const store = found.indexOf('store-healthy');
    assert.ok(store >= 0, found.join(', '));
    assert.equal(found[store + 1], 'etcd-no-compaction', found.join(', '));
  });
});
