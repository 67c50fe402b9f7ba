/**
 * The scale harness of issue 36 (`npm run bench:scale -- --nodes 1000 --idle-minutes 5 --churn 100`):
 * N simulated nodes (bench/scale/simulated-node.ts: each a TieredStore on its own SQLite file with
 * its own client, its allocator and its cluster upkeep, built as the agent builds them) in this
 * process against an API server (bench/scale/api-server.ts), on one ManualClock. Every node allocates
 * a few addresses of one shared range (so each holds a block); then an idle window of clock; then
 * churn (ADDs and DELs at a rate across the nodes), node loss and node forget when asked
 * (bench/scale/node-events.ts), each checked by the independent auditor (bench/scale/auditor.ts: no
 * address held twice across every node's file and the cluster's objects).
 *
 * Prints, per node per minute by verb and resource, what the idle window and the churn cost the API
 * server, writes per node per 100 s, LISTs, watch events delivered, ADD p50/p99 during churn, and
 * memory per simulated node (this process's RSS growth over N; the fake's own process apart with
 * `--api child`), the fan-out of the changes (watch events per change, by resource) and of one
 * block claim (fan-out.ts). On the fake the counts are its per-client records, the same on every
 * machine; with `--kubeconfig` (or `--counts client`) they are the nodes' own request counters.
 *
 * Open files: each node holds 12–16 connections (11 watches, each on its own, and its requests')
 * and, with a file, 3 more (the database, its WAL and shm): at 1,200 nodes with `--memory`, 16.1
 * open files a node here and 13.1 in the fake's process, against a hard limit of 20,000. `npm run bench:scale` raises the soft
 * RLIMIT_NOFILE to the hard one first; the limit is printed. With `--api child` (the default) the
 * fake's process holds the server's ends, so neither process holds both ends of a connection.
 * With `--http2` each node holds one connection for all it asks: at 2,000 nodes with `--memory`,
 * 1.0 open file a node in the fake's process and 4.0 here (its connection, and 3 files that
 * `--memory` still opens: the database `:memory:` is a file in the node's directory).
 *
 * Options: --nodes N (50), --idle-minutes M (5), --churn R ADDs+DELs per clock second (0: none),
 * --churn-seconds S (60), --per-node K addresses each node holds (2), --range CIDR (10.0.0.0/14),
 * --block-size P (28), --step-seconds S clock step (1), --api in-process|child (child),
 * --kubeconfig FILE (any API server, Warren's CRDs installed: the nodes all use this file),
 * --counts server|client (server where it counts), --memory (databases in memory),
 * --lose N nodes killed and their Nodes deleted (0), --forget (one node re-joins with an empty file),
 * --node-processes K: the nodes in K node groups, child processes of their own (node-groups.ts: each
 * group's clock stepped in lockstep with this one's, the counts those of one process; default 1 up
 * to 800 nodes, else one group per 800), 1 keeping them in this process; over HTTP/1.1 the fake's
 * own process (~13 open files a node) then bounds N near 1,400,
 * --http2 (the fake offers HTTP/2 by ALPN, as a kube-apiserver does: each node's client then holds
 * one connection for all its requests and watches, one open file a node at the fake; without it,
 * HTTP/1.1 only).
 *
 * `--tiny-range` runs issue 36's tiny range instead (scale/tiny-range.ts): the nodes share
 * --tiny-cidr (10.0.0.0/24) at the store's own block size (or --tiny-block-size), skewed bursts past full
 * (--tiny-bursts, 6), --tiny-idle-minutes (10) idle, a last burst (--tiny-seed, 36: the demand's
 * draws); prints the false exhaustions, borrow p50/p99 on the ManualClock, ADD wall p50/p99, stranded after the idle window, duplicates.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type ApiChoice, ChildProcessApi } from './scale/api-server.ts';
import { ScaleCluster, type ScaleClusterOptions } from './scale/cluster.ts';
import { defaultNodeProcesses } from './scale/node-groups.ts';
import type { ScaleNode } from './scale/node-host.ts';
import { processUse } from './scale/process-use.ts';
import { describeAudit, describeNodeForget, describeNodeLoss, nodeForget, nodeLoss } from './scale/node-events.ts';
import { churn, counted, holdBlocks, idleWindow } from './scale/scenarios.ts';
import { type TinyRangeReport, describeWhere, tinyRange } from './scale/tiny-range.ts';
import { describeProbe, probeBlockClaim } from './scale/fan-out.ts';
import { describeFanOut, describeWindow, writesPerNode100s } from './scale/window-counts.ts';
import { describeLoad, machineLine, underLoad } from './machine.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '50' },
    'idle-minutes': { type: 'string', default: '5' },
    churn: { type: 'string', default: '0' },
    'churn-seconds': { type: 'string', default: '60' },
    'per-node': { type: 'string', default: '2' },
    range: { type: 'string', default: '10.0.0.0/14' },
    'block-size': { type: 'string', default: '28' },
    'step-seconds': { type: 'string', default: '1' },
    api: { type: 'string', default: 'child' },
    kubeconfig: { type: 'string' },
    counts: { type: 'string', default: 'server' },
    memory: { type: 'boolean', default: false },
    lose: { type: 'string', default: '0' },
    forget: { type: 'boolean', default: false },
    http2: { type: 'boolean', default: false },
    'tiny-range': { type: 'boolean', default: false },
    'tiny-cidr': { type: 'string', default: '10.0.0.0/24' },
    'tiny-bursts': { type: 'string', default: '6' },
    'tiny-idle-minutes': { type: 'string', default: '10' },
    'tiny-block-size': { type: 'string' },
    'tiny-seed': { type: 'string' },
    'node-processes': { type: 'string' },
  },
});
const number = (name: keyof typeof values): number => {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name}: not a number: ${values[name]}`);
  return n;
};
function apiChoice(): ApiChoice {
  if (values.kubeconfig !== undefined) return { place: 'kubeconfig', path: values.kubeconfig };
  if (values.api === 'child' || values.api === 'in-process') return { place: values.api, http2: values.http2 };
  throw new Error(`--api: in-process or child, not ${values.api}`);
}
if (values.counts !== 'server' && values.counts !== 'client') throw new Error('--counts: server or client');

const nodes = number('nodes');
const nodeProcesses =
  values['node-processes'] === undefined ? defaultNodeProcesses(nodes) : Math.max(1, number('node-processes'));
/** The cluster, its nodes in this process (one node process) or in node groups. */
const startCluster = (o: ScaleClusterOptions): Promise<ScaleCluster<ScaleNode>> =>
  nodeProcesses > 1 ? ScaleCluster.startGrouped(o, nodeProcesses) : ScaleCluster.start(o);
