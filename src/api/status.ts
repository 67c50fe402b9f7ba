/**
 * The agent's state as its API answers it (part of the wire contract, protocol.ts): the status
 * (GET /v1/status), the missed-delete journal and its reconcile pass (GET /v1/journal), and the
 * plugin registry (GET /v1/plugins); the node config's part is in node-config-status.ts. Each part
 * of the agent reports its own piece; `AgentStatus` gathers them. The stability rule of protocol.ts
 * holds here: fields are added, never renamed.
 */

import type { PeriodicTaskStatus } from '../core/periodic-task.ts';
import type { FileCheckStatus } from '../store/cluster.ts';
import type { EtcdRequestRate } from '../store/etcd-tier/etcd-requests.ts';
import type { ApiRequestRate } from '../store/kubernetes/api-requests.ts';
import type { CniConfigStatus } from './node-config-status.ts';

export type { FileCheckStatus };
export type { CniConfigStatus, HandBackReport, TakeoverStatus, UninstallReport } from './node-config-status.ts';

// ---------------------------------------------------------------------------------------------
// Status (GET /v1/status) and the journal (GET /v1/journal)

export interface AgentStatus {
  readonly node: string;
  readonly pid: number;
  readonly version: string;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  readonly socket: string;
  readonly store: { readonly description: string; readonly healthy: boolean; readonly error?: string };
  /** Whether ADD can be served now: the store answers and the readiness indicator is there. */
  readonly ready: boolean;
  /** Why not, when not ready. */
  readonly notReady?: string;
  /** Ranges in use (a range split into blocks counts once). */
  readonly pools: number;
  /** Addresses held for containers (bookkeeping records are counted apart, below). */
  readonly allocations: number;
  /**
   * Addresses this node holds for itself, not for a container, by kind (ipam/bookkeeping.ts):
   * `lent` (placeholders of addresses lent to other nodes), `returned`, `held`. Absent when none.
   */
  readonly bookkeeping?: Readonly<Record<string, number>>;
  readonly reconciler: ReconcilerStatus;
  /** On a store shared by nodes: who is alive, and the blocks this node holds. */
  readonly cluster?: ClusterStatus;
  /** The containerd event source, when enabled. */
  readonly containerd?: ContainerdStatus;
  /** The Kubernetes pod (and node) sources and what they released, when enabled. */
  readonly kubernetes?: KubernetesStatus;
  /** The CNI config manager, when it manages the node's config. */
  readonly cniConfig?: CniConfigStatus;
  /** The plugin registry, when on: counts (the whole list is GET /v1/plugins). */
  readonly plugins?: PluginCounts;
  /** Where metrics and the dashboard are served (as bound: port 0 resolved), or why they are not; absent when off. */
  readonly metrics?: MetricsEndpointStatus;
  /** The agent's own requests to the Kubernetes API server, a minute, when it talks to one. */
  readonly kubeApi?: ApiRequestRate;
  /** The agent's own requests to etcd, a minute, on the etcd store. */
  readonly etcdApi?: EtcdRequestRate;
}

/** The metrics address: `http://address/metrics`, the dashboard at `http://address/`; `error` when not bound. */
export interface MetricsEndpointStatus {
  readonly address: string;
  readonly error?: string;
}

/** A list-then-watch of the Kubernetes API. Times are ISO 8601. */
export interface ListWatchStatus {
  readonly state: 'listing' | 'watching' | 'backing-off' | 'stopped';
  readonly since: string;
  readonly relists: number;
  readonly reconnects: number;
  readonly lastListedAt?: string;
  readonly lastError?: string;
  /** The permission the API server refused, named ("list pods"). */
  readonly forbidden?: string;
}

export interface KubernetesStatus {
  readonly pods: ListWatchStatus;
  /** Pods gone whose addresses are being released, or wait for their grace or namespace. */
  readonly releases: {
    readonly tracked: number;
    readonly waiting: ReadonlyArray<{
      readonly pod: string;
      readonly uid: string;
      readonly because: string;
      readonly until: string;
    }>;
    readonly released: number;
    readonly gaveUp: number;
    readonly resyncs: number;
    readonly queue: {
      readonly depth: number;
      readonly processing: number;
      readonly delayed: number;
      readonly retries: number;
    };
  };
  readonly events: {
    readonly sent: number;
    readonly aggregated: number;
    readonly dropped: number;
    readonly refused: number;
    readonly forbidden?: string;
    readonly lastError?: string;
  };
  /** With a store shared by nodes: Nodes gone from Kubernetes, and those this agent forgot. */
  readonly nodes?: ListWatchStatus & {
    readonly watcher: boolean; // the Nodes are watched here: this agent holds the chore `nodes`
    readonly gone: readonly string[];
    readonly forgotten: readonly string[];
    readonly forgetError?: string;
  };
  /** Cluster-wide reservations (WarrenReservation): the watch, and what this node reports of them. */
  readonly reservations?: ListWatchStatus & {
    readonly reservations: number;
    readonly malformed: readonly string[];
    readonly inUseHere: number;
    readonly statusWrites: number;
    readonly statusError?: string;
  };
  /** What the ADD planners read: the pod directory, the namespaces and (kubernetes store) the WarrenPools. */
  readonly planning?: PlanningStatus;
  /** On the kubernetes store: KubeVirt's IPAMClaims (the watch, statuses written, holdings ended). */
  readonly ipamClaims?: IpamClaimsReport;
  /** Every permission the API server refused, named; empty when none was. */
  readonly forbidden: readonly string[];
}

