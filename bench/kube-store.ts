/**
 * Store `kubernetes` (issue 26's floors), side by side in one run on one machine, against the fake
 * API server (test/helpers/fake-kube-api.ts: the real wire, TLS, the CRDs of deploy/crds) answering
 * each write after WRITE_LATENCY_MS, the p50 of a create or update measured on a real API server
 * (KUBERNETES-API.md, "Measured latencies"); reads are answered at once, which flatters nothing on
 * the common path, where there are none. Every call goes through the installed forwarder, a fresh
 * process per call, timed by bench/spawn-timer.c.
 *   - API requests per ADD and per DEL on a node with room (counted by the fake; the floor is 0),
 *     apart from the agents' timers (lease renewals, publication in batches), which are printed
 *     as such; and per block claimed (the floor: at most 2);
 *   - sequential ADD median on `kubernetes` against SQLite, as alternating pairs of fresh agents;
 *     20 in flight against host-local, side by side in alternating rounds (bench/plugins.ts);
 *   - 3 nodes × PER_NODE ADDs at once on a range too small for each node to hold the blocks it
 *     needs, so nodes claim and then ask: duplicates, failures, leftovers, API requests per ADD;
 *   - a large range preloaded into the fake (bench/kube-large.ts) against an empty one.
 * Usage: node bench/kube-store.ts [--quick] [--allocations N] [--large-only | --burst-only | --floors-only]
 * (N: the large range's size, default 1,000,000 over 1,000 simulated nodes; --quick: 20,000; --large-only,
 * --burst-only: that section alone, the 3-node burst `--rounds R` times, default 1; --floors-only: the
 * side-by-side table and the pairs, with the two latency floors)
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { INSTALLED, install } from '../src/cli/install.ts';
import { buildPlugin } from '../scripts/build.ts';
import type { AgentHandle } from '../test/helpers/agent.ts';
import type { FakeKubeApi } from '../test/helpers/fake-kube-api.ts';
import { breakdown, kubeStoreArgs, requestsOf } from '../test/helpers/kube-store.ts';
import { CHILD_PATH, tempDir } from '../test/helpers/processes.ts';
import { WRITE_LATENCY_MS, benchApi, largeRange, printLarge } from './kube-large.ts';
import { type Load, describeLoad, machineLine, underLoad } from './machine.ts';
import {
  type Command,
  type Counts,
  type PluginFigures,
  benchAgent,
  cniEnv,
  hostLocalPlugin,
  printPluginTable,
  sequential,
  sideBySide,
  warrenPlugin,
} from './plugins.ts';
import { timeCalls } from './spawn-timer.ts';

const quick = process.argv.includes('--quick');
const IN_FLIGHT = 20;
const COUNTS: Counts = { sequential: quick ? 60 : 400, burst: quick ? 60 : 400, width: IN_FLIGHT };
const ROUNDS = quick ? 2 : 4;
const PER_NODE = 200;
/**
 * 639 addresses in 10 blocks of 64 (the range ends inside its /22): 200 ADDs a node need 4 blocks
 * each, 12 in all, so nodes must ask the owners for the rest.
 */
const TIGHT = { range: '10.254.0.0/22', range_end: '10.254.2.127', block_size: 26 };

