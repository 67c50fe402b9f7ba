/**
 * The agent's wire contract: what the plugin and the CLI send the agent and what it answers, as
 * JSON over HTTP on its unix socket (routes.ts says which route carries which). The agent's code
 * produces these shapes and the clients read them; neither side defines them for the other.
 *
 * Stability: a field once answered keeps its name and meaning (scripts read `--json` output);
 * fields may be added. Every failure outside a CNI call is an `ErrorAnswer` with a Warren error
 * code (errors.ts maps each code to its one HTTP status). A CNI call whose body could be read (JSON,
 * within the size limit) answers 200 with a `CniOutcome`: its errors are CNI error objects, which
 * the plugin prints as they are.
 */
import type { CniErrorObject } from '../cni/errors.ts';
import type { Allocation } from '../ipam/allocation.ts';

export type { Allocation };

// ---------------------------------------------------------------------------------------------
// CNI calls (POST /v1/cni)

/**
 * What the plugin sends: its CNI variables and the network config from stdin. Unchecked on the
 * wire: the agent trusts no caller and checks every field with the plugin's own rules.
 */
export interface CniRequest {
  readonly command: string;
  readonly containerID?: string;
  readonly netns?: string;
  readonly ifname?: string;
  /** CNI_ARGS as the runtime set it. */
  readonly args?: string;
  readonly config: unknown;
}

/** Exactly one per call: a result to print, nothing to print, or a CNI error object to print. */
export type CniOutcome =
  | { readonly kind: 'result'; readonly output: Record<string, unknown> }
  | { readonly kind: 'silent' }
  | { readonly kind: 'error'; readonly output: CniErrorObject };

// ---------------------------------------------------------------------------------------------
// Errors

/** The body of every non-200 answer. `code` is a WarrenErrorCode; `message` names the problem. */
export interface ErrorAnswer {
  readonly error: { readonly code: string; readonly message: string };
}

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
  readonly allocations: number;
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
}

/** The metrics address: `http://address/metrics` and the dashboard at `http://address/`; `error` when it could not be bound. */
export interface MetricsEndpointStatus {
  readonly address: string;
  readonly error?: string;
}

/**
 * The CNI config manager. `current`: Warren's file is derived from the primary as it is now;
 * `stale`: it is not (the primary is gone, broken or cannot be taken over: `problem` says which),
 * the last good file stays; `waiting`: no primary yet, within --primary-wait; `not-ready`: the
 * readiness indicator is missing and Warren's file is removed; `failed`: the write itself failed.
 */
export interface CniConfigStatus {
  readonly state: 'waiting' | 'current' | 'stale' | 'not-ready' | 'failed';
  readonly confDir: string;
  /** Warren's file. */
  readonly output: string;
  readonly cniVersionMax: string;
  /** The primary's path, when there is one. */
  readonly primary?: string;
  /** The network name, kept from the primary. */
  readonly network?: string;
  readonly problem?: string;
  /** What was dropped from the primary's IPAM on the way, each with why. */
  readonly notes?: readonly string[];
  /** A config that sorts before Warren's: the runtime uses it, not Warren's. */
  readonly shadowedBy?: string;
  /** The last time this agent wrote its file: when (ISO 8601), from which primary, its digest. */
  readonly lastWrite?: { readonly at: string; readonly from: string; readonly sha256: string };
  readonly writes: number;
  readonly readinessIndicator?: { readonly path: string; readonly present: boolean };
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
    readonly waiting: ReadonlyArray<{ readonly pod: string; readonly uid: string; readonly because: string; readonly until: string }>;
    readonly released: number;
    readonly gaveUp: number;
    readonly resyncs: number;
    readonly queue: { readonly depth: number; readonly processing: number; readonly delayed: number; readonly retries: number };
  };
  readonly events: { readonly sent: number; readonly aggregated: number; readonly dropped: number; readonly refused: number; readonly forbidden?: string; readonly lastError?: string };
  /** With a store shared by nodes: Nodes gone from Kubernetes, and those this agent forgot. */
  readonly nodes?: ListWatchStatus & { readonly gone: readonly string[]; readonly forgotten: readonly string[]; readonly forgetError?: string };
  /** Every permission the API server refused, named; empty when none was. */
  readonly forbidden: readonly string[];
}

export interface ClusterStatus {
  readonly liveNodes: readonly string[];
  readonly ownBlocks: number;
  readonly thisNodeAnnounced: boolean;
}