const stepMs = number('step-seconds') * 1000;
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const percentile = (sorted: readonly number[], p: number): string =>
  sorted.length === 0 ? '–' : (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0).toFixed(1);

/** What a node may watch: every custom resource of deploy/crds and the Leases. */
const WATCHABLE = [
  'warrenblocks',
  'warrenaddressrequests',
  'warrenaddressholdings',
  'warrenaddressspaces',
  'warrenblockpublications',
  'warrenranges',
  'warrenclusterstates',
  'warrenpools',
  'warrenreservations',
  'leases',
];

/** The watches open on the server per node, by resource ("warrenblocks 1.00, …; 9.00 in all"). */
async function openWatches(cluster: ScaleCluster<ScaleNode>): Promise<string> {
  const n = cluster.nodes.length;
  const counts = await cluster.api.watchCounts(WATCHABLE);
  if (counts === undefined) return 'not counted (the server is not the fake)';
  const open = Object.entries(counts).filter(([, count]) => count > 0);
  const all = open.reduce((total, [, count]) => total + count, 0);
  return `${open.map(([r, count]) => `${r} ${(count / n).toFixed(2)}`).join(', ')}; ${(all / n).toFixed(2)} in all`;
}

/** The clients' connections the fake holds (the nodes' and the auditor's), per node. */
async function describeConnections(cluster: ScaleCluster<ScaleNode>): Promise<string> {
  const c = await cluster.api.connections();
  if (c === undefined) return 'connections at the server: not counted (the server is not the fake)';
  const n = cluster.nodes.length;
  return (
    `connections at the fake (${values.http2 ? 'HTTP/2 offered' : 'HTTP/1.1 only'}): ${c.open} open ` +
    `(${(c.open / n).toFixed(2)} a node), ${c.accepted} accepted since start, ${c.http2Sessions} HTTP/2 sessions`
  );
}

/** The tiny range's figures (scale/tiny-range.ts), as lines. */
function describeTiny(r: TinyRangeReport): string {
  const { idle, drained } = r;
  return [
    `range ${values['tiny-cidr']}: ${r.capacity} addresses, /${r.blockPrefix} blocks, ${nodes} nodes`,
    `ADDs ${r.adds}: served ${r.served}, refused as full ${r.exhausted} (false: ${r.falseExhaustions}), ` +
      `other failures ${r.failed}${r.failures.map((f) => `\n  ${f}`).join('')}`,
    ...r.falseWhere.map((w) => `  false refusals' free addresses: ${w}`),
    `borrow (ADDs that waited for other nodes: ${r.borrowMs.length}), ManualClock ms: ` +
      `p50 ${percentile(r.borrowMs, 0.5)}, p99 ${percentile(r.borrowMs, 0.99)}, max ${percentile(r.borrowMs, 1)}`,
    `ADD wall ms: p50 ${percentile(r.addWallMs, 0.5)}, p99 ${percentile(r.addWallMs, 0.99)}`,
    `after ${values['tiny-idle-minutes']} min idle: ${idle.used} used, ${idle.free} free, ${idle.claimedBlocks} blocks ` +
      `claimed, stranded ${idle.stranded} (${((100 * idle.stranded) / r.capacity).toFixed(2)}%)` +
      idle.strandedWhy.map((w) => `\n  ${w}`).join('') +
      `\n  every free address: ${describeWhere(idle.freeWhere)}`,
    `after the last burst: ${drained.used} used, ${drained.free} free; duplicates ${r.duplicates.length}`,
    ...r.duplicates.slice(0, 10).map((d) => `  DUPLICATE ${d}`),
  ].join('\n');
}

