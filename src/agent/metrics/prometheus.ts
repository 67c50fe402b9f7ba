/**
 * Warren's Prometheus metrics, with prom-client: counters and histograms fed as things happen
 * (`Telemetry`), gauges read from the agent's state when scraped (`MetricsReadings`, readings.ts),
 * so a scrape shows the store as it is, not as the agent last heard.
 *
 * Names carry the `warren_` prefix and their unit. Cardinality is bounded by construction: no
 * label takes a container ID, an address or a pod; `command`, `code`, `source`, `result` and
 * `verdict` come from closed lists; `pool` and `network` come from network configs (any caller
 * may send new ones), so each keeps at most `maxLabelValues` values and folds the rest into
 * `_other` (labels.ts) — a node whose configs name ten thousand networks still exposes a bounded page.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Allocation } from '../../ipam/allocation.ts';
import { RELEASE_SOURCES, type ReleaseSource } from '../../api/dashboard.ts';
import type { AuditCounts, CommitResultKind, FailedCall, Telemetry } from './telemetry.ts';
import { BoundedLabel, codeLabel, commandLabel } from './labels.ts';
import type { MetricsReadings } from './readings.ts';
import type { ApiRequestCounter } from '../../store/kubernetes/api-requests.ts';
import { registerKubeApiRequests } from './kube-requests.ts';
import type { EtcdRequestCounter } from '../../store/etcd-tier/etcd-requests.ts';
import { registerEtcdRequests } from './etcd-requests.ts';

export interface AgentMetricsOptions {
  readonly version: string;
  readonly readings: MetricsReadings;
  /** The agent's requests to the Kubernetes API server (kube-requests.ts); none: not exposed. */
  readonly kubeRequests?: ApiRequestCounter;
  /** The agent's requests to etcd (etcd-requests.ts), on the etcd store; none: not exposed. */
  readonly etcdRequests?: EtcdRequestCounter;
  /** Most values a `pool` or `network` label takes before folding into `_other`; default 500. */
  readonly maxLabelValues?: number;
  /** Node process metrics (CPU, memory, event loop lag) under the same prefix; default on. */
  readonly processMetrics?: boolean;
}

