/**
 * deploy/prometheus/: Warren's alert rules, as a plain rules file and as a PrometheusRule.
 *
 * - The two carry the same groups, and Prometheus's own checker (`promtool check rules`, Debian's
 *   `prometheus` package) accepts both, templates included.
 * - Every series a rule asks for is one an agent exposes, under its exact sample name, and every
 *   label a rule filters or groups by is one those series carry or Prometheus adds.
 * - Each rule fires on a scripted history that should fire it, and no rule fires on a healthy
 *   history of every series: `promtool test rules` evaluates the real expressions over the
 *   histories below (the annotations are stripped from the copy it tests, so the expected alerts
 *   name labels only; `check rules` has already checked the annotations' templates).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { agentExposition } from '../helpers/agent-exposition.ts';
import { DEPLOY, jsYaml } from './deploy-files.ts';

const run = promisify(execFile);
const RULES = join(DEPLOY, 'prometheus', 'warren-rules.yaml');
const OPERATOR = join(DEPLOY, 'prometheus', 'prometheusrule.yaml');

interface Rule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}
interface Group {
  readonly name: string;
  readonly rules: readonly Rule[];
}

const plain = jsYaml.load(readFileSync(RULES, 'utf8')) as { groups: Group[] };
const operator = jsYaml.load(readFileSync(OPERATOR, 'utf8')) as {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string };
  spec: { groups: Group[] };
};
const rules = plain.groups.flatMap((g) => g.rules);

/** A series over time, in promtool's expanding notation (`a+bxN`, `axN`, space separated). */
type History = Record<string, string>;

/** Every series an agent exposes that a rule reads, healthy: nothing should fire on these. */
const HEALTHY: History = {
  // The cluster store kept its data: no node stopped, no recovery.
  'warren_cluster_store_halted{instance="n1"}': '0x180',
  'warren_cluster_store_recovery{instance="n1"}': '0x180',
  'warren_pool_capacity_addresses{instance="n1",pool="p"}': '100x180',
  'warren_pool_capacity_addresses{instance="n2",pool="p"}': '100x180',
  // Busy but steady: 60% used, flat, on both agents that serve the shared range.
  'warren_pool_allocated_addresses{instance="n1",pool="p"}': '60x180',
  'warren_pool_allocated_addresses{instance="n2",pool="p"}': '60x180',
  'warren_pool_resting_addresses{instance="n1",pool="p"}': '5x180',
  'warren_pool_resting_addresses{instance="n2",pool="p"}': '5x180',
  // A retry now and then, no backlog, a journal that drains.
  'warren_release_retries_total{instance="n1",source="journal"}': '0x60 1x120',
  'warren_release_queue_depth{instance="n1",source="journal"}': '0 80 0x178',
  'warren_journal_pending_intents{instance="n1"}': '0 2 0 3 0x176',
  'warren_journal_set_aside_files{instance="n1"}': '0x180',
  'warren_ready{instance="n1"}': '0 0 1x178',
  'warren_store_commit_duration_seconds_count{instance="n1",result="committed"}': '0+10x180',
  'warren_store_commit_duration_seconds_count{instance="n1",result="error"}': '0x180',
  'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="0.01"}': '0+100x180',
  'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="1"}': '0+100x180',
  'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="+Inf"}': '0+100x180',
};

/** Per rule: a history that must fire it, when, and the labels the alert carries. */
const FIRING: Record<string, { history: History; at: string; labels: Record<string, string> }> = {
  WarrenPoolNearlyFull: {
    // Climbing 0.4 a minute from 50: above 90% from minute 101, capacity reached within 6 h.
    history: {
      'warren_pool_capacity_addresses{instance="n1",pool="p"}': '100x180',
      'warren_pool_allocated_addresses{instance="n1",pool="p"}': '50+0.4x120',
    },
    at: '115m',
    labels: { pool: 'p', severity: 'warning' },
  },
  WarrenPoolExhausted: {
    history: {
      'warren_pool_capacity_addresses{instance="n1",pool="p"}': '100x60',
      'warren_pool_allocated_addresses{instance="n1",pool="p"}': '98x60',
      'warren_pool_resting_addresses{instance="n1",pool="p"}': '2x60',
    },
    at: '30m',
    labels: { pool: 'p', severity: 'critical' },
  },
  WarrenReleasesFailing: {
    history: { 'warren_release_retries_total{instance="n1",source="kubernetes"}': '0+2x60' },
    at: '40m',
    labels: { instance: 'n1', source: 'kubernetes', severity: 'warning' },
  },
  WarrenReleaseBacklog: {
    history: { 'warren_release_queue_depth{instance="n1",source="journal"}': '80x60' },
    at: '30m',
    labels: { instance: 'n1', severity: 'warning' },
  },
  WarrenJournalNotDraining: {
    history: { 'warren_journal_pending_intents{instance="n1"}': '3x90' },
    at: '60m',
    labels: { instance: 'n1', severity: 'warning' },
  },
  WarrenJournalSetAside: {
    history: { 'warren_journal_set_aside_files{instance="n1"}': '1x60' },
    at: '30m',
    labels: { instance: 'n1', severity: 'info' },
  },
  WarrenAgentNotReady: {
    history: { 'warren_ready{instance="n1"}': '1 0x60' },
    at: '20m',
    labels: { instance: 'n1', severity: 'critical' },
  },
  WarrenClusterStoreLostData: {
    history: { 'warren_cluster_store_halted{instance="n1"}': '0x10 1x60' },
    at: '20m',
    labels: { instance: 'n1', severity: 'critical' },
  },
  WarrenClusterInRecovery: {
    history: { 'warren_cluster_store_recovery{instance="n1"}': '0x10 1x60' },
    at: '30m',
    labels: { instance: 'n1', severity: 'critical' },
  },
  WarrenStoreErrors: {
    history: { 'warren_store_commit_duration_seconds_count{instance="n1",result="error"}': '0+3x60' },
    at: '30m',
    labels: { instance: 'n1', severity: 'critical' },
  },
  WarrenAddSlow: {
    // Every ADD between 1 s and 2.5 s.
    history: {
      'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="1"}': '0x60',
      'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="2.5"}': '0+5x60',
      'warren_cni_request_duration_seconds_bucket{instance="n1",command="ADD",code="0",le="+Inf"}': '0+5x60',
    },
    at: '40m',
    labels: { instance: 'n1', severity: 'warning' },
  },
};

