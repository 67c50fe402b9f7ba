/**
 * Recent releases and everything the dashboard shows, in one answer (GET /dashboard.json on the
 * metrics address, apart from the socket's API): part of the agent's wire contract (protocol.ts),
 * under its stability rule.
 */
import type { NodeReport, PoolReport } from './protocol.ts';
import type { AgentStatus, PluginsStatus } from './status.ts';

/**
 * Where a release came from. `cni-del` and `gc` are the runtime's own CNI calls; `journal` a DEL
 * the plugin journaled; `containerd`, `kubernetes` and `plugin` (a registered runtime adapter) the
 * runtimes' and the cluster's word; `netns` the namespace sweep; `audit` `warren audit --fix`;
 * `operator` `warren release`; `node-forget` a node that left (`warren nodes forget`, or its Node
 * object deleted). A closed list: metrics label by it.
 */
export const RELEASE_SOURCES = [
  'cni-del',
  'gc',
  'journal',
  'containerd',
  'kubernetes',
  'plugin',
  'audit',
  'netns',
  'operator',
  'node-forget',
] as const;
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

/** One CNI call answered with an error, for the failed-calls list. */
export interface CniFailure {
  /** When (ISO 8601). */
  readonly at: string;
  /** ADD, DEL, CHECK, GC, STATUS; '' when the call named none the spec has. */
  readonly command: string;
  /** The CNI error code answered (docs/error-codes.md). */
  readonly code: number;
  /** The network config's name ('' when the config had none or did not parse). */
  readonly network: string;
  /** The message answered, as the runtime (and Multus, which turns every code into 999) shows it. */
  readonly message: string;
  readonly containerID: string;
}

/** Failed CNI calls since start, by command, code and network. */
export interface CniFailureCount {
  readonly command: string;
  readonly code: number;
  readonly network: string;
  readonly count: number;
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
  /** Failed CNI calls since start, by command, code and network, most first (absent from older agents). */
  readonly failuresByCode?: readonly CniFailureCount[];
  /** The latest failed CNI calls, newest first. */
  readonly failures?: readonly CniFailure[];
  /** The plugin registry's sockets, when it is on. */
  readonly plugins?: PluginsStatus;
}
