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
