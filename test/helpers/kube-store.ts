/**
 * Agents on store `kubernetes` against the fake API server (test/helpers/fake-kube-api.ts), for the
 * end-to-end tests and the benchmark of the two-tier store: the agent's flags, Node objects for
 * them, CNI calls through the installed plugin, an observer that reads the cluster tier as any
 * other node would (`openKubeTier` on the fake's kubeconfig: the published view and the claims),
 * and a reading of the fake's request log that tells the requests an ADD or DEL could have made
 * from the agents' timers (lease renewals, publication of block allocations, claim checks).
 */
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { BlockClaim, ClusterTier, PublishedBlock } from '../../src/store/tiered/cluster-tier.ts';
import { openKubeTier } from '../../src/store/kubernetes/tier.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { type AgentHandle, startAgent } from './agent.ts';
import { type CniReply, warren } from './cni.ts';
import type { FakeKubeApi, RequestRecord } from './fake-kube-api.ts';

/** The namespace the agents keep their Leases in (the DaemonSet's). */
export const KUBE_NAMESPACE = 'warren';
/** Lease seconds of the test agents: a killed agent's lease expires soon after. */
export const LEASE_SECONDS = 2;

/**
 * The flags of an agent on store `kubernetes` against `api`, as node `node`. `timers` 'test' (the
 * default) shortens the lease and the cluster chores so a test sees a killed agent's lease expire
 * and a chore done within seconds; 'default' leaves them as a node runs them (a benchmark's idle
 * traffic is the default's).
 */
export function kubeStoreArgs(
  api: FakeKubeApi,
  node: string,
  extra: readonly string[] = [],
  timers: 'test' | 'default' = 'test',
): string[] {
  return [
    '--node-name',
    node,
    '--store',
    'kubernetes',
    '--kubernetes',
    'on',
    '--kubeconfig',
    api.kubeconfigPath,
    '--kube-namespace',
    KUBE_NAMESPACE,
    ...(timers === 'test'
      ? [
          '--node-lease',
          String(LEASE_SECONDS),
          '--node-ping',
          '2',
          '--upkeep-interval',
          '1',
          '--reconcile-interval',
          '1',
        ]
      : []),
    ...extra,
  ];
}

/** Node `node` as Kubernetes has it, and its agent on store `kubernetes` (in `dir` to restart one). */
export async function startKubeNode(
  api: FakeKubeApi,
  node: string,
  options: { dir?: string; extra?: readonly string[]; env?: NodeJS.ProcessEnv } = {},
): Promise<AgentHandle> {
  if (options.dir === undefined) api.createNode(node);
  return startAgent({
    ...(options.dir === undefined ? {} : { dir: options.dir }),
    ...(options.env === undefined ? {} : { env: options.env }),
    args: kubeStoreArgs(api, node, options.extra),
  });
}

/** A network config of range(s) `ipam` for `agent`, as every node of the cluster has it. */
export function networkConfig(agent: AgentHandle, network: string, ipam: Record<string, unknown>) {
  return {
    cniVersion: '1.1.0',
    name: network,
    ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), ...ipam },
  };
}

/** One CNI call through the installed plugin to `agent`, for container `id`. */
export function cniCall(
  command: 'ADD' | 'DEL' | 'CHECK',
  agent: AgentHandle,
  network: string,
  ipam: Record<string, unknown>,
  id: string,
): Promise<CniReply> {
  return warren({
    command,
    containerID: id,
    netns: `/var/run/netns/${id}`,
    ifname: 'eth0',
    config: networkConfig(agent, network, ipam),
  });
}

/** Reads the cluster tier as another node would: through its own client of the fake. */
export async function observeTier(api: FakeKubeApi): Promise<ClusterTier> {
  return openKubeTier({
    kubeConfig: loadKubeConfig(api.kubeconfigPath),
    namespace: KUBE_NAMESPACE,
    leaseSeconds: LEASE_SECONDS,
    clock: systemClock,
  });
}

/** Every published block of range `pool`, page by page. */
export async function publishedBlocks(tier: ClusterTier, pool: string): Promise<PublishedBlock[]> {
  const blocks: PublishedBlock[] = [];
  let token: string | undefined;
  do {
    const page = await tier.published({ pool }, { limit: 50, ...(token === undefined ? {} : { continue: token }) });
    blocks.push(...page.items);
    token = page.continue;
  } while (token !== undefined && token !== '');
  return blocks;
}

/** Every claim of range `pool`, page by page. */
export async function claimsIn(tier: ClusterTier, pool: string): Promise<BlockClaim[]> {
  const claims: BlockClaim[] = [];
  let token: string | undefined;
  do {
    const page = await tier.claimsIn(pool, { limit: 50, ...(token === undefined ? {} : { continue: token }) });
    claims.push(...page.items);
    token = page.continue;
  } while (token !== undefined && token !== '');
  return claims;
}

/** The network of the placeholder a lender keeps for an address it lent (not a container's). */
export const LENT_NETWORK = 'warren.dev/lent';

/** The published allocations of containers (lenders' placeholders left out). */
export async function publishedAllocations(tier: ClusterTier, pool: string): Promise<Allocation[]> {
  return (await publishedBlocks(tier, pool)).flatMap((b) => b.allocations.filter((a) => a.network !== LENT_NETWORK));
}

/** Addresses held twice in `allocations` by different owners, as "address: owner, owner". */
export function duplicatesIn(allocations: readonly Allocation[]): string[] {
  const owners = new Map<string, Set<string>>();
  for (const a of allocations) {
    const set = owners.get(a.address) ?? new Set<string>();
    set.add(`${a.network}/${a.containerID}/${a.ifname}`);
    owners.set(a.address, set);
  }
  return [...owners].filter(([, s]) => s.size > 1).map(([address, s]) => `${address}: ${[...s].join(', ')}`);
}

/** What a request to the fake was for. */
export type RequestKind =
  /** Leases: membership renewals and chores (timers). */
  | 'lease'
  /** A block's published allocations (its WarrenBlockPublication object written; the publication timer). */
  | 'publish'
  /** A read of warren.dev objects (claim checks, placement, the observer). */
  | 'read'
  /** A write of warren.dev objects: claims, give-backs, range records, admission, asks, grants. */
  | 'write'
  /** Pods, Nodes, Events: the pod and node sources. */
  | 'core';

export function requestKind(r: Pick<RequestRecord, 'method' | 'path'>): RequestKind {
  if (r.path.includes('/apis/coordination.k8s.io/')) return 'lease';
  if (r.path.includes('/apis/warren.dev/')) {
    if (/\/warrenblockpublications(\/|$)/.test(r.path) && (r.method === 'POST' || r.method === 'PUT')) return 'publish';
    return r.method === 'GET' ? 'read' : 'write';
  }
  return 'core';
}

/** The requests of `kinds` in `records` (from index `since` on). */
export function requestsOf(
  records: readonly RequestRecord[],
  kinds: readonly RequestKind[],
  since = 0,
): RequestRecord[] {
  return records.slice(since).filter((r) => kinds.includes(requestKind(r)));
}

/** Requests by verb and resource ("create warrenblocks 3, list warrenaddressrequests 12"), for reports. */
export function breakdown(records: readonly RequestRecord[]): string {
  const counts = new Map<string, number>();
  for (const r of records) {
    const key = `${r.verb ?? r.method} ${r.resource ?? r.path}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}

/** "POST /apis/warren.dev/v1alpha1/warrenblocks → 201" for assertion messages. */
export const describeRequests = (rs: readonly RequestRecord[]): string =>
  rs.map((r) => `${r.method} ${r.path} → ${r.status}`).join('\n');