/** The fake's process, where it runs in one of its own. */
const fakePid = (cluster: ScaleCluster<ScaleNode>): number | undefined =>
  cluster.api instanceof ChildProcessApi ? cluster.api.pid : undefined;

/** What this process, each node group's and the fake's (with `--api child`) hold, per node. */
function describeUse(cluster: ScaleCluster<ScaleNode>): string {
  const per = (n: number, of = nodes): string => (n / of).toFixed(1);
  const own = processUse('self');
  const here = cluster.host.processes.length === 0 ? nodes : 0;
  const mine = here === 0 ? '' : ` (${per(own?.files ?? 0)} a node)`;
  const parts = [own === undefined ? '' : `this process ${own.files} open files${mine}`];
  for (const [i, group] of cluster.host.processes.entries()) {
    const use = processUse(group.pid);
    if (use === undefined) continue;
    parts.push(
      `node group ${i} (${group.nodes} nodes): ${use.files} open files (${per(use.files, group.nodes)} a node), ` +
        `RSS ${use.rssMiB.toFixed(1)} MiB, ${mib(((use.rssMiB - group.baselineRssMiB) * 2 ** 20) / group.nodes)} MiB ` +
        `per simulated node`,
    );
  }
  const pid = fakePid(cluster);
  const fake = pid === undefined ? undefined : processUse(pid);
  if (fake !== undefined)
    parts.push(
      `the fake's process ${fake.files} open files (${per(fake.files)} a node), RSS ${fake.rssMiB.toFixed(1)} MiB ` +
        `(${(fake.rssMiB / nodes).toFixed(2)} MiB a node)`,
    );
  return parts.filter((p) => p !== '').join(here === 0 ? '\n  ' : '; ');
}

/** CPU seconds each process spent so far: this one, each node group, the fake's. */
function describeCpu(cluster: ScaleCluster<ScaleNode>): string {
  const seconds = (pid: number | 'self' | undefined): string =>
    pid === undefined ? '' : (processUse(pid)?.cpuSeconds.toFixed(1) ?? '?');
  const groups = cluster.host.processes.map((g) => seconds(g.pid));
  const fake = seconds(fakePid(cluster));
  return (
    `CPU seconds: this process ${seconds('self')}` +
    (groups.length === 0 ? '' : `, node groups ${groups.join(' + ')}`) +
    (fake === '' ? '' : `, the fake's ${fake}`)
  );
}

/** This process's open-file limit (soft / hard), from /proc. */
function openFileLimit(): string {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const [soft, hard] = line?.split(/\s{2,}/).slice(1, 3) ?? ['?', '?'];
  return `open files: soft ${soft}, hard ${hard}`;
}

