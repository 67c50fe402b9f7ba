/**
 * Warren beside its peers, in one run on one machine, fresh state for each:
 *   - process floor: bare `node -e 0`, sequential and 20 at a time;
 *   - cold start (VERSION) of the installed forwarder, of the TypeScript plugin alone, and of
 *     host-local;
 *   - ADD and DEL through the installed forwarder (`warren install`), through the TypeScript
 *     plugin alone, and through the CNI reference host-local plugin: sequential (median; p99 where
 *     the calls support it, else the maximum, with n) and 20 in flight (calls/s), duplicates,
 *     failures, leftovers; the same through the forwarder to an agent on a one-member etcd; all
 *     from empty, then Warren and host-local again each holding FILL allocations (bench/plugins.ts);
 *   - the agent-down paths (DEL journaled, ADD 11, STATUS 50): forwarder against TypeScript plugin;
 *   - the floors, each with its ratio and whether it is met;
 *   - the in-process engine beside the engine at e9c30a3 (bench/engine-then-now.ts);
 *   - the in-process engine (bench/engine.ts): allocations per second and memory for 100,000
 *     allocations, the cost of one allocation at empty, half full and 99% full, agent start
 *     with 100,000 allocations stored;
 *   - agent start to serving (bench/agent-start.ts): CPU and wall time from the spawn of
 *     `bin/warren agent` to its socket's first answer, then the p99 of the 200 sequential ADDs
 *     that follow at once (what the warm-up is for); on this machine as it is, and again with
 *     8 busy loops beside it (scripts/cpu-hog.sh);
 *   - store `kubernetes` against the fake API server (bench/kube-store.ts, issue 26's floors), in a
 *     process of its own: its large range holds up to a million allocations in memory.
 * Every process figure is timed by bench/spawn-timer.c (posix_spawn, spawn to exit), one driver
 * run per batch, so the figures are the plugins' and not Node's child_process overhead. The run
 * prints its command, the CPU and Node first, and the load average before and after each section
 * (bench/machine.ts). Every agent serves metrics on a free port of its own, checked.
 * Usage: npm run bench [-- --quick] [-- --start-only]  (--start-only: agent start to serving alone)
 */
import { rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { engineFigures } from './engine.ts';
import { BASELINE_COMMIT, engineThenNow, printThenNow } from './engine-then-now.ts';
import { type StartSummary, describeStarts } from './agent-start.ts';
import { startEtcd } from '../test/helpers/etcd.ts';
import { CHILD_PATH, tempDir } from '../test/helpers/processes.ts';
import { buildPlugin } from '../scripts/build.ts';
import { INSTALLED, install } from '../src/cli/install.ts';
import { describeLoad, loadavg, machineLine, underLoad } from './machine.ts';
import {
  type Command,
  type Counts,
  type PluginFigures,
  HOST_LOCAL,
  benchAgent,
  cniEnv,
  concurrent,
  hostLocalPlugin,
  printPluginTable,
  sequential,
  sideBySide,
  warrenPlugin,
} from './plugins.ts';
import { describeTail } from './stats.ts';

const quick = process.argv.includes('--quick');
const IN_FLIGHT = 20;
/** From empty: 1,000 sequential ADDs, so that a p99 stands on 10 calls beyond it. */
const EMPTY: Counts = { sequential: quick ? 100 : 1_000, burst: quick ? 60 : 600, width: IN_FLIGHT };
/** The TypeScript plugin alone costs ~30 ms a call: fewer calls, its tail quoted as the maximum. */
const TS_PLUGIN: Counts = { sequential: quick ? 16 : 200, burst: quick ? 40 : 200, width: IN_FLIGHT };
/** Rounds the calls are split into, the plugins' order reversed every other round (plugins.ts sideBySide). */
const ROUNDS = quick ? 2 : 4;
/** Allocations Warren and host-local hold before the second table's first call. */
const FILL = quick ? 1_000 : 10_000;
/** At FILL a host-local call reads FILL files (~0.25 s each on this machine): fewer calls. */
const AT_FILL: Counts = { sequential: quick ? 20 : 100, burst: quick ? 40 : 200, width: IN_FLIGHT };
/** VERSION and the agent-down paths: medians only. */
const SEQ = quick ? 15 : 200;

/**
 * Sequential ADD on etcd against SQLite, as pairs of fresh agents run one after the other (the
 * order swapped every pair), so the ratio is not one run's drift on this shared machine: each
 * pair's ratio of medians, and their median.
 */
async function etcdAgainstSqlite(
  forwarder: Command,
  etcdArgs: readonly string[],
): Promise<{ ratios: number[]; median: number }> {
  const pairs = quick ? 1 : 5;
  const calls = quick ? 15 : 100;
  const ratios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const medianOf = async (args: readonly string[], tag: string): Promise<number> => {
      const p = await warrenPlugin(tag, forwarder, args);
      try {
        return (await sequential(calls, p.command, cniEnv('ADD', `pair-${i}-${tag}-%i`), JSON.stringify(p.config)))
          .median;
      } finally {
        await p.stop();
      }
    };
    const order = i % 2 === 0 ? (['sqlite', 'etcd'] as const) : (['etcd', 'sqlite'] as const);
    const m: Record<string, number> = {};
    for (const kind of order)
      m[kind] = await medianOf(kind === 'etcd' ? [...etcdArgs.slice(0, -1), `/bench-pair-${i}/`] : [], kind);
    ratios.push((m.etcd as number) / (m.sqlite as number));
  }
  const sorted = [...ratios].sort((x, y) => x - y);
  return { ratios, median: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN };
}