/** The missed-delete journal and the reconcile loop that drains it. Times are ISO 8601. */
export interface ReconcilerStatus {
  readonly journalDir: string;
  /** The journal directory has been listed once since start: every intent in it is known. */
  readonly listed: boolean;
  readonly pending: readonly PendingIntentStatus[];
  /** Files set aside in `rejected/` (recent ones), never released on. */
  readonly rejected: ReadonlyArray<{ readonly name: string; readonly reason: string }>;
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
    readonly exited: ReadonlyArray<{ readonly containerID: string; readonly since: string; readonly waitingFor: string }>;
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

// ---------------------------------------------------------------------------------------------
// Pools (GET /v1/pools) and nodes (GET /v1/nodes, POST /v1/nodes/forget)

export interface PoolReport {
  readonly pool: string;
  readonly subnet?: string;
  readonly first?: string;
  readonly last?: string;
  /** Decimal: a /64 holds more addresses than a JSON number keeps exactly. */
  readonly capacity?: string;
  readonly allocated: number;
  readonly resting: number;
  /** allocated / capacity, 0..1; absent when the capacity is unknown. */
  readonly utilisation?: number;
  /** For a block of a range shared by nodes: the node that claimed it. */
  readonly node?: string;
  /** For a range split into blocks: the block prefix length and how many blocks are claimed. */
  readonly blockPrefix?: number;
  readonly blocks?: number;
}

export interface NodeReport {
  readonly node: string;
  /** The node's agent holds its announcement now. */
  readonly alive: boolean;
  readonly since?: string;
  readonly version?: string;
  /** Blocks with this node's affinity. */
  readonly blocks: readonly string[];
  /** Allocations this node's agent made. */
  readonly allocations: number;
}

export interface ForgetNodeRequest {
  readonly node: string;
}

export interface ForgetNodeResponse {
  readonly node: string;
  readonly released: readonly Allocation[];
  /** Blocks given back. */
  readonly blocks: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// Allocations (GET /v1/allocations) and release (POST /v1/release)

/** The query parameters GET /v1/allocations takes; any other is refused. */
export const ALLOCATION_QUERY_KEYS = ['pool', 'network', 'containerID', 'ifname', 'podNamespace', 'podName', 'podUID', 'node', 'address'] as const;

export type AllocationQuery = { readonly [K in (typeof ALLOCATION_QUERY_KEYS)[number]]?: string };

/**
 * One address (in `pool` when it is allocated in several), or everything a container holds
 * (narrowed by network and interface). Releasing what is not allocated is a no-op.
 */
export type ReleaseRequest = ReleaseAddressRequest | ReleaseContainerRequest;

export interface ReleaseAddressRequest {
  readonly address: string;
  readonly pool?: string;
}

export interface ReleaseContainerRequest {
  readonly containerID: string;
  readonly network?: string;
  readonly ifname?: string;
}

export interface ReleaseResponse {
  readonly released: readonly Allocation[];
}

// ---------------------------------------------------------------------------------------------
// Audit (GET /v1/audit; POST /v1/audit {fix})

export interface AuditRequest {
  /** Release what is provably stale, and nothing else. */
  readonly fix: boolean;
}

export type AuditVerdict =
  | { readonly kind: 'healthy'; readonly reason: string }
  | { readonly kind: 'stale'; readonly proof: 'journal' | 'netns-gone'; readonly reason: string }
  | { readonly kind: 'suspect'; readonly why: 'orphaned' | 'unobservable'; readonly reason: string };

export interface AuditFinding {
  readonly allocation: Allocation;
  readonly verdict: AuditVerdict;
}

/** Whether the agent can see a network namespace directory, and why not. */
export interface NetnsDirectoryStatus {
  readonly dir: string;
  readonly observable: boolean;
  readonly reason?: string;
}

export interface AuditReport {
  readonly at: string;
  readonly counts: { readonly healthy: number; readonly stale: number; readonly suspect: number };
  readonly sources: {
    readonly journal: { readonly dir: string; readonly pending: number };
    readonly netns: readonly NetnsDirectoryStatus[];
  };
  readonly findings: readonly AuditFinding[];
  /** With fix: what was released. */
  readonly released?: readonly Allocation[];
  /** With fix: what could not be released, and why. */
  readonly errors?: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// Recent releases, the dashboard's data (GET /dashboard.json on the metrics address), and what
// the agent knows of itself for `warren doctor` (GET /v1/doctor)

/**
 * Where a release came from. `cni-del` and `gc` are the runtime's own CNI calls; `journal` a DEL
 * the plugin journaled; `containerd`, `kubernetes` and `plugin` (a registered runtime adapter) the
 * runtimes' and the cluster's word; `netns` the namespace sweep; `audit` `warren audit --fix`;
 * `operator` `warren release`; `node-forget` a node that left (`warren nodes forget`, or its Node
 * object deleted). A closed list: metrics label by it.
 */
export const RELEASE_SOURCES = ['cni-del', 'gc', 'journal', 'containerd', 'kubernetes', 'plugin', 'audit', 'netns', 'operator', 'node-forget'] as const;
export type ReleaseSource = (typeof RELEASE_SOURCES)[number];

/** One address released, for the last-releases list. */
export interface ReleaseRecord {
  /** When (ISO 8601). */
  readonly at: string;
  readonly source: ReleaseSource;
  /** Why, in words: "network namespace /run/netns/x is gone", "CNI DEL". */
  readonly reason: string;
  readonly address: string;
  readonly pool: string;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  /** For source `plugin`: the adapter's name. */
  readonly adapter?: string;
}

/** Everything the dashboard shows, in one answer. */
export interface DashboardData {
  readonly generatedAt: string;
  readonly status: AgentStatus;
  /** Ranges and, on etcd, their blocks (PoolReport.node set). */
  readonly pools: readonly PoolReport[];
  /** On a store shared by nodes: every node and its blocks. */
  readonly nodes?: readonly NodeReport[];
  /** The latest releases, newest first. */
  readonly releases: readonly ReleaseRecord[];
  /** Releases since start, by source. */
  readonly releasesBySource: Readonly<Record<ReleaseSource, number>>;
  /** The plugin registry's sockets, when it is on. */
  readonly plugins?: PluginsStatus;
}

/**
 * What the running agent knows of its own setup, for `warren doctor` to hold against the node's
 * files: where it listens, where it reads the journal, which namespace directories it can observe
 * and how many recorded namespaces lie under each, its store's health and durability, containerd,
 * the clock against etcd.
 */
export interface DoctorFacts {
  readonly node: string;
  readonly version: string;
  readonly pid: number;
  readonly socket: string;
  readonly stateDir: string;
  readonly journalDir: string;
  readonly cniConfDir: string;
  readonly manageCniConfig: boolean;
  /** Where metrics and the dashboard are served, as bound (port 0 resolved); absent when off. */
  readonly metrics?: MetricsEndpointStatus;
  readonly pluginsDir?: string;
  readonly store: {
    readonly kind: 'sqlite' | 'etcd';
    readonly description: string;
    readonly healthy: boolean;
    readonly error?: string;
    /** SQLite: FULL survives power loss, NORMAL only a process crash. */
    readonly synchronous?: 'FULL' | 'NORMAL';
    readonly etcdEndpoints?: readonly string[];
  };
  readonly netns: readonly NetnsDirectoryStatus[];
  /**
   * This node's allocations by the directory their recorded namespace lies in (`dir` one of
   * --netns-dirs), or outside all of them (`dir` absent), or with none recorded (`dir` absent,
   * `unrecorded` true).
   */
  readonly recordedNetns: ReadonlyArray<{ readonly dir?: string; readonly unrecorded?: boolean; readonly allocations: number; readonly example?: string }>;
  /** The containerd source, when on. */
  readonly containerd?: { readonly socket: string; readonly state: ContainerdState; readonly lastError?: string };
  /**
   * With etcd: this node's clock against the etcd member's (the Date of its HTTP answer, whole
   * seconds), positive when this node is ahead; or why it could not be measured.
   */
  readonly clockSkew?: { readonly endpoint: string; readonly skewMs: number; readonly resolutionMs: number } | { readonly endpoint?: string; readonly error: string };
}

// ---------------------------------------------------------------------------------------------
// The whole API, as one interface

/**
 * Every operation the agent serves, with typed input and output. The agent implements it over
 * its services; the client implements it over the socket; routes.ts joins the two.
 */
export interface AgentApi {
  cni(request: CniRequest): Promise<CniOutcome>;
  status(): Promise<AgentStatus>;
  pools(): Promise<PoolReport[]>;
  allocations(query: AllocationQuery): Promise<Allocation[]>;
  release(request: ReleaseRequest): Promise<ReleaseResponse>;
  audit(request: AuditRequest): Promise<AuditReport>;
  journal(): Promise<ReconcilerStatus>;
  nodes(): Promise<NodeReport[]>;
  forgetNode(request: ForgetNodeRequest): Promise<ForgetNodeResponse>;
  plugins(): Promise<PluginsStatus>;
  doctor(): Promise<DoctorFacts>;
}