/** A WarrenPool as the agent's watch last showed it, with the status the cluster keeps for it. */
export interface WarrenPoolReport {
  readonly name: string;
  /** Its ranges (subnets), in the order written. */
  readonly ranges: readonly string[];
  /** Allocatable addresses, in decimal (status.capacity); absent before the status is written. */
  readonly capacity?: string;
  readonly used?: number;
  readonly blocks?: number;
  readonly nodes?: number;
  /** The selectors as kubectl writes them; absent: every node, every namespace. */
  readonly nodeSelector?: string;
  readonly namespaceSelector?: string;
  readonly sticky: boolean;
  /** Why the pool cannot be used (its spec does not parse). */
  readonly problem?: string;
}

/** The agent's side of KubeVirt's IPAMClaims (agent/kubernetes/ipam-claims/). */
export interface IpamClaimsReport {
  /** Whether the API server serves IPAMClaims (the watch runs only then); absent before it was asked. */
  readonly served?: boolean;
  readonly watch: ListWatchStatus;
  /** Claims the cache holds, whether the watch has listed, and GETs made for claims not held yet. */
  readonly cache: { readonly claims: number; readonly listed: boolean; readonly gets: number };
  readonly statusWrites: {
    readonly pending: number;
    readonly written: number;
    readonly gaveUp: number;
    readonly lastError?: string;
  };
  /** Holdings of deleted claims this agent ended, and ends still to do. */
  readonly upkeep: { readonly ended: number; readonly pending: number; readonly lastError?: string };
  /** The chore asking whether IPAMClaims are served, until they are (then the watch runs). */
  readonly servedCheck: PeriodicTaskStatus;
}

export interface PlanningStatus {
  /** This node's pods and the namespaces held, and the GETs made for ones not held yet. */
  readonly directory: {
    readonly pods: number;
    readonly namespaces: number;
    readonly namespacesListed: boolean;
    readonly podGets: number;
    readonly namespaceGets: number;
  };
  readonly namespaces: ListWatchStatus;
  /** On the kubernetes store: the WarrenPools' watch and what it holds. */
  readonly pools?: ListWatchStatus & {
    readonly listed: boolean;
    readonly list: readonly WarrenPoolReport[];
    /** This node's labels are read (pools with a nodeSelector wait for them). */
    readonly nodeLabelsRead: boolean;
    readonly statusWriter?: {
      readonly rounds: number;
      readonly written: number;
      readonly lastError?: string;
      readonly chore: PeriodicTaskStatus;
    };
  };
  /** On a store that keeps holdings: the chore ending the sticky holdings of uncovered ordinals. */
  readonly stickyRelease?: {
    readonly listed: boolean;
    readonly ended: number;
    readonly lastError?: string;
    readonly chore: PeriodicTaskStatus;
  };
}

export interface ClusterStatus {
  /** The nodes alive, as read now; or, when `unread` says they could not be, as last read (or none). */
  readonly liveNodes: readonly string[];
  readonly ownBlocks: number;
  /** Whether `liveNodes` lists this node. */
  readonly thisNodeAnnounced: boolean;
  /**
   * Why the live nodes could not be read now (the cluster store is away: the agent still serves the
   * blocks it holds). `liveNodes` and `thisNodeAnnounced` are then as read at `liveNodesReadAt`, or
   * empty and false when they never were.
   */
  readonly unread?: string;
  /** When `liveNodes` was read (ISO 8601), present when `unread` is: they are not from now. */
  readonly liveNodesReadAt?: string;
  /**
   * Why this node does not allocate: not announced yet, or stopped until an operator acts (the
   * store lost its data, or another agent instance took this node's name).
   */
  readonly problem?: string;
  /**
   * This node's file held against what it published (store/tiered/file-check.ts): a file restored
   * from an older copy, or lost, takes back what the cluster lists for it.
   */
  readonly fileCheck?: FileCheckStatus;
  /** The cluster chores (announcement, give-back, lending, holdings): their runs, one per upkeep interval. */
  readonly upkeep?: PeriodicTaskStatus;
}

