/**
 * The agent's status and its readiness, read now: what `warren status`, the dashboard and the
 * readiness probe show (server/operator-service.ts asks it). A store that does not answer its ping is
 * reported unhealthy; what can still be read of it is shown (a two-tier store whose range is halted
 * fails its ping and answers reads: its cluster part says what an operator must do), and nothing more
 * once its reads fail too; the cluster's part is read only while the store's reads answer
 * (cluster-status.ts).
 *
 * Ready means an ADD can commit now: the readiness indicator is there, on a cluster store this node
 * is announced and has not stopped allocating (the store lost its data, or another agent took its
 * name), the store answers its ping, and the last commit did not fail (server/commit-health.ts says why
 * the ping alone is not enough).
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import type { PeriodicTaskStatus } from '../../core/periodic-task.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isBlockKey } from '../../ipam/blocks.ts';
import type { AcceptReport, Membership, Store } from '../../store/store.ts';
import type {
  AgentStatus,
  CniConfigStatus,
  ContainerdStatus,
  KubernetesStatus,
  MetricsEndpointStatus,
  PluginsStatus,
} from '../../api/status.ts';
import type { ReleaseReconciler } from '../release/reconciler.ts';
import type { CommitHealth } from './commit-health.ts';
import { pluginCounts } from './operator-reports.ts';
import { bookkeepingCounts, bookkeepingTotal } from './bookkeeping-counts.ts';
import { ClusterStatus } from './cluster-status.ts';
import type { ApiRequestRate } from '../../store/kubernetes/api-requests.ts';
import type { EtcdRequestRate } from '../../store/etcd-tier/etcd-requests.ts';

/** What the agent's status is read from (operator-service.ts's options hold these and more). */
export interface AgentStatusOptions {
  readonly store: Store;
  /**
   * The store's membership, present when the options say nodes share the store (never found by
   * asking the store): the live nodes in status and on the dashboard, `warren nodes`, node forget.
   */
  readonly membership?: Membership | undefined;
  readonly clock: Clock;
  readonly socket: string;
  readonly version: string;
  readonly reconciler: ReleaseReconciler;
  /** The containerd event source and what it released, when enabled. */
  readonly containerd?: (() => ContainerdStatus) | undefined;
  /** The Kubernetes sources and what they released, when enabled. */
  readonly kubernetes?: (() => KubernetesStatus) | undefined;
  /** Why the agent is not ready apart from its store (the readiness indicator); undefined when it is. */
  readonly notReady?: () => string | undefined;
  /**
   * How the store's commits went (it watches the store the allocator commits through); without it
   * the ping alone decides.
   */
  readonly commits?: CommitHealth;
  /** The CNI config manager, when enabled. */
  readonly cniConfig?: () => CniConfigStatus;
  /** The plugin registry, when on. */
  readonly plugins?: (() => PluginsStatus) | undefined;
  /** Where metrics and the dashboard are served, when on. */
  readonly metrics?: () => MetricsEndpointStatus;
  /** The agent's requests to the Kubernetes API server, a minute, when it talks to one. */
  readonly kubeApi?: (() => ApiRequestRate) | undefined;
  /** The agent's requests to etcd, a minute, on the etcd store. */
  readonly etcdApi?: (() => EtcdRequestRate) | undefined;
  /**
   * On a cluster store: why this node must not allocate (also in `notReady`), and the operator's
   * word that the store as it is now is the one to use (`warren store accept`).
   */
  readonly cluster?: {
    readonly problem: () => string | undefined;
    readonly accept: () => Promise<AcceptReport>;
    /** The cluster chores' runs (agent/cluster/upkeep.ts). */
    readonly upkeep?: () => PeriodicTaskStatus;
  };
}

export class AgentStatusReader {
  readonly #o: AgentStatusOptions;
  /** This agent's node (the allocator's). */
  readonly #node: string;
  readonly #startedAt: number;
  /** The cluster's part of status, on a store nodes share (cluster-status.ts). */
  readonly #clusterStatus: ClusterStatus | undefined;

