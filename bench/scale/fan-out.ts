/**
 * The fan-out of one change to a block, counted node by node (issue 36: "a change to one block is
 * delivered to the few agents that need it, not to every agent"): one node is made to claim a block
 * — ADDs on it, one at a time, until it writes a block — with nothing else driven, then a few seconds
 * of clock pass so the claim's follow-ups (its publication, its status) go out; the fake's watch
 * event counts from the probe's start (the server's counts are cleared then), client by client, say
 * which nodes each resource's change reached.
 *
 * A window's totals (window-counts.ts, `fanOut`) give the events per change on average; this gives
 * the distinct nodes of one change. Other nodes' timers run in those seconds (a Lease renewal, a
 * chore), so each resource's line counts every write of it in the probe, the node's or not.
 */
import type { DeliveredEvents } from '../../test/helpers/fake-kube-api.ts';
import type { ScaleCluster } from './cluster.ts';
import type { ScaleNode } from './node-host.ts';
import type { ServerCounts } from './fake-control.ts';

/** Resources whose objects are a block or say what a block holds. */
const BLOCK_RESOURCES = ['warrenblocks', 'warrenblockpublications'];
/** ADDs the probe makes at most before it gives up on a claim. */
const MAX_ADDS = 64;
/** Clock after the claim, for what follows it. */
const FOLLOW_UP_MS = 5_000;

export interface ProbedResource {
  readonly resource: string;
  /** Writes of the resource answered 2xx during the probe, by any node. */
  readonly changes: number;
  readonly delivered: number;
  /** The nodes its events reached, the probed node first when among them. */
  readonly nodes: readonly string[];
}

export interface FanOutProbe {
  readonly node: string;
  /** ADDs it took to make the node write a block (MAX_ADDS: none did). */
  readonly adds: number;
  readonly claimed: boolean;
  readonly resources: readonly ProbedResource[];
}

/** Watch events (BOOKMARKs apart) delivered since the window began, by `resource` then client. */
function delivered(events: readonly DeliveredEvents[]): Map<string, Map<string, number>> {
  const byResource = new Map<string, Map<string, number>>();
  for (const e of events) {
    if (e.client === undefined || e.type === 'BOOKMARK') continue;
    const clients = byResource.get(e.resource) ?? new Map<string, number>();
    clients.set(e.client, (clients.get(e.client) ?? 0) + e.count);
    byResource.set(e.resource, clients);
  }
  return byResource;
}

const writeOf = (verb: string | undefined): boolean =>
  verb === 'create' || verb === 'update' || verb === 'patch' || verb === 'delete';

/**
 * Node `index` made to claim a block; what each resource's changes reached. Undefined where the
 * server counts no watch events for the harness (`--kubeconfig`): the nodes' counters count none.
 */
export async function probeBlockClaim(cluster: ScaleCluster<ScaleNode>, index = 0): Promise<FanOutProbe | undefined> {
  const node = cluster.nodes[index]?.name ?? '';
  await cluster.settle();
  await cluster.api.clearCounts();
  const counts = async (): Promise<ServerCounts | undefined> => cluster.api.counts();
  const blockWritten = (c: ServerCounts): boolean =>
    c.records.some(
      (r) => r.client === node && writeOf(r.verb) && BLOCK_RESOURCES.includes(r.resource?.split('/')[0] ?? ''),
    );
  let seen = await counts();
  if (seen === undefined) return undefined;
  let adds = 0;
  while (adds < MAX_ADDS && !blockWritten(seen)) {
    await cluster.add(index, `probe-${adds++}`);
    await cluster.settle();
    seen = (await counts()) ?? seen;
  }
  const claimed = blockWritten(seen);
  await cluster.advance(FOLLOW_UP_MS, 1000);
  const after = (await counts()) ?? seen;
  const reachedBy = delivered(after.events);
  const changes = new Map<string, number>();
  for (const r of after.records) {
    if (!writeOf(r.verb) || r.status < 200 || r.status > 299 || r.resource === undefined) continue;
    const object = r.resource.split('/')[0] ?? r.resource;
    changes.set(object, (changes.get(object) ?? 0) + 1);
  }
  const resources = [...new Set([...changes.keys(), ...reachedBy.keys()])].sort().flatMap((resource) => {
    const reached = [...(reachedBy.get(resource) ?? [])].filter(([, n]) => n > 0);
    const count = reached.reduce((total, [, n]) => total + n, 0);
    if (count === 0 && !changes.has(resource)) return [];
    const nodes = reached.map(([client]) => client).sort((a, b) => (a === node ? -1 : b === node ? 1 : a < b ? -1 : 1));
    return [{ resource, changes: changes.get(resource) ?? 0, delivered: count, nodes }];
  });
  return { node, adds, claimed, resources };
}

/** The probe as lines. */
export function describeProbe(p: FanOutProbe, nodes: number): string {
  const how = p.claimed ? `wrote a block after ${p.adds} ADDs` : `wrote no block in ${p.adds} ADDs`;
  const lines = [`fan-out of one block claim (${p.node} ${how}, then ${FOLLOW_UP_MS / 1000} s of clock):`];
  for (const r of p.resources) {
    const shown = r.nodes.slice(0, 4).join(', ') + (r.nodes.length > 4 ? ', …' : '');
    lines.push(
      `  ${r.resource.padEnd(32)} ${String(r.changes).padStart(4)} ${r.changes === 1 ? 'change, ' : 'changes,'} ${String(r.delivered).padStart(5)} events,` +
        ` to ${r.nodes.length} of ${nodes} nodes${r.nodes.length === 0 ? '' : ` (${shown})`}`,
    );
  }
  if (p.resources.length === 0) lines.push('  no change, no event');
  return lines.join('\n');
}
