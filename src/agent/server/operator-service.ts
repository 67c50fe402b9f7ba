/**
 * The operator-facing queries and actions of the agent (status, pools, allocations, release,
 * audit, nodes), over the allocator and the store. Methods take typed input (the route table has
 * parsed the request) and answer the wire shapes of api/protocol.ts. Release by hand is the same
 * idempotent release a DEL does: releasing what is not allocated releases nothing.
 *
 * The status and what ready means are server/agent-status.ts's; what the store answered is shaped
 * into reports by server/operator-reports.ts (pure); this service reads, decides who may ask what,
 * and acts.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import type { AgentStatus, PluginsStatus, ReconcilerStatus, UninstallReport } from '../../api/status.ts';
import type {
  AcceptStoreResponse,
  AllocationPage,
  AllocationPageRequest,
  AllocationQuery,
  AuditReport,
  ForgetNodeResponse,
  NodeReport,
  PoolReport,
  ReleaseRequest,
  ReleaseResponse,
  ReservationsReport,
} from '../../api/protocol.ts';
import type { DashboardData } from '../../api/dashboard.ts';
import type { DoctorFacts } from '../../api/doctor.ts';
import { type AgentStatusOptions, AgentStatusReader } from './agent-status.ts';
import { allocationFilterOf, nodeReports, poolReports } from './operator-reports.ts';
import { type PublishedView, type RecentReads, clusterPage, localPage, recentReads } from './allocation-pages.ts';
import { type WatchedReservation, reservationReports } from './reservation-reports.ts';
import type { FailureHistory } from '../metrics/failure-history.ts';
import { ReleaseHistory } from '../metrics/release-history.ts';
import { publishedNodes } from './cluster-nodes.ts';
import { withClusterFigures } from './cluster-pools.ts';
import { operatorRelease } from './operator-release.ts';
import { NO_TELEMETRY, type Telemetry } from '../metrics/telemetry.ts';

export interface AgentServiceOptions extends AgentStatusOptions {
  readonly allocator: Allocator;
  /** Told what an operator's release and a node forgotten released (metrics, the last-releases list). */
  readonly telemetry?: Telemetry;
  /** The last releases and totals by source, for the dashboard. */
  readonly history?: ReleaseHistory;
  /** The failed CNI calls, for the dashboard. */
  readonly failures?: FailureHistory;
  /** The agent's own setup, for `warren doctor`. */
  readonly doctor?: () => Promise<DoctorFacts>;
  /** `warren uninstall`: hands the node back to the primary's IPAM (node/hand-back.ts). */
  readonly uninstall?: () => Promise<UninstallReport>;
  /** Every node's allocations as published, on a store that publishes them (Kubernetes). */
  readonly published?: PublishedView | undefined;
  /** The WarrenReservations as watched, when the Kubernetes source watches them. */
  readonly reservations?: (() => readonly WatchedReservation[]) | undefined;
}

export class AgentService {
  readonly #o: AgentServiceOptions;
  /** The agent's status and readiness (agent-status.ts). */
  readonly #status: AgentStatusReader;
  readonly #telemetry: Telemetry;
  readonly #history: ReleaseHistory;
  /** The published view with its last reads kept for the next page of a listing (allocation-pages.ts). */
  readonly #published: RecentReads | undefined;

  constructor(options: AgentServiceOptions) {
    this.#o = options;
    this.#published = options.published === undefined ? undefined : recentReads(options.published, options.clock);
    this.#status = new AgentStatusReader(options, options.allocator.node);
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
    this.#history = options.history ?? new ReleaseHistory(options.clock);
  }

  /** Throws NOT_READY when ADD cannot be served (agent-status.ts). */
  readiness(): Promise<void> {
    return this.#status.readiness();
  }