const choice = apiChoice();
console.log(machineLine());
const where = nodeProcesses > 1 ? `${nodeProcesses} node processes` : 'this process';
console.log(
  `${openFileLimit()}; API server: ${choice.place}${values.http2 ? ' (HTTP/2 offered)' : ''}; ` +
    `counts: ${choice.place === 'kubeconfig' ? 'client' : values.counts}; nodes in ${where}`,
);
if (values['tiny-range'] === true) {
  // The tiny range reads each node's store beyond its file's allocations (its ledgers, its claims).
  if (nodeProcesses > 1) throw new Error('--tiny-range runs its nodes in this process: --node-processes 1');
  const { load } = await underLoad(async () => {
    const started = performance.now();
    const blockSize = values['tiny-block-size'] === undefined ? {} : { blockSize: number('tiny-block-size') };
    const cluster = await ScaleCluster.start({ nodes, range: values['tiny-cidr'], ...blockSize, api: choice });
    try {
      const idleSeconds = number('tiny-idle-minutes') * 60;
      const seed = values['tiny-seed'] === undefined ? {} : { seed: number('tiny-seed') };
      const report = await tinyRange(cluster, { bursts: number('tiny-bursts'), idleSeconds, ...seed });
      console.log(describeTiny(report));
      console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s of real time)`);
      if (cluster.unsettled > 0) console.log(`warning: ${cluster.unsettled} requests left unanswered by a settle`);
    } finally {
      await cluster.stop();
    }
  });
  console.log(describeLoad(load));
  process.exit(0);
}
const baseline = process.memoryUsage().rss;
const { load } = await underLoad(async () => {
  let started = performance.now();
  const cluster = await startCluster({
    nodes,
    range: values.range,
    blockSize: number('block-size'),
    api: choice,
    counts: values.counts as 'server' | 'client',
    memory: values.memory,
  });
  try {
    console.log(`${nodes} nodes started in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    started = performance.now();
    let claimMs: number[] = [];
    const hold = await counted(cluster, 0, async () => {
      claimMs = await holdBlocks(cluster, number('per-node'));
    });
    console.log(`each holds ${number('per-node')} addresses (${((performance.now() - started) / 1000).toFixed(1)} s)`);
    console.log(`  first ADD (its block's claim) ms p50 ${percentile(claimMs, 0.5)}, p99 ${percentile(claimMs, 0.99)}`);
    // What the first claims cost, in all (no clock passed: no rate).
    const kinds = [...hold.byKind].sort(([, a], [, b]) => b - a);
    console.log(`  their requests: ${kinds.map(([kind, n]) => `${kind} ${n}`).join(', ')}`);
    const lists = kinds.filter(([kind]) => kind.startsWith('list ')).reduce((total, [, n]) => total + n, 0);
    const blockLists = hold.byKind.get('list warrenblocks') ?? 0;
    console.log(`  LISTs a node: ${(lists / nodes).toFixed(2)} (of WarrenBlocks ${(blockLists / nodes).toFixed(2)})`);
    // Start-up's own requests (the first claims and publications, the first chores) end before the window.
    await cluster.advance(60_000, stepMs);
    const idleSeconds = number('idle-minutes') * 60;
    if (idleSeconds > 0) {
      started = performance.now();
      const idle = await idleWindow(cluster, idleSeconds, stepMs);
      const took = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`\nIdle (${took} s of real time):\n${describeWindow(idle)}\n${describeFanOut(idle)}`);
      console.log(describeAudit(await cluster.audit()));
    }
    const rss = process.memoryUsage().rss;
    const inHere = cluster.host.processes.length === 0;
    console.log(
      `\nmemory: RSS ${mib(rss)} MiB` +
        (inHere ? `, ${mib((rss - baseline) / nodes)} MiB per simulated node (this process)` : ' (this process)'),
    );
    console.log(`open watches per node: ${await openWatches(cluster)}`);
    console.log(await describeConnections(cluster));
    console.log(describeUse(cluster));
    const rate = number('churn');
    if (rate > 0) {
      started = performance.now();
      const report = await churn(cluster, { rate, seconds: number('churn-seconds') });
      const { counts } = report;
      const writesPerSecond = (writesPerNode100s(counts) * nodes) / 100;
      const took = ((performance.now() - started) / 1000).toFixed(1);
      console.log(
        `\nChurn at ${rate}/s for ${counts.seconds} s of clock (${took} s of real time):\n${describeWindow(counts)}`,
      );
      console.log(describeFanOut(counts, report.adds + report.dels));
      console.log(`writes/s over the cluster: ${writesPerSecond.toFixed(1)}`);
      console.log(
        `ADDs ${report.adds}, DELs ${report.dels}, failed ${report.failed}${report.failures.map((f) => `\n  ${f}`).join('')}`,
      );
      console.log(`ADD ms p50 ${percentile(report.addMs, 0.5)}, p99 ${percentile(report.addMs, 0.99)}`);
      console.log(describeAudit(report.audit));
    }
    const probe = await probeBlockClaim(cluster);
    console.log(
      `\n${probe === undefined ? 'fan-out of one block claim: not counted (the server is not the fake)' : describeProbe(probe, nodes)}`,
    );
    if (number('lose') > 0) {
      started = performance.now();
      const loss = await nodeLoss(cluster, { count: number('lose'), stepMs });
      const took = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`\n${describeNodeLoss(loss)}\n(${took} s of real time) ${describeWindow(loss.counts)}`);
    }
    if (values.forget) {
      started = performance.now();
      const forget = await nodeForget(cluster, { stepMs });
      const took = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`\n${describeNodeForget(forget)}\n(${took} s of real time) ${describeWindow(forget.counts)}`);
    }
    if (cluster.unsettled > 0) console.log(`warning: ${cluster.unsettled} requests left unanswered by a settle`);
    console.log(describeCpu(cluster));
  } finally {
    await cluster.stop();
  }
});
console.log(describeLoad(load));