const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}x`;
const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');

async function main(): Promise<void> {
  buildPlugin();
  const binDir = tempDir('bench-bin-');
  // Installed as on a node, but linking this Node rather than copying 120 MB of it.
  install({ cniBinDir: binDir, link: true });
  const forwarder: Command = { exe: join(binDir, INSTALLED.forwarder), args: [] };
  const fallbackDir = join(binDir, INSTALLED.fallbackDir);
  const typescript: Command = { exe: join(fallbackDir, INSTALLED.node), args: [join(fallbackDir, INSTALLED.bundle)] };
  const hostLocal: Command = { exe: HOST_LOCAL, args: [] };
  const env = { PATH: CHILD_PATH };
  console.log(`Warren benchmarks, ${quick ? 'quick' : 'full'} run. ${machineLine()}`);
  console.log(`Load averages (1, 5, 15 min) are read before → after each section.\n`);

  const node: Command = { exe: process.execPath, args: ['-e', '0'] };
  const cold = await underLoad(async () => {
    const floorSeq = await sequential(SEQ, node, env);
    const floorPar = await concurrent(EMPTY.burst, IN_FLIGHT, node, env);
    const versionOf = (c: Command, extra: NodeJS.ProcessEnv = {}) =>
      sequential(SEQ, c, { ...env, ...extra, CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}');
    // The forwarder asks the agent for VERSION, as for everything: measured with an agent up.
    const versionAgent = await benchAgent();
    const versionForwarder = await versionOf(forwarder, { WARREN_SOCKET: versionAgent.socket });
    await versionAgent.stop();
    return {
      floorSeq,
      floorPar,
      versionForwarder,
      versionTypescript: await versionOf(typescript),
      versionHostLocal: await versionOf(hostLocal),
    };
  });
  const { floorSeq, floorPar, versionForwarder, versionTypescript, versionHostLocal } = cold.value;
  console.log(`Process floor and cold start (VERSION, median ms of ${SEQ}); ${describeLoad(cold.load)}`);
  console.log(`  node -e 0 sequential median ms             ${floorSeq.median.toFixed(1)}`);
  console.log(`  node -e 0 ${IN_FLIGHT} at a time /s                  ${floorPar.perSecond.toFixed(0)}`);
  console.log(`  warren (forwarder, agent up)               ${versionForwarder.median.toFixed(2)}`);
  console.log(
    `  warren TypeScript plugin alone             ${versionTypescript.median.toFixed(1)} ` +
      ` (${ratio(versionTypescript.median, floorSeq.median)} node -e 0)`,
  );
  console.log(`  host-local                                 ${versionHostLocal.median.toFixed(2)}\n`);

  const etcd = await startEtcd(1);
  const etcdArgs = ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(','), '--etcd-prefix', '/bench/'];
  // From empty: each plugin on fresh state, all of them side by side in alternating rounds.
  const plugins = [
    await warrenPlugin('warren', forwarder),
    hostLocalPlugin(),
    await warrenPlugin('TS plugin', typescript),
    await warrenPlugin('warren/etcd', forwarder, etcdArgs),
  ];
  const emptyCounts = [EMPTY, EMPTY, TS_PLUGIN, EMPTY];
  const columns = await sideBySide(plugins, emptyCounts, ROUNDS);
  for (const p of plugins) await p.stop();
  const etcdPairs = await underLoad(() => etcdAgainstSqlite(forwarder, etcdArgs));
  await etcd.stop();
  printPluginTable(
    'Through the plugin executable, from empty; Warren on SQLite --sync FULL, or on one etcd member',
    plugins,
    columns,
    emptyCounts,
    ROUNDS,
  );

  // Warren and host-local each holding FILL allocations, side by side in alternating rounds.
  const filledPlugins = [await warrenPlugin('warren', forwarder, [], FILL), hostLocalPlugin(FILL)];
  const filled = await sideBySide(filledPlugins, [AT_FILL, AT_FILL], ROUNDS);
  for (const p of filledPlugins) await p.stop();
  console.log('');
  printPluginTable(
    `The same, each holding ${FILL.toLocaleString('en')} allocations first (seeded, not timed)`,
    filledPlugins,
    filled,
    [AT_FILL, AT_FILL],
    ROUNDS,
  );

  // The agent-down paths: the forwarder hands them to the TypeScript plugin.
  const down = tempDir('bench-down-');
  const downConf = JSON.stringify({
    cniVersion: '1.1.0',
    name: 'bench',
    ipam: {
      type: 'warren',
      socket: join(down, 'absent.sock'),
      journal_dir: join(down, 'journal'),
      range: '10.230.0.0/16',
    },
  });
  const downFigures = async (c: Command) => ({
    del: (await sequential(SEQ, c, cniEnv('DEL', `down-${c.args.length}-%i`), downConf)).median,
    add: (await sequential(SEQ, c, cniEnv('ADD', 'down-%i'), downConf)).median,
    status: (await sequential(SEQ, c, { ...env, CNI_COMMAND: 'STATUS' }, downConf)).median,
  });
  const downRun = await underLoad(async () => ({
    forwarder: await downFigures(forwarder),
    typescript: await downFigures(typescript),
  }));
  const { forwarder: downForwarder, typescript: downTypescript } = downRun.value;
  rmSync(down, { recursive: true, force: true });
  console.log(`\nAgent down, median ms of ${SEQ}; ${describeLoad(downRun.load)}`);
  console.log(`                                            forwarder    TS plugin`);
  console.log(
    `  DEL (journaled)                          ${downForwarder.del.toFixed(1).padStart(9)} ` +
      `${downTypescript.del.toFixed(1).padStart(12)}`,
  );
  console.log(
    `  ADD (answers 11)                         ${downForwarder.add.toFixed(1).padStart(9)} ` +
      `${downTypescript.add.toFixed(1).padStart(12)}`,
  );
  console.log(
    `  STATUS (answers 50)                      ${downForwarder.status.toFixed(1).padStart(9)} ` +
      `${downTypescript.status.toFixed(1).padStart(12)}`,
  );

  const [w, h, , e] = columns as [PluginFigures, PluginFigures, PluginFigures, PluginFigures];
  const [wf, hf] = filled as [PluginFigures, PluginFigures];
  console.log('\nFloors (issue 12), from empty, side by side in this run');
  console.log(
    `  ADD sequential median <= 0.6x host-local: ${ratio(w.addMedian, h.addMedian)} ` +
      ` ${verdict(w.addMedian <= 0.6 * h.addMedian)}`,
  );
  console.log(
    `    (holding ${FILL.toLocaleString('en')} each: ${ratio(wf.addMedian, hf.addMedian)}; ` +
      `${IN_FLIGHT} in flight ${ratio(wf.addPerSecond, hf.addPerSecond)})`,
  );
  const p99Comparable = w.addTail.label === 'p99' && h.addTail.label === 'p99';
  console.log(
    `  ADD sequential p99 <= host-local's p99:  ${describeTail(w.addTail)} ` +
      `vs ${describeTail(h.addTail)}  ` +
      `${p99Comparable ? verdict(w.addTail.value <= h.addTail.value) : 'too few calls for a p99'}`,
  );
  console.log(
    `  ADD ${IN_FLIGHT} in flight >= 4x host-local:        ${ratio(w.addPerSecond, h.addPerSecond)} ` +
      ` ${verdict(w.addPerSecond >= 4 * h.addPerSecond)}`,
  );
  console.log(
    `  VERSION <= 0.5x host-local:              ${ratio(versionForwarder.median, versionHostLocal.median)} ` +
      ` ${verdict(versionForwarder.median <= 0.5 * versionHostLocal.median)}`,
  );
  console.log(
    `  etcd sequential ADD <= 2x SQLite:        ${ratio(e.addMedian, w.addMedian)} ` +
      `in the table; ${etcdPairs.value.median.toFixed(2)}x the median of ${etcdPairs.value.ratios.length} ` +
      `alternating pairs (${etcdPairs.value.ratios.map((r) => r.toFixed(2)).join(', ')}; ` +
      `${describeLoad(etcdPairs.load)})  ${verdict(etcdPairs.value.median <= 2)}`,
  );
  const downOk =
    downForwarder.del <= downTypescript.del * 1.1 &&
    downForwarder.add <= downTypescript.add * 1.1 &&
    downForwarder.status <= downTypescript.status * 1.1;
  console.log(`  agent-down paths no dearer than the TS plugin alone (within 10%): ${verdict(downOk)}`);
  const thenNow = await underLoad(() => engineThenNow({ quick, rounds: quick ? 1 : 5 }));
  const slowest = Math.min(...thenNow.value.rows.map((r) => r.better));
  console.log(
    `  engine at least as fast as at ${BASELINE_COMMIT} (worst figure today/then): ` +
      `${slowest.toFixed(2)}x  ${verdict(slowest >= 1)}\n`,
  );
  console.log(
    `The engine today beside ${BASELINE_COMMIT} (medians of alternating fresh ` +
      `processes); ${describeLoad(thenNow.load)}`,
  );
  printThenNow(thenNow.value);
  console.log('');

  const engine = await underLoad(() => engineFigures(quick));
  console.log(
    `In process (engine over SQLite, each figure in a fresh process; last column: ` +
      `what a committed allocation survives); ${describeLoad(engine.load)}`,
  );
  for (const [k, v, d] of engine.value) console.log(`  ${k.padEnd(70)} ${v.padStart(16)}  ${d}`);
  rmSync(binDir, { recursive: true, force: true });
  startFigures();
  kubeStoreFigures();
}