  async status(): Promise<AgentStatus> {
    return (await this.#status.read()).status;
  }

  /** Everything the dashboard shows, read now. */
  async dashboard(): Promise<DashboardData> {
    const { status, readable } = await this.#status.read();
    const shared = readable && this.#o.membership !== undefined;
    // Nodes only the cluster store knows: none shown while it is away (status says it could not be read).
    const nodes = shared ? this.nodes(false).catch(() => undefined) : undefined;
    const [pools, known] = await Promise.all([readable ? this.pools() : [], nodes]);
    return {
      generatedAt: new Date(this.#o.clock.now()).toISOString(),
      status,
      pools,
      ...defined({ nodes: known }),
      releases: this.#history.recent(),
      releasesBySource: this.#history.totals(),
      ...(this.#o.failures === undefined
        ? {}
        : { failuresByCode: this.#o.failures.counts(), failures: this.#o.failures.recent() }),
      ...(this.#o.plugins === undefined ? {} : { plugins: this.#o.plugins() }),
    };
  }

  /** The agent's own setup, for `warren doctor`. */
  async doctor(): Promise<DoctorFacts> {
    if (this.#o.doctor === undefined) throw new WarrenError('BAD_REQUEST', 'this agent does not report its setup');
    return this.#o.doctor();
  }

  /** `warren uninstall`: hands the node back (agent/node/hand-back.ts). */
  async uninstall(): Promise<UninstallReport> {
    if (this.#o.uninstall === undefined) throw new WarrenError('BAD_REQUEST', 'this agent cannot hand its node back');
    return this.#o.uninstall();
  }

  /** Every socket the plugin registry knows, with its state. */
  plugins(): PluginsStatus {
    if (this.#o.plugins === undefined)
      throw new WarrenError('BAD_REQUEST', 'the plugin registry is off (--plugins-dir is empty)');
    return this.#o.plugins();
  }

  /** Every allocation judged against what the node can observe; `fix` releases the provably stale. */
  async audit(fix: boolean): Promise<AuditReport> {
    return this.#o.reconciler.audit(fix);
  }

  journal(): ReconcilerStatus {
    return this.#o.reconciler.status();
  }

  /** The reservations as watched, with the ranges of this store they cover (reservation-reports.ts). */
  async reservations(): Promise<ReservationsReport> {
    const watched = this.#o.reservations;
    if (watched === undefined) return { watched: false, reservations: [] };
    const list = watched();
    return {
      watched: true,
      reservations: reservationReports(list, list.length === 0 ? [] : await this.#o.store.ledgers()),
    };
  }

  /**
   * Every pool; a range split into blocks is reported whole (its blocks summed) and block by block.
   * With `cluster` (`warren pools`), on a store that publishes, a shared range also across the
   * cluster (cluster-pools.ts): this node's blocks alone are its share, not the range's state. The
   * dashboard and metrics, which refresh on their own, read none of it.
   */
  async pools(cluster = false): Promise<PoolReport[]> {
    const reports = poolReports(await this.#o.store.ledgers());
    const published = cluster ? this.#o.published : undefined;
    return published === undefined ? reports : withClusterFigures(reports, published);
  }

  /**
   * Nodes sharing the store: announced ones, and any that still own blocks or allocations. With
   * `cluster` (the default, `warren nodes`), other nodes' blocks are read from what the cluster
   * published, page by page; the dashboard, which refreshes on its own, reads none of it.
   */
  async nodes(cluster = true): Promise<NodeReport[]> {
    const membership = this.#o.membership;
    if (membership === undefined)
      throw new WarrenError(
        'BAD_REQUEST',
        `store ${this.#o.store.description} is not shared by nodes; nodes exist with --store etcd`,
      );
    const published = cluster ? this.#o.published : undefined;
    const [live, summaries, allocations, others] = await Promise.all([
      membership.liveNodes(),
      this.#o.store.ledgers(),
      this.#o.store.list(),
      // This store knows its own blocks only: every other node's are read from the cluster, paged.
      published === undefined ? undefined : publishedNodes(published, this.#o.allocator.node),
    ]);
    return nodeReports(live, summaries, allocations, others);
  }

  /**
   * After the agent stopped allocating on its cluster store (it lost its data, or another agent took
   * this node's name): the operator's word that the store as it is now is the one to use.
   */
  async acceptStore(): Promise<AcceptStoreResponse> {
    const cluster = this.#o.cluster;
    if (cluster === undefined)
      throw new WarrenError(
        'BAD_REQUEST',
        `store ${this.#o.store.description} is not shared by nodes; there is nothing to accept`,
      );
    const before = cluster.problem();
    const report = await cluster.accept();
    const after = cluster.problem();
    return {
      accepted: before ?? 'nothing: allocation was not stopped',
      ...report,
      ...defined({ problem: after }),
    };
  }

  /** Frees what a node that is gone for good held; refuses while its agent is alive. */
  async forgetNode(node: string): Promise<ForgetNodeResponse> {
    const membership = this.#o.membership;
    if (membership === undefined)
      throw new WarrenError(
        'BAD_REQUEST',
        `store ${this.#o.store.description} is not shared by nodes; there is no node to forget`,
      );
    if (await membership.alive(node, { toldGone: true })) {
      throw new WarrenError(
        'BAD_REQUEST',
        `node ${node} is alive (its agent holds its announcement, and renews it or answers a ping); stop that ` +
          `agent first, or wait for its lease to lapse`,
      );
    }
    const forgotten = await this.#o.allocator.forgetNode(node);
    // Its blocks are given up: the cluster no longer waits for it to accept a store that lost its data.
    if (membership.recovery() !== undefined) await membership.leaveRecovery(node);
    this.#telemetry.released(
      'node-forget',
      forgotten.released,
      `node ${node} forgotten by an operator (warren node forget)`,
    );
    return { node, ...forgotten };
  }

  async allocations(query: AllocationQuery): Promise<Allocation[]> {
    return this.#o.store.list(allocationFilterOf(query));
  }

  /** One page (server/allocation-pages.ts): of this agent's store, or of every node's as published. */
  async allocationsPage(query: AllocationQuery, page: AllocationPageRequest): Promise<AllocationPage> {
    const filter = allocationFilterOf(query);
    if (page.cluster !== true) return localPage(this.#o.store, filter, page);
    if (this.#published === undefined)
      throw new WarrenError(
        'BAD_REQUEST',
        `store ${this.#o.store.description} publishes no allocations of other nodes; ` +
          '--cluster needs --store kubernetes or etcd',
      );
    return clusterPage(this.#published.forPage(page), filter, page);
  }

  /** {address, pool?}: that address. {containerID, network?, ifname?}: everything it holds (operator-release.ts). */
  async release(request: ReleaseRequest): Promise<ReleaseResponse> {
    return operatorRelease(request, {
      store: this.#o.store,
      allocator: this.#o.allocator,
      inUse: (held) => this.#o.reconciler.inUse(held),
      telemetry: this.#telemetry,
    });
  }
}
