/**
 * Two scenarios of the scale harness about nodes leaving (scenarios.ts has the others), each built
 * on the public API of the store and the agent's parts — a node crashed, Kubernetes' Node deleted,
 * a node started again — and measuring what happens, not asserting how:
 * - `nodeLoss`: some nodes killed (no Lease withdrawn) and their Nodes deleted from Kubernetes;
 *   the clock runs until no block of theirs is claimed any more (the others freed them, once they
 *   could prove the nodes gone) or a bound passes; measured: the clock time to free them, the
 *   requests of that window per surviving node, which nodes did the forgetting, and the audit;
 * - `nodeForget`: one node killed, its Node deleted, and the node started again at once with an
 *   empty file (a lost disk), its Node back; measured: the clock time until an ADD on it succeeds,
 *   how many of the addresses its file held come back as its containers' records (from what it
 *   published), whether any of them is handed out again (to new containers on it), the requests
 *   of the window, and the audit.
 * How liveness is decided (Lease renewal, a ping on it, the Node) is the agent's; these only drive
 * the events and read the results, so they hold as that changes.
 */
import { BOOKKEEPING_PREFIX } from '../../src/ipam/bookkeeping.ts';
import type { AuditReport } from './auditor.ts';
import type { ScaleCluster } from './cluster.ts';
import type { ScaleNode } from './node-host.ts';
import { counted } from './scenarios.ts';
import type { WindowCounts } from './window-counts.ts';

/** Clock between two looks at the cluster's claims while waiting for blocks to be freed. */
const LOOK_EVERY_MS = 10_000;

export interface NodeLossOptions {
  /** Nodes lost (the last ones running). */
  readonly count: number;
  /** Clock allowed for their blocks to be freed (default 1,800 s). */
  readonly maxSeconds?: number;
  readonly stepMs?: number;
}

export interface NodeLossReport {
  readonly lost: readonly string[];
  /** Blocks the lost nodes held when lost. */
  readonly blocks: number;
  /** Clock seconds until none of those blocks was claimed by a lost node; undefined: not within the bound. */
  readonly freedAfterSeconds: number | undefined;
  /** Blocks still claimed by lost nodes at the end. */
  readonly left: number;
  /** Who forgot each lost node (the nodes whose Node handling says so). */
  readonly forgottenBy: ReadonlyMap<string, readonly string[]>;
  /** The running nodes' last errors in forgetting, with how many nodes report each. */
  readonly errors: ReadonlyMap<string, number>;
  readonly counts: WindowCounts;
  readonly audit: AuditReport;
}

export async function nodeLoss(cluster: ScaleCluster<ScaleNode>, o: NodeLossOptions): Promise<NodeLossReport> {
  const maxMs = (o.maxSeconds ?? 1800) * 1000;
  const stepMs = o.stepMs ?? 1000;
  const lost = cluster.nodes.slice(-o.count).map((n) => n.name);
  const held = async (): Promise<number> => {
    let n = 0;
    for (const name of lost) n += (await cluster.blocksOf(name)).length;
    return n;
  };
  await cluster.settle();
  const blocks = await held();
  for (const name of lost) await cluster.crash(name);
  let elapsed = 0;
  let left = blocks;
  let freedAfterSeconds: number | undefined;
  const counts = await counted(cluster, 0, async () => {
    for (const name of lost) await cluster.deleteNode(name);
    while (elapsed < maxMs) {
      await cluster.advance(LOOK_EVERY_MS, stepMs);
      elapsed += LOOK_EVERY_MS;
      left = await held();
      if (left === 0) {
        freedAfterSeconds = elapsed / 1000;
        break;
      }
    }
  });
  const forgottenBy = new Map<string, string[]>(lost.map((name) => [name, []]));
  const errors = new Map<string, number>();
  for (const status of await cluster.forgetting()) {
    for (const name of status.forgotten) forgottenBy.get(name)?.push(status.node);
    if (status.lastError !== undefined) errors.set(status.lastError, (errors.get(status.lastError) ?? 0) + 1);
  }
  return {
    lost,
    blocks,
    freedAfterSeconds,
    left,
    forgottenBy,
    errors,
    counts: { ...counts, seconds: elapsed / 1000 },
    audit: await cluster.audit(),
  };
}

export interface NodeForgetOptions {
  /** The node forgotten (index in the running nodes; default the first). */
  readonly index?: number;
  /** ADDs made on it once it serves again. */
  readonly adds?: number;
  /** Clock allowed for it to serve again (default 900 s). */
  readonly maxSeconds?: number;
  readonly stepMs?: number;
}

export interface NodeForgetReport {
  readonly node: string;
  /** Addresses its file held when it was killed (its containers'). */
  readonly held: number;
  /** Of those, held again by the same container in its new file once it serves. */
  readonly restored: number;
  /** Starts of the node until one was let serve (a name still held is refused). */
  readonly starts: number;
  /** Clock seconds from its kill until an ADD on it succeeded; undefined: not within the bound. */
  readonly servingAfterSeconds: number | undefined;
  /** ADDs on it after, and those given an address one of its killed containers held. */
  readonly adds: number;
  readonly reused: readonly string[];
  readonly counts: WindowCounts;
  readonly audit: AuditReport;
}

