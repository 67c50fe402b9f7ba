/**
 * deploy/grafana/warren-dashboard.json against what an agent exposes: every series a query asks
 * Prometheus for is one the agent's exposition holds, under its exact sample name (a histogram is
 * asked for by `_bucket`, `_count` or `_sum`, never by its bare name, which Prometheus does not
 * store); every label a query filters, groups or names a legend by is one those series carry, or
 * one Prometheus adds when it scrapes (`instance`, `job`). Every metric Warren defines has a panel.
 *
 * The exposition is AgentMetrics' own, built in process as the agent builds it (process metrics
 * on), fed one of each event and read with stubbed readings that include blocks and bookkeeping
 * records, so every series an agent can show is there (blocks only appear on the etcd store), parsed by the Prometheus
 * project's parser. The PromQL side is a token scan, enough for the dashboard's own queries.
 *
 * The dashboard is importable anywhere: it bakes in no datasource UID (a `datasource` variable
 * picks the Prometheus) and no absolute URL, and it sits in a subdirectory of its own, apart from
 * the manifests (`kubectl apply -k deploy` applies those deploy/kustomization.yaml lists).
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { AgentMetrics } from '../../src/agent/metrics/prometheus.ts';
import { parseExposition } from '../helpers/prometheus.ts';
import { REPO } from '../helpers/processes.ts';

const DASHBOARD = join(REPO, 'deploy', 'grafana', 'warren-dashboard.json');

/** Labels Prometheus puts on every series of a target when it scrapes it. */
const TARGET_LABELS: ReadonlySet<string> = new Set(['instance', 'job']);

interface Target {
  readonly refId?: string;
  readonly expr?: string;
  readonly legendFormat?: string;
  readonly datasource?: unknown;
}

interface Panel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly gridPos?: { readonly x: number; readonly y: number; readonly w: number; readonly h: number };
  readonly datasource?: unknown;
  readonly targets?: readonly Target[];
  readonly panels?: readonly Panel[];
}

interface Variable {
  readonly name: string;
  readonly type: string;
  readonly query?: string | { readonly query?: string };
  readonly definition?: string;
}

interface Dashboard {
  readonly title?: string;
  readonly uid?: string;
  readonly schemaVersion?: number;
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly Variable[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;

/** Every panel, those inside collapsed rows too. */
const allPanels: Panel[] = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const queryPanels = allPanels.filter((p) => p.type !== 'row');

/** Each query of the dashboard, with where it is, for the messages. */
const queries: Array<{ where: string; expr: string; legend?: string }> = [
  ...queryPanels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      where: `panel ${p.id} "${p.title}" ${t.refId}`,
      expr: t.expr ?? '',
      ...(t.legendFormat === undefined ? {} : { legend: t.legendFormat }),
    })),
  ),
];
const variableQueries = dashboard.templating.list
  .filter((v) => v.type === 'query')
  .map((v) => ({
    where: `variable ${v.name}`,
    query: typeof v.query === 'string' ? v.query : (v.query?.query ?? v.definition ?? ''),
  }));

