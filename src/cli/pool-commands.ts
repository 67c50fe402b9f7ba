/**
 * The commands about the address space: `warren pools` (utilisation per pool and block, a shared
 * range across the cluster and, with `--by-node`, each node's share; the WarrenPools the agent
 * watches with their capacity, use and selectors; capacities as people read them, count-text.ts),
 * `warren nodes` (who shares the store, alive or not, and their blocks), `warren node forget`
 * (free what a node gone for good held) and `warren store accept` (after the agent stopped
 * allocating on a store that lost its data: use it as it is now).
 */
import { parseArgs } from 'node:util';
import type { ApiClient } from '../api/client.ts';
import type { ClusterPoolFigures } from '../api/protocol.ts';
import { blockCidrOfKey } from '../ipam/blocks.ts';
import { countText } from '../ipam/count-text.ts';
import { COMMON, type CliContext } from './context.ts';
import { jsonText, percent, safe, table } from './format.ts';
import type { CliIO } from './io.ts';
import { UsageError } from './usage.ts';

export async function poolsCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const options = { ...COMMON, 'by-node': { type: 'boolean', default: false } } as const;
  const { values } = parseArgs({ args: [...argv], options, strict: true });
  const agent = context.client(values.socket);
  const list = await agent.pools();
  if (values.json) {
    io.out(jsonText(list));
    return 0;
  }
  // The WarrenPools the agent watches (kubernetes store), beside the ranges' pools; `warren status --json` has them.
  const objects = (await agent.status()).kubernetes?.planning?.pools?.list ?? [];
  if (list.length === 0) io.out('no pools yet: a pool appears with its first allocation\n');
  else printPools(list, io);
  if (values['by-node']) printShares(list, io);
  if (objects.length > 0) {
    io.out('\nWarrenPools:\n');
    io.out(
      table(
        ['NAME', 'RANGES', 'CAPACITY', 'USED', 'NODES', 'NODE SELECTOR', 'NAMESPACE SELECTOR', 'STICKY'],
        objects.map((p) => [
          p.name,
          p.ranges.join(' '),
          p.problem === undefined ? (p.capacity === undefined ? '-' : countText(p.capacity)) : 'INVALID',
          p.used === undefined ? '-' : String(p.used),
          p.nodes === undefined ? '-' : String(p.nodes),
          p.nodeSelector ?? '(every node)',
          p.namespaceSelector ?? '(every namespace)',
          p.sticky ? 'yes' : 'no',
        ]),
      ),
    );
    for (const p of objects) if (p.problem !== undefined) io.out(safe`${p.name}: ${p.problem}\n`);
  }
  return 0;
}

function printPools(list: Awaited<ReturnType<ApiClient['pools']>>, io: CliIO): void {
  io.out(
    table(
      ['POOL', 'SPAN', 'CAPACITY', 'ALLOCATED', 'RESTING', 'USED', 'CLUSTER', 'NODE'],
      list.map((p) => [
        p.pool,
        p.first === undefined ? '-' : `${p.first}-${p.last}`,
        p.capacity === undefined ? '-' : countText(p.capacity),
        String(p.allocated),
        String(p.resting),
        percent(p.utilisation),
        clusterCell(p.cluster, p.capacity),
        p.node ?? (p.blockPrefix === undefined ? '-' : `${p.blocks ?? 0} blocks of /${p.blockPrefix}`),
      ]),
    ),
  );
  // On a shared range ALLOCATED and USED are this node's blocks: say so, with what the cluster holds.
  if (list.some((p) => p.cluster !== undefined))
    io.out(
      "ALLOCATED, RESTING and USED of a shared range are this node's blocks; CLUSTER is the range across " +
        'every node, as published (lent: in use on a node that borrowed it; --by-node: each node)\n',
    );
  for (const p of list)
    if (p.cluster?.error !== undefined)
      io.out(safe`${p.pool}: the cluster's figures could not be read: ${p.cluster.error}\n`);
}

/**
 * `28/254 (11%) on 2 nodes, 224 free, 3 lent`; `?` when the cluster could not be read; `-` for a
 * range of this node alone.
 */