const seriesOf = (history: History) => Object.entries(history).map(([series, values]) => ({ series, values }));

let dir: string;
let tested: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'warren-alerts-'));
  // The rules as they are, less their annotations (see the header).
  const stripped = {
    groups: plain.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) })),
  };
  tested = join(dir, 'rules.yaml');
  writeFileSync(tested, JSON.stringify(stripped));
});

after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `promtool test rules` on one test case; resolves with its output, rejects with it on failure. */
async function promtoolTest(name: string, test: object): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, JSON.stringify({ rule_files: [tested], evaluation_interval: '1m', tests: [test] }));
  try {
    const { stdout } = await run('promtool', ['test', 'rules', file], { timeout: 60_000 });
    return stdout;
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`promtool test rules ${name}:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

describe('the alert rules', () => {
  it("are one set of groups, as a rules file and as a PrometheusRule in Warren's namespace", () => {
    assert.equal(operator.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(operator.kind, 'PrometheusRule');
    assert.equal(operator.metadata.namespace, 'warren');
    assert.deepEqual(operator.spec.groups, plain.groups);
    assert.deepEqual(
      rules.map((r) => r.alert),
      Object.keys(FIRING),
      'every rule has a firing history below, and no history names a rule that is gone',
    );
    for (const r of rules) {
      assert.match(r.labels?.severity ?? '', /^(info|warning|critical)$/, `${r.alert}: severity`);
      assert.ok((r.annotations?.summary ?? '') !== '', `${r.alert}: a summary`);
    }
  });

  it("pass Prometheus's own rule checker, templates included", async () => {
    for (const file of [RULES]) {
      const { stdout } = await run('promtool', ['check', 'rules', file], { timeout: 60_000 });
      assert.match(stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
    }
  });

  it('ask only for series an agent exposes, by labels they carry or Prometheus adds', async () => {
    const { exposed } = await agentExposition();
    const added = new Set(['instance', 'job']);
    for (const r of rules) {
      const names = [...new Set(r.expr.match(/\bwarren_[A-Za-z0-9_]*/g) ?? [])];
      assert.ok(names.length > 0, `${r.alert} reads a warren_ series`);
      for (const name of names) {
        assert.ok(exposed.has(name), `${r.alert}: ${name} is not exposed by the agent`);
        const carried = exposed.get(name) ?? new Set<string>();
        const used = [
          ...[...r.expr.matchAll(/\bby\s*\(([^)]*)\)/g)].flatMap((m) => (m[1] ?? '').split(',')),
          ...[...r.expr.matchAll(new RegExp(`${name}\\{([^}]*)\\}`, 'g'))].flatMap((m) =>
            [...(m[1] ?? '').matchAll(/([A-Za-z_]+)\s*=/g)].map((l) => l[1] ?? ''),
          ),
        ]
          .map((l) => l.trim())
          .filter((l) => l !== '' && l !== 'le');
        for (const label of used) {
          assert.ok(carried.has(label) || added.has(label), `${r.alert}: ${name} carries no label "${label}"`);
        }
      }
    }
  });

  for (const [alert, { history, at, labels }] of Object.entries(FIRING)) {
    it(`fire ${alert} on a history that should fire it`, async () => {
      await promtoolTest(`fires-${alert}`, {
        interval: '1m',
        input_series: seriesOf(history),
        alert_rule_test: [{ eval_time: at, alertname: alert, exp_alerts: [{ exp_labels: labels }] }],
      });
    });
  }

  it('stay silent on a healthy history of every series they read', async () => {
    await promtoolTest('healthy', {
      interval: '1m',
      input_series: seriesOf(HEALTHY),
      alert_rule_test: rules.flatMap((r) =>
        ['30m', '90m', '170m'].map((t) => ({ eval_time: t, alertname: r.alert, exp_alerts: [] })),
      ),
    });
  });

  it('would tell a rule that does not fire from one that does (the check itself can fail)', async () => {
    await assert.rejects(
      promtoolTest('wrong', {
        interval: '1m',
        input_series: seriesOf(HEALTHY),
        alert_rule_test: [
          { eval_time: '90m', alertname: 'WarrenAgentNotReady', exp_alerts: [{ exp_labels: { instance: 'n1' } }] },
        ],
      }),
      /WarrenAgentNotReady/,
    );
  });
});