/** The missed-delete journal and the reconcile loop that drains it. Times are ISO 8601. */
export interface ReconcilerStatus {
  readonly journalDir: string;
  /** The journal directory has been listed once since start: every intent in it is known. */
  readonly listed: boolean;
  readonly pending: readonly PendingIntentStatus[];
  /** Files set aside in `rejected/` (recent ones), never released on. */
  readonly rejected: ReadonlyArray<{ readonly name: string; readonly reason: string }>;
  /** Files whose last read failed for a passing reason (EMFILE, EIO), read again on the next pass. */
  readonly unread: ReadonlyArray<{ readonly name: string; readonly error: string }>;
  readonly releasedFromJournal: number;
  readonly lastReconcile?: ReconcileReport;
  readonly recentErrors: ReadonlyArray<{ readonly at: string; readonly message: string }>;
}

export interface PendingIntentStatus {
  /** The journal file's name. */
  readonly name: string;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  readonly failures: number;
  readonly nextAttemptAt?: string;
  readonly lastError?: string;
}

/** What one reconcile pass did. */
export interface ReconcileReport {
  readonly at: string;
  readonly durationMs: number;
  readonly journalReleased: number;
  readonly journalFailed: number;
  readonly netnsReleased: number;
  readonly pending: number;
  /** Why the namespace sweep released nothing on some allocations' account, when it could not look. */
  readonly unobservable: readonly string[];
}

export type ContainerdState = 'waiting-for-socket' | 'connecting' | 'subscribed' | 'reconnecting' | 'stopped';

export interface ContainerdStatus {
  readonly socket: string;
  readonly namespaces: readonly string[];
  readonly state: ContainerdState;
  /** When the state last changed. */
  readonly since: string;
  readonly subscriptions: number;
  readonly events: number;
  readonly skipped: number;
  readonly malformed: number;
  readonly lastError?: string;
  readonly lastResync?: { readonly at: string; readonly containers: number };
  /** What the events released, and what is still waiting. */
  readonly releases: {
    readonly released: number;
    /** Containers whose task exited and whose namespace still exists (or cannot be observed). */
    readonly exited: ReadonlyArray<{
      readonly containerID: string;
      readonly since: string;
      readonly waitingFor: string;
    }>;
    /** Containers with events waiting or backing off. */
    readonly queue: readonly QueueKeyStatus[];
  };
}

// ---------------------------------------------------------------------------------------------
// The plugin registry (GET /v1/plugins)

/**
 * One socket the registry knows. `registering`/`unregistering`: an operation is running on it;
 * `registered`: its handshake passed and its handler serves it; `refused`: its PluginInfo was
 * invalid (it was told why; it is asked again only when its socket is replaced); `retrying`: an
 * attempt failed (no answer, the handler could not start) and the next is due at `retryAt`.
 */
export type PluginState = 'registering' | 'registered' | 'refused' | 'retrying' | 'unregistering';

export interface PluginEntry {
  /** The socket's path in the plugins directory. */
  readonly socket: string;
  readonly state: PluginState;
  /** From its PluginInfo, once it answered. */
  readonly type?: string;
  readonly name?: string;
  /** The endpoint used (absolute), and the version chosen, once registered. */
  readonly endpoint?: string;
  readonly version?: string;
  /** When the state last changed. */
  readonly since: string;
  /** Why it was refused, or the last failure. */
  readonly error?: string;
  /** Consecutive failed attempts. */
  readonly failures: number;
  /** When the next attempt is due, while retrying. */
  readonly retryAt?: string;
  /** What the plugin's type reports about it (an event source: its stream's state and counters). */
  readonly detail?: Readonly<Record<string, unknown>>;
}

export interface PluginCounts {
  readonly registered: number;
  readonly refused: number;
  readonly retrying: number;
}

export interface PluginsStatus extends PluginCounts {
  readonly dir: string;
  /** Why the plugins directory is not trusted (no plugin registers while it is not). */
  readonly problem?: string;
  /** `listing`: the directory is being read for the first time; `watching`: every socket present at start was seen. */
  readonly watcher: 'listing' | 'watching';
  readonly plugins: readonly PluginEntry[];
}

export interface QueueKeyStatus {
  readonly key: string;
  readonly queued: number;
  readonly failures: number;
  readonly lastError?: string;
  /** When the next attempt is due (ms since the epoch), while backing off. */
  readonly retryAt?: number;
}