const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}x`;
const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');

/** `n` calls of `command` through `forwarder` to `agent` (container IDs `tag-%i`), `width` in flight. */
async function calls(
  forwarder: Command,
  agent: AgentHandle,
  command: string,
  ipam: Record<string, unknown>,
  tag: string,
  n: number,
  width: number,
) {
  const config = { cniVersion: '1.1.0', name: 'kbench', ipam: { type: 'warren', socket: agent.socket, ...ipam } };
  return timeCalls({
    exe: forwarder.exe,
    args: forwarder.args,
    env: { ...cniEnv(command, `${tag}-%i`), PATH: CHILD_PATH },
    stdin: JSON.stringify(config),
    n,
    width,
  });
}

interface Tally {
  /** Writes of warren.dev objects: claims, give-backs, range records, admissions, asks, grants. */
  readonly writes: number;
  /** Reads of warren.dev objects. */
  readonly reads: number;
  /** Lease renewals and publications of block allocations: the agent's timers. */
  readonly timers: number;
  /** Reads of warren.dev objects the agent made in a window as long, idle (its claim checks, its lending). */
  readonly idleReads: number;
  /** Every request of the window by verb and resource, and of the idle window. */
  readonly detail: string;
  readonly idleDetail: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The requests the fake recorded while `work` ran, by kind, and the reads the agent makes of its own
 * in an idle window as long right after: reads in the window beyond those are the work's.
 */
async function tallied<T>(api: FakeKubeApi, work: () => Promise<T>): Promise<{ value: T; tally: Tally }> {
  let since = api.requests.length;
  const started = performance.now();
  const value = await work();
  const ms = performance.now() - started;
  const writes = requestsOf(api.requests, ['write'], since).length;
  const reads = requestsOf(api.requests, ['read'], since).length;
  const timers = requestsOf(api.requests, ['lease', 'publish'], since).length;
  const detail = breakdown(api.requests.slice(since));
  since = api.requests.length;
  await sleep(ms);
  const idleReads = requestsOf(api.requests, ['read'], since).length;
  const idleDetail = breakdown(api.requests.slice(since));
  return { value, tally: { writes, reads, timers, idleReads, detail, idleDetail } };
}

/** Requests per call in a tally: writes, and reads beyond the idle window's. */
const perCall = (t: Tally, n: number): number => (t.writes + Math.max(0, t.reads - t.idleReads)) / n;
const describeTally = (t: Tally): string =>
  `${t.writes} writes, ${t.reads} reads (idle for as long: ${t.idleReads}), ${t.timers} by the timers`;

/** API requests per ADD and DEL on a node with room, and per block claimed. */
async function requestFigures(forwarder: Command) {
  const api = await benchApi();
  const agent = await benchAgent({ args: kubeStoreArgs(api, 'kreq', [], 'default') });
  try {
    // One block holds every ADD: the first pins the range and claims it, the rest are the common path.
    const room = { range: '10.200.0.0/16', block_size: 20 };
    const n = quick ? 50 : 200;
    await calls(forwarder, agent, 'ADD', room, 'warm', 1, 1);
    const adds = await tallied(api, () => calls(forwarder, agent, 'ADD', room, 'common', n, 1));
    const dels = await tallied(api, () => calls(forwarder, agent, 'DEL', room, 'common', n, 1));
    // Blocks of 16 on a range of its own: every 14th ADD or so claims one.
    const small = { range: '10.201.0.0/20', block_size: 28 };
    await calls(forwarder, agent, 'ADD', small, 'first', 1, 1);
    const since = api.requests.length;
    const claiming = await tallied(api, () => calls(forwarder, agent, 'ADD', small, 'claiming', quick ? 60 : 300, 1));
    const claimed = requestsOf(api.requests, ['write'], since).filter(
      (r) => r.method === 'POST' && /\/warrenblocks\/?$/.test(r.path) && r.status === 201,
    ).length;
    const failures = [adds, dels, claiming].reduce((s, b) => s + b.value.results.filter((r) => r.code !== 0).length, 0);
    return { n, add: adds.tally, del: dels.tally, claimed, perClaim: claiming.tally, failures };
  } finally {
    await agent.stop();
    await api.stop();
  }
}

/** Sequential ADD median on `kubernetes` against SQLite: alternating pairs of fresh agents. */
async function kubeAgainstSqlite(forwarder: Command) {
  const pairs = quick ? 1 : 5;
  const n = quick ? 20 : 100;
  const ratios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const m: Record<string, number> = {};
    for (const kind of i % 2 === 0 ? ['sqlite', 'kubernetes'] : ['kubernetes', 'sqlite']) {
      const api = kind === 'kubernetes' ? await benchApi() : undefined;
      const p = await warrenPlugin(
        kind,
        forwarder,
        api === undefined ? [] : kubeStoreArgs(api, `kpair-${i}`, [], 'default'),
      );
      try {
        m[kind] = (await sequential(n, p.command, cniEnv('ADD', `pair-${i}-%i`), JSON.stringify(p.config))).median;
      } finally {
        await p.stop();
        await api?.stop();
      }
    }
    ratios.push((m.kubernetes as number) / (m.sqlite as number));
  }
  const sorted = [...ratios].sort((x, y) => x - y);
  return { ratios, median: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN };
}

/** 3 nodes × PER_NODE ADDs at once on TIGHT, then their DELs. */
async function threeNodes(forwarder: Command) {
  const api = await benchApi();
  const agents: AgentHandle[] = [];
  try {
    for (const node of ['kb1', 'kb2', 'kb3'])
      agents.push(await benchAgent({ args: kubeStoreArgs(api, node, [], 'default') }));
    const since = api.requests.length;
    const started = performance.now();
    const { value: batches, tally: added } = await tallied(api, () =>
      Promise.all(agents.map((a, i) => calls(forwarder, a, 'ADD', TIGHT, `burst-${i}`, PER_NODE, i < 2 ? 7 : 6))),
    );
    const seconds = (performance.now() - started) / 1000;
    const asked = requestsOf(api.requests, ['write'], since).filter((r) => /\/warrenaddressrequests/.test(r.path));
    const claims = requestsOf(api.requests, ['write'], since).filter(
      (r) => r.method === 'POST' && /\/warrenblocks\/?$/.test(r.path) && r.status === 201,
    );
    const results = batches.flatMap((b) => b.results);
    const addresses = results.flatMap((r) => {
      if (r.code !== 0) return [];
      return ((JSON.parse(r.stdout) as { ips?: Array<{ address: string }> }).ips ?? []).map((ip) => ip.address);
    });
    const dels = await Promise.all(agents.map((a, i) => calls(forwarder, a, 'DEL', TIGHT, `burst-${i}`, PER_NODE, 7)));
    const left = (await Promise.all(agents.map((a, i) => a.allocations(`?network=kbench&node=kb${i + 1}`)))).flat()
      .length;
    return {
      adds: results.length,
      perSecond: results.length / seconds,
      failures:
        results.filter((r) => r.code !== 0).length + dels.flatMap((d) => d.results).filter((r) => r.code !== 0).length,
      duplicates: addresses.length - new Set(addresses).size,
      left,
      requests: added,
      claims: claims.length,
      asks: asked.length,
    };
  } finally {
    for (const a of agents) await a.stop();
    await api.stop();
  }
}

/** Warren on kubernetes, on SQLite and host-local side by side (bench/plugins.ts), printed as a table. */
async function threeColumns(forwarder: Command): Promise<PluginFigures[]> {
  const api = await benchApi();
  const plugins = [
    await warrenPlugin('warren/kubernetes', forwarder, kubeStoreArgs(api, 'kside', [], 'default')),
    await warrenPlugin('warren/sqlite', forwarder),
    hostLocalPlugin(),
  ];
  const columns = await sideBySide(plugins, [COUNTS, COUNTS, COUNTS], ROUNDS);
  for (const p of plugins) await p.stop();
  await api.stop();
  printPluginTable(
    `Through the plugin executable, from empty; Warren on kubernetes (fake at ${WRITE_LATENCY_MS} ms a write) ` +
      'and on SQLite, host-local',
    plugins,
    columns,
    [COUNTS, COUNTS, COUNTS],
    ROUNDS,
  );
  return columns;
}

type Pairs = { value: Awaited<ReturnType<typeof kubeAgainstSqlite>>; load: Load };

/** The two latency floors of issue 26: sequential ADD against SQLite, 20 in flight against host-local. */
function printLatencyFloors(columns: readonly PluginFigures[], pairs: Pairs): void {
  const [k, s, h] = columns as [PluginFigures, PluginFigures, PluginFigures];
  console.log(
    `  sequential ADD on kubernetes <= 1.2x SQLite: ${ratio(k.addMedian, s.addMedian)} in the table; ` +
      `${pairs.value.median.toFixed(2)}x the median of ${pairs.value.ratios.length} alternating pairs ` +
      `(${pairs.value.ratios.map((x) => x.toFixed(2)).join(', ')}; ${describeLoad(pairs.load)})  ` +
      `${verdict(pairs.value.median <= 1.2)}`,
  );
  console.log(
    `  ${IN_FLIGHT} in flight on kubernetes >= 4x host-local: ${ratio(k.addPerSecond, h.addPerSecond)} ` +
      `(SQLite: ${ratio(s.addPerSecond, h.addPerSecond)})  ${verdict(k.addPerSecond >= 4 * h.addPerSecond)}`,
  );
}

/** The side-by-side table and the pairs alone (--floors-only). */
async function latencyFloors(forwarder: Command): Promise<void> {
  const columns = await threeColumns(forwarder);
  const pairs = await underLoad(() => kubeAgainstSqlite(forwarder));
  console.log('\nFloors (issue 26), side by side in this run');
  printLatencyFloors(columns, pairs);
}

/** The 3-node burst, printed. */
async function burst(forwarder: Command) {
  const three = await underLoad(() => threeNodes(forwarder));
  const t = three.value;
  console.log(
    `\n3 nodes × ${PER_NODE} ADDs at once on ${TIGHT.range} to ${TIGHT.range_end} (blocks of /${TIGHT.block_size}: ` +
      `nodes claim, then ask); ${describeLoad(three.load)}`,
  );
  console.log(
    `  ${t.adds} ADDs, ${t.perSecond.toFixed(0)} ADD/s; duplicates ${t.duplicates}, failures ${t.failures}, ` +
      `left after the DELs ${t.left}`,
  );
  console.log(
    `  API requests per ADD: ${perCall(t.requests, t.adds).toFixed(3)} (${describeTally(t.requests)}; ` +
      `${t.claims} blocks claimed, ${t.asks} writes of address requests)`,
  );
  console.log(`    by verb and resource: ${t.requests.detail}`);
  return three;
}

async function main(): Promise<void> {
  buildPlugin();
  const binDir = tempDir('bench-kube-bin-');
  install({ cniBinDir: binDir, link: true });
  const forwarder: Command = { exe: join(binDir, INSTALLED.forwarder), args: [] };
  console.log(`Store kubernetes (issue 26), ${quick ? 'quick' : 'full'} run. ${machineLine()}`);
  console.log(
    `The fake API server answers each write after ${WRITE_LATENCY_MS} ms (a real one's p50, ` +
      `KUBERNETES-API.md); every ADD and DEL goes through the installed forwarder.\n`,
  );
  if (process.argv.includes('--large-only')) {
    printLarge(await largeRange(forwarder, { quick }));
    return;
  }

  if (process.argv.includes('--burst-only')) {
    const i = process.argv.indexOf('--rounds');
    const rounds = i < 0 ? 1 : Number(process.argv[i + 1]);
    for (let r = 0; r < rounds; r++) await burst(forwarder);
    return;
  }
  if (process.argv.includes('--floors-only')) {
    await latencyFloors(forwarder);
    return;
  }

  const req = await underLoad(() => requestFigures(forwarder));
  const r = req.value;
  const perAdd = perCall(r.add, r.n);
  const perDel = perCall(r.del, r.n);
  const perClaim = perCall(r.perClaim, Math.max(1, r.claimed));
  console.log(`API requests on a node with room (${r.n} sequential ADDs, then their DELs); ${describeLoad(req.load)}`);
  console.log(`  per ADD: ${perAdd.toFixed(3)}  (${describeTally(r.add)})`);
  console.log(`  per DEL: ${perDel.toFixed(3)}  (${describeTally(r.del)})`);
  console.log(`  per block claimed: ${perClaim.toFixed(2)}  (${r.claimed} blocks; ${describeTally(r.perClaim)})`);
  console.log(`    the claims' window: ${r.perClaim.detail}`);
  console.log(`    idle for as long:   ${r.perClaim.idleDetail || 'none'}`);
  console.log(`  failures: ${r.failures}\n`);

  const columns = await threeColumns(forwarder);
  const pairs = await underLoad(() => kubeAgainstSqlite(forwarder));

  const three = await burst(forwarder);
  const t = three.value;

  const large = await largeRange(forwarder, { quick });
  printLarge(large);

  console.log('\nFloors (issue 26), side by side in this run');
  console.log(
    `  API requests per ADD / per DEL on the common path = 0: ${perAdd.toFixed(3)} / ${perDel.toFixed(3)}  ` +
      `${verdict(perAdd === 0 && perDel === 0)}`,
  );
  console.log(`  API requests per block claimed <= 2: ${perClaim.toFixed(2)}  ${verdict(perClaim <= 2)}`);
  printLatencyFloors(columns, pairs);
  console.log(
    `  3 nodes × ${PER_NODE}: 0 duplicates, 0 failures, 0 left: ${t.duplicates}, ${t.failures}, ${t.left}  ` +
      `${verdict(t.duplicates + t.failures + t.left === 0)}`,
  );
  console.log(
    `  ADD on ${large.allocations.toLocaleString('en')} allocations <= 1.2x the empty range: ` +
      `${ratio(large.full.addMedian, large.empty.addMedian)}  ${verdict(large.full.addMedian <= 1.2 * large.empty.addMedian)}`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