/** Store `kubernetes` (bench/kube-store.ts), its output as it comes; a failure fails the run. */
function kubeStoreFigures(): void {
  console.log('');
  const r = spawnSync(process.execPath, ['bench/kube-store.ts', ...(quick ? ['--quick'] : [])], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`bench/kube-store.ts failed (${r.status ?? r.signal})`);
}

/**
 * Agent start to serving (issue 24's floor: 0.3 s of CPU, 0.5 s of wall time on a quiet machine),
 * as the machine is and with the CPU hog: each in a process of its own (bench/agent-start.ts), the
 * hogged one under scripts/cpu-hog.sh, which stops its busy loops whatever happens.
 */
function startFigures(): void {
  const starts = quick ? '3' : '9';
  const run = (hog: boolean): StartSummary & { loadBefore: string; loadavg: string; cpuModel: string } => {
    const bench = [process.execPath, 'bench/agent-start.ts', '--starts', starts, '--adds', '--json'];
    const r = spawnSync(
      hog ? 'bash' : (bench[0] as string),
      hog ? ['scripts/cpu-hog.sh', 'run', '8', '--', ...bench] : bench.slice(1),
      { encoding: 'utf8' },
    );
    const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
    if (r.status !== 0 || line === undefined) throw new Error(`bench/agent-start.ts failed (${r.status}): ${r.stderr}`);
    return JSON.parse(line) as StartSummary & { loadBefore: string; loadavg: string; cpuModel: string };
  };
  if (process.argv.includes('--start-only')) console.log(machineLine());
  console.log(
    `\nAgent start to serving (bin/warren agent, default flags but metrics ` +
      `on a free port; loadavg before: ${loadavg()})`,
  );
  const idle = run(false);
  console.log(
    `  ${describeStarts('as the machine is', idle)}; load ${idle.loadBefore} ` +
      `→ ${idle.loadavg.split(' ').slice(0, 3).join(' ')}`,
  );
  const hogged = run(true);
  console.log(
    `  ${describeStarts('with 8 busy loops', hogged)}; load ${hogged.loadBefore} ` +
      `→ ${hogged.loadavg.split(' ').slice(0, 3).join(' ')} (the hog's 8 loops ` +
      `included)`,
  );
  const atListen = (x: number | null): string => (x === null || !Number.isFinite(x) ? 'n/a' : x.toFixed(2));
  // The agent serves from the moment it listens; what it did between then and the poll's answer
  // (the warm-up, beside serving) is counted in the second pair, which a loaded machine inflates.
  console.log(
    `  floor, CPU to serving <= 0.3 s: ${atListen(idle.cpuAtListen)} / ${atListen(hogged.cpuAtListen)} ` +
      `s when it listened, ${idle.cpu.toFixed(2)} / ${hogged.cpu.toFixed(2)} ` +
      `s at the first answer  ` +
      `${verdict([idle.cpuAtListen, hogged.cpuAtListen].every((x) => typeof x === 'number' && x <= 0.3))}`,
  );
  console.log(
    `  floor, wall to serving <= 0.5 s on a quiet machine: ${idle.wall.toFixed(2)} ` +
      `s (loadavg ${idle.loadavg.split(' ')[0]})  ${verdict(idle.wall <= 0.5)}`,
  );
}

if (process.argv.includes('--start-only')) startFigures();
else await main();