function clusterCell(c: ClusterPoolFigures | undefined, capacity: string | undefined): string {
  if (c === undefined) return '-';
  if (c.error !== undefined) return '?';
  const of = capacity === undefined ? '' : `/${countText(capacity)}`;
  const part = c.partial === true ? ` in ${c.blocks} blocks read` : '';
  const free = c.free === undefined ? '' : `, ${countText(c.free)} free`;
  const lent = c.lent === undefined || c.lent === 0 ? '' : `, ${c.lent} lent`;
  const nodes = `${c.nodes} ${c.nodes === 1 ? 'node' : 'nodes'}`;
  return `${c.allocated}${of} (${percent(c.utilisation)}) on ${nodes}${part}${free}${lent}`;
}

/** `--by-node`: under each range shared by nodes, what each node holds of it. */
function printShares(list: Awaited<ReturnType<ApiClient['pools']>>, io: CliIO): void {
  for (const p of list) {
    const shares = p.cluster?.byNode;
    if (shares === undefined) continue;
    io.out(safe`\n${p.pool} by node:\n`);
    if (shares.length === 0) {
      io.out('no node has published a block of it\n');
      continue;
    }
    io.out(
      table(
        ['NODE', 'BLOCKS', 'ALLOCATED', 'RESTING', 'BORROWED'],
        shares.map((s) => [s.node, String(s.blocks), String(s.allocated), String(s.resting), String(s.borrowed)]),
      ),
    );
  }
}

export async function nodesCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const list = await context.client(values.socket).nodes();
  if (values.json) {
    io.out(jsonText(list));
    return 0;
  }
  if (list.length === 0) {
    io.out('no nodes\n');
    return 0;
  }
  io.out(
    table(
      ['NODE', 'ALIVE', 'SINCE', 'ALLOCATIONS', 'LENT', 'BLOCKS'],
      list.map((n) => [
        n.node,
        n.alive ? 'yes' : 'no',
        n.since ?? '-',
        String(n.allocations),
        n.lent === undefined ? '-' : String(n.lent),
        n.blocks.length === 0 ? '-' : n.blocks.map((b) => blockCidrOfKey(b) ?? b).join(' '),
      ]),
    ),
  );
  return 0;
}

export async function acceptStoreCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...argv], options: COMMON, strict: true, allowPositionals: true });
  if (positionals.length !== 0) throw new UsageError('store accept takes no arguments');
  const result = await context.client(values.socket).acceptStore();
  if (values.json) {
    io.out(jsonText(result));
    return result.problem === undefined ? 0 : 1;
  }
  io.out(safe`accepted the store as it is now; allocation had stopped for: ${result.accepted}\n`);
  io.out(safe`wrote back ${result.addresses} addresses and ${result.blocks} block claims this node knew of\n`);
  for (const c of result.conflicts) io.out(safe`CONFLICT: ${c}\n`);
  if (result.problem !== undefined) io.out(safe`still not allocating: ${result.problem}\n`);
  return result.problem === undefined ? 0 : 1;
}

/** How long `warren node forget` waits for the agent: the ping of a lapsed node's agent fits in it. */
const FORGET_TIMEOUT_MS = 120_000;

export async function forgetNodeCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...argv], options: COMMON, strict: true, allowPositionals: true });
  if (positionals.length !== 1) throw new UsageError('node forget takes exactly one node name');
  const node = positionals[0] as string;
  // On the kubernetes store a node whose Lease lapsed is pinged first: its agent has --node-ping (30 s) to answer.
  const result = await context.client(values.socket, FORGET_TIMEOUT_MS).forgetNode({ node });
  if (values.json) {
    io.out(jsonText(result));
    return 0;
  }
  io.out(
    safe`forgot node ${result.node}: released ${result.released.length} allocations, gave back ` +
      safe`${result.blocks.length} blocks\n`,
  );
  for (const a of result.released) io.out(safe`released ${a.address} (container ${a.containerID}, ${a.ifname})\n`);
  return 0;
}