const METRIC = /\bwarren_[A-Za-z0-9_:]*/g;
const SELECTOR = /\b(warren_[A-Za-z0-9_:]*)\s*\{([^}]*)\}/g;
const MATCHER = /([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g;
const GROUPING = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g;
const LEGEND_LABEL = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

const metricsOf = (expr: string): string[] => [...new Set(expr.match(METRIC) ?? [])];
const labelList = (text: string): string[] =>
  text
    .split(',')
    .map((l) => l.trim())
    .filter((l) => l !== '');

/** Sample name as exposed (`_bucket`, `_total` and all) → the label names its series carry. */
let exposed: Map<string, Set<string>>;
/** Family names Warren defines itself (not the process and Node.js ones). */
let warrenFamilies: string[];

before(async () => {
  const metrics = new AgentMetrics({
    version: '0.0.0-test',
    readings: {
      pools: async () => [
        { pool: '10.0.0.0/24', capacity: 254, allocated: 3, resting: 1, blocks: { owned: 2, borrowed: 1 } },
      ],
      journal: () => ({ pending: 1, setAside: 1 }),
      queueDepth: () => ({ journal: 1, containerd: 0 }),
      ready: async () => true,
      bookkeeping: async () => ({ lent: 1 }),
    },
  });
  const allocation: Allocation = {
    pool: '10.0.0.0/24',
    address: '10.0.0.2',
    network: 'net',
    containerID: 'c',
    ifname: 'eth0',
    node: 'n',
    createdAt: 0,
  };
  metrics.cniCall('ADD', 0, 0.001);
  metrics.cniCall('DEL', 11, 0.002);
  metrics.allocated([allocation]);
  metrics.released('cni-del', [allocation]);
  metrics.commit(0.001, 'committed');
  metrics.commit(0.004, 'conflict');
  metrics.commit(0.1, 'error');
  metrics.retried('journal');
  metrics.audited({ healthy: 1, stale: 1, suspect: 1 });
  const families = parseExposition(await metrics.exposition());
  exposed = new Map();
  for (const s of families.flatMap((f) => f.samples)) {
    const labels = exposed.get(s.name) ?? new Set<string>();
    for (const l of Object.keys(s.labels)) labels.add(l);
    exposed.set(s.name, labels);
  }
  warrenFamilies = families
    .map((f) => f.name)
    .filter((n) => !n.startsWith('warren_process_') && !n.startsWith('warren_nodejs_'));
});

/** Whether every one of `metrics` carries `label`, or Prometheus adds it. */
function carried(label: string, metrics: readonly string[]): boolean {
  return TARGET_LABELS.has(label) || metrics.every((m) => exposed.get(m)?.has(label) === true);
}

describe('the Grafana dashboard', () => {
  it('is a Grafana dashboard model with a Prometheus datasource variable, an instance variable and panels', () => {
    assert.equal(typeof dashboard.title, 'string');
    assert.equal(typeof dashboard.uid, 'string');
    assert.ok((dashboard.schemaVersion ?? 0) >= 36, `schemaVersion ${dashboard.schemaVersion}`);
    const variables = new Map(dashboard.templating.list.map((v) => [v.name, v]));
    assert.equal(variables.get('datasource')?.type, 'datasource');
    assert.equal(variables.get('datasource')?.query, 'prometheus');
    assert.equal(variables.get('instance')?.type, 'query');
    assert.ok(queryPanels.length >= 15, `${queryPanels.length} panels`);
    for (const p of queryPanels) assert.ok((p.targets ?? []).length > 0, `panel ${p.id} "${p.title}" has a query`);
  });

  it('asks only for series an agent exposes, by their exact sample names', () => {
    assert.ok(exposed.has('warren_process_cpu_seconds_total'), 'process metrics are in the exposition');
    for (const { where, expr } of [...queries, ...variableQueries.map((v) => ({ where: v.where, expr: v.query }))]) {
      const names = metricsOf(expr);
      assert.ok(names.length > 0, `${where}: names a warren_ metric`);
      for (const name of names) assert.ok(exposed.has(name), `${where}: ${name} is not exposed by the agent`);
    }
  });

  it('filters, groups and names legends only by labels the series carry or Prometheus adds', () => {
    for (const { where, expr, legend } of queries) {
      const metrics = metricsOf(expr);
      for (const [, metric, matchers] of expr.matchAll(SELECTOR)) {
        for (const [, label] of (matchers as string).matchAll(MATCHER))
          assert.ok(carried(label as string, [metric as string]), `${where}: ${metric} has no label ${label}`);
      }
      const grouped = [...expr.matchAll(GROUPING)].flatMap(([, list]) => labelList(list as string));
      for (const label of grouped)
        assert.ok(
          carried(label, metrics),
          `${where}: groups by ${label}, which ${metrics.join(', ')} do not all carry`,
        );
      for (const [, label] of (legend ?? '').matchAll(LEGEND_LABEL)) {
        // After an aggregation only its `by` labels are left.
        const available = /\b(?:sum|min|max|avg|count)\b/.test(expr)
          ? grouped.includes(label as string)
          : carried(label as string, metrics);
        assert.ok(available, `${where}: legend names ${label}, which the result does not carry`);
      }
    }
    for (const { where, query } of variableQueries) {
      const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$/.exec(query.trim());
      assert.ok(m, `${where}: a label_values() query`);
      assert.ok(carried(m[2] as string, metricsOf(m[1] as string)), `${where}: ${m[1]} has no label ${m[2]}`);
    }
  });

  it('filters every query by the instance variable, so picking a node picks its agent', () => {
    for (const { where, expr } of [
      ...queries,
      ...variableQueries.filter((v) => v.where !== 'variable instance').map((v) => ({ where: v.where, expr: v.query })),
    ]) {
      const selectors = [...expr.matchAll(SELECTOR)];
      assert.equal(
        selectors.length,
        metricsOf(expr).length === 0 ? 0 : expr.match(METRIC)?.length,
        `${where}: every metric has a selector`,
      );
      for (const [selector, , matchers] of selectors)
        assert.match(matchers as string, /\binstance=~"\$instance"/, `${where}: ${selector}`);
    }
  });

  it('has a panel for every metric Warren defines', () => {
    const asked = new Set(queries.flatMap((q) => metricsOf(q.expr)));
    for (const family of warrenFamilies) {
      const used = [...asked].some((name) => name === family || name.startsWith(`${family}_`));
      assert.ok(used, `no panel shows ${family}`);
    }
  });

  it('has unique panel ids, unique query refIds in a panel, and panels that fit the 24-column grid without overlapping', () => {
    const ids = allPanels.map((p) => p.id);
    for (const id of ids) assert.ok(Number.isInteger(id), `panel id ${id}`);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of queryPanels) {
      const refIds = (p.targets ?? []).map((t) => t.refId);
      assert.equal(new Set(refIds).size, refIds.length, `panel ${p.id}: refIds are unique`);
    }
    const placed = dashboard.panels.map((p) => ({ id: p.id, ...(p.gridPos as NonNullable<Panel['gridPos']>) }));
    for (const a of placed) {
      assert.ok(a.x >= 0 && a.w > 0 && a.h > 0 && a.x + a.w <= 24, `panel ${a.id} fits the grid`);
      for (const b of placed) {
        if (a.id === b.id) continue;
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        assert.ok(!overlap, `panels ${a.id} and ${b.id} overlap`);
      }
    }
  });

  it('bakes in no datasource UID and no absolute URL: every datasource is the datasource variable', () => {
    const datasources: unknown[] = [];
    const strings: string[] = [];
    const walk = (value: unknown, key?: string): void => {
      if (key === 'datasource') datasources.push(value);
      if (typeof value === 'string') strings.push(value);
      else if (Array.isArray(value)) value.forEach((v) => walk(v));
      else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, k);
    };
    walk(dashboard);
    assert.ok(datasources.length > 0);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own variable syntax, not a template
    for (const d of datasources) assert.deepEqual(d, { type: 'prometheus', uid: '${datasource}' });
    for (const s of strings) assert.doesNotMatch(s, /[a-z][a-z0-9+.-]*:\/\//i, `an absolute URL: ${s}`);
    for (const p of queryPanels)
      for (const t of p.targets ?? [])
        assert.notEqual(t.datasource, undefined, `panel ${p.id} ${t.refId} names its datasource`);
  });

  it('sits under deploy/grafana/, apart from the manifests', () => {
    assert.deepEqual(
      readdirSync(join(REPO, 'deploy')).filter((f) => f.endsWith('.json')),
      [],
    );
  });
});