  constructor(options: AgentStatusOptions, node: string) {
    this.#o = options;
    this.#node = node;
    this.#startedAt = options.clock.now();
    this.#clusterStatus =
      options.membership === undefined
        ? undefined
        : new ClusterStatus({
            membership: options.membership,
            store: options.store,
            node,
            clock: options.clock,
            ...(options.cluster === undefined ? {} : { problem: options.cluster.problem }),
            ...defined({ upkeep: options.cluster?.upkeep }),
          });
  }

  /** Throws NOT_READY when ADD cannot be served. */
  async readiness(): Promise<void> {
    const notReady = this.#o.notReady?.();
    if (notReady !== undefined) throw new WarrenError('NOT_READY', notReady);
    try {
      await this.#o.store.ping();
    } catch (error) {
      throw new WarrenError('NOT_READY', `store ${this.#o.store.description} is not usable: ${messageOf(error)}`, {
        cause: error,
      });
    }
    const failing = this.#o.commits?.problem();
    if (failing !== undefined) throw new WarrenError('NOT_READY', `store ${this.#o.store.description}: ${failing}`);
  }

  /** The status, and whether the store answers reads (it may, while its commits fail). */
  async read(): Promise<{ status: AgentStatus; readable: boolean }> {
    let pingError: string | undefined;
    try {
      await this.#o.store.ping();
    } catch (e) {
      pingError = (e as Error).message;
    }
    // Read even when the ping failed: a halted range fails it, and the cluster part then says why and what
    // to do (soak, kubernetes seed 3818: an operator saw no problem on a halted node and never accepted it).
    const pools = await this.#o.store.ledgers().catch((e: unknown) => {
      pingError ??= messageOf(e);
      return undefined;
    });
    const readable = pools !== undefined;
    // A store that answers can be read even while its commits fail.
    const failing = pingError === undefined ? this.#o.commits?.problem() : undefined;
    const error = pingError ?? failing;
    const bookkeeping = readable ? await bookkeepingCounts(this.#o.store) : {};
    const cluster =
      this.#clusterStatus === undefined || pools === undefined ? undefined : await this.#clusterStatus.read(pools);
    const now = this.#o.clock.now();
    const notReady =
      pingError !== undefined
        ? `store ${this.#o.store.description} is not usable: ${pingError}`
        : failing !== undefined
          ? `store ${this.#o.store.description}: ${failing}`
          : this.#o.notReady?.();
    const status: AgentStatus = {
      node: this.#node,
      pid: process.pid,
      version: this.#o.version,
      startedAt: new Date(this.#startedAt).toISOString(),
      uptimeSeconds: Math.round((now - this.#startedAt) / 1000),
      socket: this.#o.socket,
      store: {
        description: this.#o.store.description,
        healthy: error === undefined,
        ...defined({ error }),
      },
      ready: notReady === undefined,
      ...defined({ notReady }),
      // Ranges, not blocks: a range split into blocks has a ledger of its own.
      pools: (pools ?? []).filter((p) => !isBlockKey(p.ledger)).length,
      // The pools count every record holding an address; a bookkeeping record is no container's.
      allocations: (pools ?? []).reduce((sum, p) => sum + p.allocated, 0) - bookkeepingTotal(bookkeeping),
      ...(bookkeepingTotal(bookkeeping) === 0 ? {} : { bookkeeping }),
      reconciler: this.#o.reconciler.status(),
      ...defined({ cluster }),
      ...(this.#o.containerd === undefined ? {} : { containerd: this.#o.containerd() }),
      ...(this.#o.kubernetes === undefined ? {} : { kubernetes: this.#o.kubernetes() }),
      ...(this.#o.cniConfig === undefined ? {} : { cniConfig: this.#o.cniConfig() }),
      ...(this.#o.plugins === undefined ? {} : { plugins: pluginCounts(this.#o.plugins()) }),
      ...(this.#o.metrics === undefined ? {} : { metrics: this.#o.metrics() }),
      ...(this.#o.kubeApi === undefined ? {} : { kubeApi: this.#o.kubeApi() }),
      ...(this.#o.etcdApi === undefined ? {} : { etcdApi: this.#o.etcdApi() }),
    };
    return { status, readable };
  }
}