export async function nodeForget(
  cluster: ScaleCluster<ScaleNode>,
  o: NodeForgetOptions = {},
): Promise<NodeForgetReport> {
  const maxMs = (o.maxSeconds ?? 900) * 1000;
  const stepMs = o.stepMs ?? 1000;
  const node = cluster.nodes[o.index ?? 0];
  if (node === undefined) throw new Error(`no node ${o.index ?? 0}`);
  const name = node.name;
  await cluster.settle();
  const before = new Map<string, string>();
  for (const a of await node.store.list({ rangePool: cluster.pool }))
    if (!a.network.startsWith(BOOKKEEPING_PREFIX)) before.set(a.address, a.containerID);
  const began = cluster.clock.now();
  let starts = 0;
  let servingAfterSeconds: number | undefined;
  const reused: string[] = [];
  let restored = 0;
  let adds = 0;
  await cluster.crash(name);
  const counts = await counted(cluster, 0, async () => {
    await cluster.deleteNode(name);
    await cluster.advance(5_000, stepMs);
    const rejoined = await cluster.rejoin(name, maxMs, stepMs);
    starts = rejoined.starts;
    for (let attempt = 0; cluster.clock.now() - began <= maxMs; attempt++) {
      const ok = await cluster.add(rejoined.index, `${name}-after-forget-0-${attempt}`).then(
        () => true,
        () => false,
      );
      if (ok) {
        servingAfterSeconds = (cluster.clock.now() - began) / 1000;
        adds = 1;
        break;
      }
      await cluster.advance(LOOK_EVERY_MS, stepMs);
    }
    if (servingAfterSeconds !== undefined)
      for (let k = 1; k < (o.adds ?? 4); k++) {
        await cluster.add(rejoined.index, `${name}-after-forget-${k}`);
        adds++;
      }
    await cluster.advance(5_000, stepMs);
    const again = cluster.nodes[rejoined.index];
    for (const a of (await again?.store.list({ rangePool: cluster.pool })) ?? []) {
      const was = before.get(a.address);
      if (was === undefined) continue;
      if (a.containerID === was) restored++;
      else if (!a.network.startsWith(BOOKKEEPING_PREFIX)) reused.push(`${a.address}: was ${was}, now ${a.containerID}`);
    }
  });
  const seconds = (cluster.clock.now() - began) / 1000;
  return {
    node: name,
    held: before.size,
    restored,
    starts,
    servingAfterSeconds,
    adds,
    reused,
    counts: { ...counts, seconds },
    audit: await cluster.audit(),
  };
}

/** The node loss as lines. */
export function describeNodeLoss(r: NodeLossReport): string {
  const freed =
    r.freedAfterSeconds === undefined
      ? `${r.left} of ${r.blocks} blocks still claimed after ${r.counts.seconds} s of clock`
      : `all ${r.blocks} blocks freed after ${r.freedAfterSeconds} s of clock (looked at every ${LOOK_EVERY_MS / 1000} s)`;
  const by = [...r.forgottenBy].map(([lost, nodes]) => `${lost} by ${nodes.length === 0 ? 'none' : nodes.join(', ')}`);
  return [
    `Node loss: ${r.lost.length} nodes killed and their Nodes deleted: ${freed}`,
    `forgotten: ${by.slice(0, 5).join('; ')}${by.length > 5 ? '; …' : ''}`,
    ...[...r.errors].map(([error, n]) => `  last error on ${n} nodes: ${error}`),
    describeAudit(r.audit),
  ].join('\n');
}

/** The node forget as lines. */
export function describeNodeForget(r: NodeForgetReport): string {
  const serving =
    r.servingAfterSeconds === undefined
      ? 'never served again within the bound'
      : `served again after ${r.servingAfterSeconds} s of clock`;
  return [
    `Node forget: ${r.node} killed, its Node deleted, started again with an empty file (${r.starts} starts): ${serving}`,
    `its file held ${r.held} addresses; ${r.restored} back as their containers' records; ${r.adds} ADDs after, ${r.reused.length} given an address of a killed container`,
    ...r.reused.slice(0, 5).map((line) => `  REUSED ${line}`),
    describeAudit(r.audit),
  ].join('\n');
}

/** The audit as lines. */
export function describeAudit(a: AuditReport): string {
  return [
    `audit: ${a.held} addresses held (${a.fromFiles} in running nodes' files, ${a.fromPublications} published by nodes not running), ` +
      `${a.claims} blocks claimed, ${a.duplicates.length} duplicates, ${a.strays.length} outside their node's claims`,
    ...a.duplicates.slice(0, 10).map((d) => `  DUPLICATE ${d}`),
    ...a.strays.slice(0, 5).map((d) => `  STRAY ${d}`),
  ].join('\n');
}
