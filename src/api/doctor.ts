/**
 * What the running agent knows of its own setup (GET /v1/doctor), for `warren doctor`: part of the
 * agent's wire contract (protocol.ts), under its stability rule.
 */
import type { NodeLocalConfig } from '../cni/node-local.ts';
import type { HistoryReading, StoreKind } from '../store/store.ts';
import type { EtcdRequestRate } from '../store/etcd-tier/etcd-requests.ts';
import type { ApiRequestRate } from '../store/kubernetes/api-requests.ts';
import type { CniConfigStatus, ContainerdState, MetricsEndpointStatus } from './status.ts';

/**
 * What the running agent knows of its own setup, for `warren doctor` to hold against the node's
 * files: where it listens, where it reads the journal, which namespace directories it can observe
 * and how many recorded namespaces lie under each, its store's health and durability, containerd,
 * the clock against etcd.
 */
/** Whether the agent can see a network namespace directory, and why not. */
export interface NetnsDirectoryStatus {
  readonly dir: string;
  readonly observable: boolean;
  readonly reason?: string;
}

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
  /**
   * Present when the agent serves only node-local configs (a per-node store while the Kubernetes
   * source is on, cni/node-local.ts), with the config derived from the node's own CIDR if any.
   */
  readonly nodeLocalOnly?: { readonly derived?: NodeLocalConfig };
  /** Present when the agent watches WarrenPools (the kubernetes store): whether it has listed them, and their names. */
  readonly warrenPools?: { readonly listed: boolean; readonly names: readonly string[] };
  /** The agent's own requests to the Kubernetes API server, a minute, when it talks to one. */
  readonly kubeApi?: ApiRequestRate;
  /** The agent's own requests to etcd, a minute, on the etcd store. */
  readonly etcdApi?: EtcdRequestRate;
  readonly store: {
    readonly kind: StoreKind;
    readonly description: string;
    readonly healthy: boolean;
    readonly error?: string;
    /** SQLite: FULL survives power loss, NORMAL only a process crash. */
    readonly synchronous?: 'FULL' | 'NORMAL';
    readonly etcdEndpoints?: readonly string[];
    /** Kubernetes: the namespace of the agents' Leases. */
    readonly kubeNamespace?: string;
    /** On a cluster store: why this node does not allocate (not announced; the store lost its data; its name taken). */
    readonly clusterProblem?: string;
    /**
     * etcd: its history and the room left for it (read at most once a minute), or why that could
     * not be read: an etcd that never compacts fills its quota and then refuses every write.
     */
    readonly history?: HistoryReading | { readonly error: string };
    /** etcd: data of the old one-tier layout still in the store (old blocks per node, range documents). */
    readonly legacy?: { readonly blocks: Readonly<Record<string, number>>; readonly ranges: number };
  };
  readonly netns: readonly NetnsDirectoryStatus[];
  /**
   * This node's allocations by the directory their recorded namespace lies in (`dir` one of
   * --netns-dirs), or outside all of them (`dir` absent), or with none recorded (`dir` absent,
   * `unrecorded` true).
   */
  readonly recordedNetns: ReadonlyArray<{
    readonly dir?: string;
    readonly unrecorded?: boolean;
    readonly allocations: number;
    readonly example?: string;
  }>;
  /** The CNI config manager's state, when the agent manages the config (--manage-cni-config). */
  readonly cniConfig?: { readonly state: CniConfigStatus['state']; readonly output: string; readonly problem?: string };
  /** The containerd source, when on. */
  readonly containerd?: { readonly socket: string; readonly state: ContainerdState; readonly lastError?: string };
  /**
   * The WarrenReservations this agent watches (Kubernetes on), as far as they are a problem:
   * those that hold back every allocatable address of a range its store knows, and entries that
   * are neither addresses nor CIDRs (they reserve nothing).
   */
  readonly reservations?: {
    readonly count: number;
    readonly wholeRanges: ReadonlyArray<{
      readonly reservation: string;
      readonly pool: string;
      readonly subnet: string;
    }>;
    readonly malformed: readonly string[];
  };
  /**
   * With etcd: this node's clock against the etcd member's (the Date of its HTTP answer, whole
   * seconds), positive when this node is ahead; or why it could not be measured.
   */
  readonly clockSkew?:
    | { readonly endpoint: string; readonly skewMs: number; readonly resolutionMs: number }
    | { readonly endpoint?: string; readonly error: string };
}
