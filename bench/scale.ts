/**
 * The scale harness of issue 36 (`npm run bench:scale -- --nodes 500 --idle-minutes 10 --churn 100`):
 * N simulated nodes (bench/scale/simulated-node.ts: each a TieredStore on its own SQLite file with
 * its own client, its allocator and its cluster upkeep, built as the agent builds them) in this one
 * process against the fake API server, on one ManualClock. Every node allocates a few addresses of
 * one shared range (so each holds a block); then an idle window of clock; then churn (ADDs and DELs
 * at a rate across the nodes) and the auditor (no address held twice across every node's file).
 *
 * Prints, per node per minute by verb and resource, what the idle window and the churn cost the API
 * server, writes per node per 100 s, LISTs, watch events delivered, ADD p50/p99 during churn, and
 * memory per simulated node (this process's RSS over N, the fake API server included), the fan-out
 * of the changes (watch events per change, by resource) and of one block claim (fan-out.ts). The counts
 * come from the fake's per-client records, so they do not depend on the machine; the times do.
 *
 * Options: --nodes N (50), --idle-minutes M (5), --churn R ADDs+DELs per clock second (0: none),
 * --churn-seconds S (60), --per-node K addresses each node holds (2), --range CIDR (10.0.0.0/14),
 * --block-size P (28), --step-seconds S clock step (1).
 *
 * `--tiny-range` runs issue 36's tiny range instead (scale/tiny-range.ts): the nodes share
 * --tiny-cidr (10.0.0.0/24) at the store's own block size (or --tiny-block-size), skewed bursts past full
 * (--tiny-bursts, 6), --tiny-idle-minutes (10) idle, a last burst; prints the false exhaustions,
 * borrow p50/p99 on the ManualClock, ADD wall p50/p99, stranded after the idle window, duplicates.
 */
import { parseArgs } from 'node:util';
import { ScaleCluster } from './scale/cluster.ts';
import { churn, holdBlocks, idleWindow } from './scale/scenarios.ts';
import { type TinyRangeReport, tinyRange } from './scale/tiny-range.ts';
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
    'tiny-range': { type: 'boolean', default: false },
    'tiny-cidr': { type: 'string', default: '10.0.0.0/24' },
    'tiny-bursts': { type: 'string', default: '6' },
    'tiny-idle-minutes': { type: 'string', default: '10' },
    'tiny-block-size': { type: 'string' },
  },
});
const number = (name: keyof typeof values): number => {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name}: not a number: ${values[name]}`);
  return n;
};

const nodes = number('nodes');
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

/** The watches open on the fake per node, by resource ("warrenblocks 1.00, …; 9.00 in all"). */
function openWatches(cluster: ScaleCluster): string {
  const n = cluster.nodes.length;
  const open = WATCHABLE.map((r) => [r, cluster.api.watchCount(r)] as const).filter(([, count]) => count > 0);
  const all = open.reduce((total, [, count]) => total + count, 0);
  return `${open.map(([r, count]) => `${r} ${(count / n).toFixed(2)}`).join(', ')}; ${(all / n).toFixed(2)} in all`;
}

/** The tiny range's figures (scale/tiny-range.ts), as lines. */
function describeTiny(r: TinyRangeReport): string {
  const { idle, drained } = r;
  return [
    `range ${values['tiny-cidr']}: ${r.capacity} addresses, /${r.blockPrefix} blocks, ${nodes} nodes`,
    `ADDs ${r.adds}: served ${r.served}, refused as full ${r.exhausted} (false: ${r.falseExhaustions}), ` +
      `other failures ${r.failed}${r.failures.map((f) => `\n  ${f}`).join('')}`,
    `borrow (ADDs that waited for other nodes: ${r.borrowMs.length}), ManualClock ms: ` +
      `p50 ${percentile(r.borrowMs, 0.5)}, p99 ${percentile(r.borrowMs, 0.99)}, max ${percentile(r.borrowMs, 1)}`,
    `ADD wall ms: p50 ${percentile(r.addWallMs, 0.5)}, p99 ${percentile(r.addWallMs, 0.99)}`,
    `after ${values['tiny-idle-minutes']} min idle: ${idle.used} used, ${idle.free} free, ${idle.claimedBlocks} blocks ` +
      `claimed, stranded ${idle.stranded} (${((100 * idle.stranded) / r.capacity).toFixed(2)}%)` +
      idle.strandedWhy.map((w) => `\n  ${w}`).join(''),
    `after the last burst: ${drained.used} used, ${drained.free} free; duplicates ${r.duplicates.length}`,
    ...r.duplicates.slice(0, 10).map((d) => `  DUPLICATE ${d}`),
  ].join('\n');
}

console.log(machineLine());
if (values['tiny-range'] === true) {
  const { load } = await underLoad(async () => {
    const started = performance.now();
    const blockSize = values['tiny-block-size'] === undefined ? {} : { blockSize: number('tiny-block-size') };
    const cluster = await ScaleCluster.start({ nodes, range: values['tiny-cidr'], ...blockSize });
    try {
      const idleSeconds = number('tiny-idle-minutes') * 60;
      const report = await tinyRange(cluster, { bursts: number('tiny-bursts'), idleSeconds });
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
  const cluster = await ScaleCluster.start({ nodes, range: values.range, blockSize: number('block-size') });
  try {
    console.log(`${nodes} nodes started in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    started = performance.now();
    await holdBlocks(cluster, number('per-node'));
    console.log(`each holds ${number('per-node')} addresses (${((performance.now() - started) / 1000).toFixed(1)} s)`);
    // Start-up's own requests (the first claims and publications, the first chores) end before the window.
    await cluster.advance(60_000, stepMs);
    const idleSeconds = number('idle-minutes') * 60;
    if (idleSeconds > 0) {
      started = performance.now();
      const idle = await idleWindow(cluster, idleSeconds, stepMs);
      const took = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`\nIdle (${took} s of real time):\n${describeWindow(idle)}\n${describeFanOut(idle)}`);
    }
    const rss = process.memoryUsage().rss;
    console.log(`\nmemory: RSS ${mib(rss)} MiB, ${mib((rss - baseline) / nodes)} MiB per simulated node`);
    console.log(`open watches per node: ${openWatches(cluster)}`);
    const rate = number('churn');
    if (rate > 0) {
      const report = await churn(cluster, { rate, seconds: number('churn-seconds') });
      const { counts } = report;
      const writesPerSecond = (writesPerNode100s(counts) * nodes) / 100;
      console.log(`\nChurn at ${rate}/s for ${counts.seconds} s of clock:\n${describeWindow(counts)}`);
      console.log(describeFanOut(counts, report.adds + report.dels));
      console.log(`writes/s over the cluster: ${writesPerSecond.toFixed(1)}`);
      console.log(
        `ADDs ${report.adds}, DELs ${report.dels}, failed ${report.failed}${report.failures.map((f) => `\n  ${f}`).join('')}`,
      );
      console.log(`ADD ms p50 ${percentile(report.addMs, 0.5)}, p99 ${percentile(report.addMs, 0.99)}`);
      console.log(`audit: ${report.held} addresses held, ${report.duplicates.length} duplicates`);
      for (const d of report.duplicates.slice(0, 10)) console.log(`  DUPLICATE ${d}`);
    }
    console.log(`\n${describeProbe(await probeBlockClaim(cluster), nodes)}`);
    if (cluster.unsettled > 0) console.log(`warning: ${cluster.unsettled} requests left unanswered by a settle`);
  } finally {
    await cluster.stop();
  }
});
console.log(describeLoad(load));