/** Seconds: a CNI call on the agent is ~0.2 ms; a contended etcd commit can take a second. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class AgentMetrics implements Telemetry {
  readonly registry = new Registry();
  readonly #readings: MetricsReadings;
  readonly #pools: BoundedLabel;
  readonly #networks: BoundedLabel;
  readonly #cni: Histogram<'command' | 'code'>;
  readonly #allocations: Counter<'network'>;
  readonly #failures: Counter<'command' | 'code' | 'network'>;
  readonly #releases: Counter<'source'>;
  readonly #retries: Counter<'source'>;
  readonly #commits: Histogram<'result'>;
  readonly #conflicts: Counter;
  readonly #audits: Counter;
  readonly #findings: Gauge<'verdict'>;
  readonly #capacity: Gauge<'pool'>;
  readonly #allocated: Gauge<'pool'>;
  readonly #resting: Gauge<'pool'>;
  readonly #blocks: Gauge<'pool' | 'affinity'>;
  readonly #warrenPools: BoundedLabel;
  readonly #warrenPoolCapacity: Gauge<'warrenpool'>;
  readonly #warrenPoolUsed: Gauge<'warrenpool'>;
  readonly #journalPending: Gauge;
  readonly #bookkeeping: Gauge<'kind'>;
  readonly #journalSetAside: Gauge;
  readonly #queue: Gauge<'source'>;
  readonly #ready: Gauge;
  readonly #halted: Gauge;
  readonly #recovering: Gauge;

  constructor(options: AgentMetricsOptions) {
    this.#readings = options.readings;
    const bound = options.maxLabelValues ?? 500;
    this.#pools = new BoundedLabel(bound);
    this.#networks = new BoundedLabel(bound);
    const registers = [this.registry];
    new Gauge({
      name: 'warren_build_info',
      help: 'Always 1; the labels say which Warren and which Node.js run.',
      labelNames: ['version', 'node_version'],
      registers,
    }).set({ version: options.version, node_version: process.versions.node }, 1);
    if (options.kubeRequests !== undefined) registerKubeApiRequests(this.registry, options.kubeRequests);
    if (options.etcdRequests !== undefined) registerEtcdRequests(this.registry, options.etcdRequests);
    this.#cni = new Histogram({
      name: 'warren_cni_request_duration_seconds',
      help:
        'CNI calls answered by the agent, by command and outcome code (0 success, else the CNI error code), ' +
        'seconds from request to answer.',
      labelNames: ['command', 'code'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.#failures = new Counter({
      name: 'warren_cni_failures_total',
      help: 'CNI calls answered with an error, by command, CNI error code and network (the config name).',
      labelNames: ['command', 'code', 'network'],
      registers,
    });
    this.#allocations = new Counter({
      name: 'warren_allocations_total',
      help: 'Addresses allocated (committed), by network.',
      labelNames: ['network'],
      registers,
    });
    this.#releases = new Counter({
      name: 'warren_releases_total',
      help:
        'Addresses released (committed), by what released them: cni-del, gc, journal, containerd, ' +
        'kubernetes, plugin, audit, netns, operator, node-forget.',
      labelNames: ['source'],
      registers,
    });
    this.#retries = new Counter({
      name: 'warren_release_retries_total',
      help: 'Release attempts that failed and were retried, by source.',
      labelNames: ['source'],
      registers,
    });
    this.#queue = new Gauge({
      name: 'warren_release_queue_depth',
      help: 'Release intents queued or backing off in the release pipeline, by source.',
      labelNames: ['source'],
      registers,
    });
    this.#commits = new Histogram({
      name: 'warren_store_commit_duration_seconds',
      help: 'Store commits, by result (committed, conflict: another writer moved the pool first, error), seconds.',
      labelNames: ['result'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.#conflicts = new Counter({
      name: 'warren_store_commit_conflicts_total',
      help: 'Store commits that met a newer revision and were run again.',
      registers,
    });
    this.#audits = new Counter({
      name: 'warren_audits_total',
      help: 'Audits run (warren audit, and every reconcile pass).',
      registers,
    });
    this.#findings = new Gauge({
      name: 'warren_audit_findings',
      help: "The last audit's findings, by verdict (healthy, stale, suspect).",
      labelNames: ['verdict'],
      registers,
    });
    this.#capacity = new Gauge({
      name: 'warren_pool_capacity_addresses',
      help: 'Addresses a range holds.',
      labelNames: ['pool'],
      registers,
    });
    this.#allocated = new Gauge({
      name: 'warren_pool_allocated_addresses',
      help: 'Addresses allocated in a range (all nodes).',
      labelNames: ['pool'],
      registers,
    });
    this.#resting = new Gauge({
      name: 'warren_pool_resting_addresses',
      help: 'Addresses released in a range and resting out their cooldown.',
      labelNames: ['pool'],
      registers,
    });
    this.#blocks = new Gauge({
      name: 'warren_pool_blocks',
      help:
        "Blocks of a range split into blocks (etcd): owned by this node, or borrowed (another node's block " +
        'this node allocated from).',
      labelNames: ['pool', 'affinity'],
      registers,
    });
    this.#bookkeeping = new Gauge({
      name: 'warren_bookkeeping_addresses',
      help:
        'Addresses this node holds for no container, by kind (lent: placeholders of addresses lent to other ' +
        'nodes; returned; held). They are in use, so the pool gauges count them; no container holds them.',
      labelNames: ['kind'],
      registers,
    });
    this.#warrenPools = new BoundedLabel(options.maxLabelValues ?? 500);
    this.#warrenPoolCapacity = new Gauge({
      name: 'warren_warrenpool_capacity_addresses',
      help: "A WarrenPool's allocatable addresses, as its status shows them.",
      labelNames: ['warrenpool'],
      registers,
    });
    this.#warrenPoolUsed = new Gauge({
      name: 'warren_warrenpool_used_addresses',
      help: "A WarrenPool's addresses handed out on every node, as its status shows them.",
      labelNames: ['warrenpool'],
      registers,
    });
    this.#journalPending = new Gauge({
      name: 'warren_journal_pending_intents',
      help: 'Missed-delete intents in the journal not yet released.',
      registers,
    });
    this.#journalSetAside = new Gauge({
      name: 'warren_journal_set_aside_files',
      help: 'Journal files set aside in rejected/ (never released on).',
      registers,
    });
    this.#ready = new Gauge({
      name: 'warren_ready',
      help: '1 when the agent can serve ADD (store usable, readiness indicator present), else 0.',
      registers,
    });
    this.#halted = new Gauge({
      name: 'warren_cluster_store_halted',
      help:
        '1 while this node stopped allocating on its cluster store (it lost its data, or another agent took ' +
        'this node name) until `warren store accept`, else 0 (always 0 on a store of one node).',
      registers,
    });
    this.#recovering = new Gauge({
      name: 'warren_cluster_store_recovery',
      help:
        "1 while the cluster's recovery marker stands after its store lost its data (no node allocates until " +
        'every node listed accepted the store or was forgotten), else 0 (always 0 on a store of one node).',
      registers,
    });
    // Zero series for every closed label value: a rate() over a counter that appears late loses its first increase.
    for (const source of RELEASE_SOURCES) {
      this.#releases.inc({ source }, 0);
      this.#retries.inc({ source }, 0);
    }
    for (const verdict of ['healthy', 'stale', 'suspect']) this.#findings.set({ verdict }, 0);
    // The event-loop lag is sampled every 100 ms, not prom-client's 10 ms: an idle agent then costs
    // almost no CPU for it, and lag that matters lasts longer than that.
    if (options.processMetrics !== false)
      collectDefaultMetrics({ register: this.registry, prefix: 'warren_', eventLoopMonitoringPrecision: 100 });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition: gauges read now, then every metric as text. */
  async exposition(): Promise<string> {
    await this.#refresh();
    return this.registry.metrics();
  }

  cniCall(command: string, code: number, seconds: number): void {
    this.#cni.observe({ command: commandLabel(command), code: codeLabel(code) }, seconds);
  }

  cniFailed(failure: FailedCall): void {
    const labels = { command: commandLabel(failure.command), code: codeLabel(failure.code) };
    this.#failures.inc({ ...labels, network: this.#networks.of(failure.network) });
  }

  allocated(allocations: readonly Allocation[]): void {
    for (const a of allocations) this.#allocations.inc({ network: this.#networks.of(a.network) });
  }

  released(source: ReleaseSource, allocations: readonly Allocation[]): void {
    if (allocations.length > 0) this.#releases.inc({ source }, allocations.length);
  }

  commit(seconds: number, result: CommitResultKind): void {
    this.#commits.observe({ result }, seconds);
    if (result === 'conflict') this.#conflicts.inc();
  }

  retried(source: ReleaseSource): void {
    this.#retries.inc({ source });
  }

  audited(counts: AuditCounts): void {
    this.#audits.inc();
    for (const verdict of ['healthy', 'stale', 'suspect'] as const) this.#findings.set({ verdict }, counts[verdict]);
  }

  async #refresh(): Promise<void> {
    const [pools, ready] = await Promise.all([
      this.#readings.pools().catch(() => undefined),
      this.#readings.ready().catch(() => false),
    ]);
    this.#ready.set(ready ? 1 : 0);
    const cluster = this.#readings.cluster?.();
    this.#halted.set(cluster?.halted === true ? 1 : 0);
    this.#recovering.set(cluster?.recovering === true ? 1 : 0);
    if (pools !== undefined) {
      for (const gauge of [this.#capacity, this.#allocated, this.#resting, this.#blocks]) gauge.reset();
      // Folded pools add up under `_other`.
      const sums = new Map<
        string,
        { capacity?: number; allocated: number; resting: number; owned?: number; borrowed?: number }
      >();
      for (const p of pools) {
        const pool = this.#pools.of(p.pool);
        const s = sums.get(pool) ?? { allocated: 0, resting: 0 };
        s.allocated += p.allocated;
        s.resting += p.resting;
        if (p.capacity !== undefined) s.capacity = (s.capacity ?? 0) + p.capacity;
        if (p.blocks !== undefined) {
          s.owned = (s.owned ?? 0) + p.blocks.owned;
          s.borrowed = (s.borrowed ?? 0) + p.blocks.borrowed;
        }
        sums.set(pool, s);
      }
      for (const [pool, s] of sums) {
        this.#allocated.set({ pool }, s.allocated);
        this.#resting.set({ pool }, s.resting);
        if (s.capacity !== undefined) this.#capacity.set({ pool }, s.capacity);
        if (s.owned !== undefined) this.#blocks.set({ pool, affinity: 'owned' }, s.owned);
        if (s.borrowed !== undefined) this.#blocks.set({ pool, affinity: 'borrowed' }, s.borrowed);
      }
    }
    const bookkeeping = await this.#readings.bookkeeping?.().catch(() => undefined);
    if (bookkeeping !== undefined) {
      this.#bookkeeping.reset();
      for (const [kind, n] of Object.entries(bookkeeping)) this.#bookkeeping.set({ kind }, n);
    }
    const warrenPools = this.#readings.warrenPools?.() ?? [];
    this.#warrenPoolCapacity.reset();
    this.#warrenPoolUsed.reset();
    for (const p of warrenPools) {
      // A pool folded into `_other` adds up there, as ranges do.
      const warrenpool = this.#warrenPools.of(p.name);
      if (p.capacity !== undefined) this.#warrenPoolCapacity.inc({ warrenpool }, p.capacity);
      if (p.used !== undefined) this.#warrenPoolUsed.inc({ warrenpool }, p.used);
    }
    const journal = this.#readings.journal();
    this.#journalPending.set(journal.pending);
    this.#journalSetAside.set(journal.setAside);
    const depth = this.#readings.queueDepth();
    for (const source of RELEASE_SOURCES) this.#queue.set({ source }, depth[source] ?? 0);
  }
}
