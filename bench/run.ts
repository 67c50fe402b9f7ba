/**
 * Warren beside its peers, in one run on one machine, fresh state for each:
 *   - process floor: bare `node -e 0`, sequential and 20 at a time;
 *   - cold start (VERSION) of the installed forwarder, of the TypeScript plugin alone, and of
 *     host-local;
 *   - ADD and DEL through the installed forwarder (`warren install`), through the TypeScript
 *     plugin alone, and through the CNI reference host-local plugin: sequential (median, p99) and
 *     20 in flight (calls/s), duplicates, failures, leftovers; the same through the forwarder to an
 *     agent on a one-member etcd;
 *   - the agent-down paths (DEL journaled, ADD 11, STATUS 50): forwarder against TypeScript plugin;
 *   - the issue's floors, each with its ratio and whether it is met;
 *   - the in-process engine beside the engine at e9c30a3 (bench/engine-then-now.ts);
 *   - the in-process engine (bench/engine.ts): allocations per second and memory for 100,000
 *     allocations, the cost of one allocation at empty, half full and 99% full, agent start
 *     with 100,000 allocations stored;
 *   - agent start to serving (bench/agent-start.ts): CPU and wall time from the spawn of
 *     `bin/warren agent` to its socket's first answer, then the p99 of the 200 sequential ADDs
 *     that follow at once (what the warm-up is for); on this machine as it is, and again with
 *     8 busy loops beside it (scripts/cpu-hog.sh).
 * Every process figure is timed by bench/spawn-timer.c (posix_spawn, spawn to exit), one driver
 * run per batch, so the figures are the plugins' and not Node's child_process overhead.
 * Usage: npm run bench [-- --quick] [-- --start-only]  (--start-only: agent start to serving alone)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engineFigures } from './engine.ts';
import { BASELINE_COMMIT, engineThenNow, printThenNow } from './engine-then-now.ts';
import { type TimedCall as Timed, timeCalls } from './spawn-timer.ts';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type StartSummary, describeStarts } from './agent-start.ts';
import { type AgentHandle, startAgent } from '../test/helpers/agent.ts';
import { startEtcd } from '../test/helpers/etcd.ts';
import { CHILD_PATH } from '../test/helpers/processes.ts';
import { buildPlugin } from '../scripts/build.ts';
import { INSTALLED, install } from '../src/cli/install.ts';

const quick = process.argv.includes('--quick');
// 200 sequential calls, so a p99 is the second-slowest call rather than the one slowest.
const SEQ = quick ? 15 : 200;
const BURST = quick ? 60 : 600;
const IN_FLIGHT = 20;
const HOST_LOCAL = '/usr/lib/cni/host-local';

/** One batch of `n` calls of `c`, at most `width` in flight, timed by bench/spawn-timer.c. */
const batch = (c: Command, env: NodeJS.ProcessEnv, stdin: string, n: number, width: number) =>
  timeCalls({ exe: c.exe, args: c.args, env, stdin, n, width });

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};

/** `n` calls one after another: median and p99 per call. */
async function sequential(
  n: number,
  c: Command,
  env: NodeJS.ProcessEnv,
  stdin = '',
): Promise<{ median: number; p99: number; failures: number; results: Timed[] }> {
  const { results } = await batch(c, env, stdin, n, 1);
  const ms = results.map((r) => r.ms);
  return {
    median: quantile(ms, 0.5),
    p99: quantile(ms, 0.99),
    failures: results.filter((r) => r.code !== 0).length,
    results,
  };
}

/** `n` calls, `width` in flight: calls per second over the whole batch. */
async function concurrent(
  n: number,
  width: number,
  c: Command,
  env: NodeJS.ProcessEnv,
  stdin = '',
): Promise<{ perSecond: number; totalMs: number; failures: number; results: Timed[] }> {
  const { results, totalMs } = await batch(c, env, stdin, n, width);
  return { perSecond: (n / totalMs) * 1000, totalMs, failures: results.filter((r) => r.code !== 0).length, results };
}

function addresses(results: Timed[]): string[] {
  return results.flatMap((r) => {
    try {
      return (JSON.parse(r.stdout).ips as Array<{ address: string }>).map((ip) => ip.address);
    } catch {
      return [];
    }
  });
}

const duplicates = (xs: string[]): number => xs.length - new Set(xs).size;

/** How a plugin is run: the executable and its arguments. */
interface Command {
  readonly exe: string;
  readonly args: readonly string[];
}

interface PluginUnderTest {
  name: string;
  command: Command;
  config: (dir: string) => object;
  leftovers: (dir: string) => Promise<number>;
  stop: () => Promise<void>;
  dir: string;
}

/** Warren through `command`, on a fresh agent (SQLite with `--sync FULL` unless args say otherwise). */
async function warrenPlugin(
  name: string,
  command: Command,
  agentArgs: readonly string[] = [],
): Promise<PluginUnderTest> {
  const agent: AgentHandle = await startAgent({ args: agentArgs });
  return {
    name,
    command,
    dir: agent.dir,
    config: () => ({
      cniVersion: '1.0.0',
      name: 'bench',
      ipam: { type: 'warren', socket: agent.socket, range: '10.230.0.0/16' },
    }),
    leftovers: async () => (await agent.allocations()).length,
    stop: async () => void (await agent.stop()),
  };
}

function hostLocalPlugin(): PluginUnderTest {
  const dir = mkdtempSync(join(tmpdir(), 'bench-hostlocal-'));
  return {
    name: 'host-local',
    command: { exe: HOST_LOCAL, args: [] },
    dir,
    config: (d) => ({
      cniVersion: '1.0.0',
      name: 'bench',
      ipam: { type: 'host-local', dataDir: d, ranges: [[{ subnet: '10.230.0.0/16' }]] },
    }),
    leftovers: async () => {
      const { readdirSync } = await import('node:fs');
      return readdirSync(join(dir, 'bench')).filter((f) => /^[0-9.]+$/.test(f)).length;
    },
    stop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

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
        return (
          await sequential(calls, p.command, cniEnv('ADD', `pair-${i}-${tag}-%i`), JSON.stringify(p.config(p.dir)))
        ).median;
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
  return { ratios, median: quantile(ratios, 0.5) };
}

/** The CNI environment for container `id` ("%i" in it: the call's index). */
function cniEnv(command: string, id: string): NodeJS.ProcessEnv {
  return {
    PATH: CHILD_PATH,
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: `/var/run/netns/${id}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
}

async function pluginFigures(p: PluginUnderTest): Promise<Record<string, string>> {
  const conf = JSON.stringify(p.config(p.dir));
  const seqAdd = await sequential(SEQ, p.command, cniEnv('ADD', 'seq-%i'), conf);
  const seqDel = await sequential(SEQ, p.command, cniEnv('DEL', 'seq-%i'), conf);
  const burstAdd = await concurrent(BURST, IN_FLIGHT, p.command, cniEnv('ADD', 'burst-%i'), conf);
  const burstDel = await concurrent(BURST, IN_FLIGHT, p.command, cniEnv('DEL', 'burst-%i'), conf);
  const leftovers = await p.leftovers(p.dir);
  return {
    'ADD sequential median ms': seqAdd.median.toFixed(1),
    'ADD sequential p99 ms': seqAdd.p99.toFixed(1),
    'DEL sequential median ms': seqDel.median.toFixed(1),
    [`ADD ${IN_FLIGHT} in flight /s`]: burstAdd.perSecond.toFixed(0),
    [`ADD ${IN_FLIGHT} in flight total ms`]: burstAdd.totalMs.toFixed(0),
    [`DEL ${IN_FLIGHT} in flight /s`]: burstDel.perSecond.toFixed(0),
    // Held twice at once: within each phase every address is held until the phase's DELs (across
    // phases an address released by the DELs may rightly be handed out again).
    'duplicate addresses': String(duplicates(addresses(seqAdd.results)) + duplicates(addresses(burstAdd.results))),
    failures: String(seqAdd.failures + seqDel.failures + burstAdd.failures + burstDel.failures),
    'left after all DELs': String(leftovers),
  };
}

const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}x`;
const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');

async function main(): Promise<void> {
  buildPlugin();
  const binDir = mkdtempSync(join(tmpdir(), 'bench-bin-'));
  // Installed as on a node, but linking this Node rather than copying 120 MB of it.
  install({ cniBinDir: binDir, link: true });
  const forwarder: Command = { exe: join(binDir, INSTALLED.forwarder), args: [] };
  const fallbackDir = join(binDir, INSTALLED.fallbackDir);
  const typescript: Command = { exe: join(fallbackDir, INSTALLED.node), args: [join(fallbackDir, INSTALLED.bundle)] };
  const hostLocal: Command = { exe: HOST_LOCAL, args: [] };
  const env = { PATH: CHILD_PATH };
  console.log(
    `Warren benchmarks, ${new Date().toISOString()}, Node ${process.version}, ${quick ? 'quick' : 'full'} run\n`,
  );

  const node: Command = { exe: process.execPath, args: ['-e', '0'] };
  const floorSeq = await sequential(SEQ, node, env);
  const floorPar = await concurrent(BURST, IN_FLIGHT, node, env);
  const versionOf = (c: Command, extra: NodeJS.ProcessEnv = {}) =>
    sequential(SEQ, c, { ...env, ...extra, CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}');
  // The forwarder asks the agent for VERSION, as for everything: measured with an agent up.
  const versionAgent = await startAgent();
  const versionForwarder = await versionOf(forwarder, { WARREN_SOCKET: versionAgent.socket });
  await versionAgent.stop();
  const versionTypescript = await versionOf(typescript);
  const versionHostLocal = await versionOf(hostLocal);
  console.log('Process floor and cold start (VERSION, median ms)');
  console.log(`  node -e 0 sequential median ms             ${floorSeq.median.toFixed(1)}`);
  console.log(`  node -e 0 ${IN_FLIGHT} at a time /s                  ${floorPar.perSecond.toFixed(0)}`);
  console.log(`  warren (forwarder, agent up)               ${versionForwarder.median.toFixed(2)}`);
  console.log(
    `  warren TypeScript plugin alone             ${versionTypescript.median.toFixed(1)}  (${ratio(versionTypescript.median, floorSeq.median)} node -e 0)`,
  );
  console.log(`  host-local                                 ${versionHostLocal.median.toFixed(2)}\n`);
  console.log(`Peers: host-local is the CNI reference plugin (Go, files + flock, one node only). Measured elsewhere`);
  console.log(`on this kind of machine: whereabouts v0.5.4 on etcd, about 25 ms per sequential ADD and 40-60 ADD/s`);
  console.log(`with 20 in flight, one lock for the whole range (REFERENCE.md); it is not installable here.\n`);

  const etcd = await startEtcd(1);
  const etcdArgs = ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(','), '--etcd-prefix', '/bench/'];
  const plugins = [
    await warrenPlugin('warren', forwarder),
    await warrenPlugin('TS plugin', typescript),
    hostLocalPlugin(),
    await warrenPlugin('warren/etcd', forwarder, etcdArgs),
  ];
  const columns: Array<Record<string, string>> = [];
  for (const p of plugins) {
    columns.push(await pluginFigures(p));
    await p.stop();
  }
  const etcdPairs = await etcdAgainstSqlite(forwarder, etcdArgs);
  await etcd.stop();
  console.log(
    `Through the plugin executable (${SEQ} sequential, ${BURST} with ${IN_FLIGHT} in flight; Warren's agent on SQLite with --sync FULL, or on one etcd member)`,
  );
  console.log(`  ${''.padEnd(34)} ${plugins.map((p) => p.name.padStart(12)).join(' ')}`);
  for (const key of Object.keys(columns[0] ?? {})) {
    console.log(`  ${key.padEnd(34)} ${columns.map((c) => (c[key] ?? '').padStart(12)).join(' ')}`);
  }

  // The agent-down paths: the forwarder hands them to the TypeScript plugin.
  const down = mkdtempSync(join(tmpdir(), 'bench-down-'));
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
  const downForwarder = await downFigures(forwarder);
  const downTypescript = await downFigures(typescript);
  rmSync(down, { recursive: true, force: true });
  console.log(`\nAgent down, median ms                     forwarder    TS plugin`);
  console.log(
    `  DEL (journaled)                          ${downForwarder.del.toFixed(1).padStart(9)} ${downTypescript.del.toFixed(1).padStart(12)}`,
  );
  console.log(
    `  ADD (answers 11)                         ${downForwarder.add.toFixed(1).padStart(9)} ${downTypescript.add.toFixed(1).padStart(12)}`,
  );
  console.log(
    `  STATUS (answers 50)                      ${downForwarder.status.toFixed(1).padStart(9)} ${downTypescript.status.toFixed(1).padStart(12)}`,
  );

  const [w, , h, e] = columns;
  const n = (c: Record<string, string> | undefined, k: string): number => Number(c?.[k]);
  const seqW = n(w, 'ADD sequential median ms');
  const seqH = n(h, 'ADD sequential median ms');
  const burstKey = `ADD ${IN_FLIGHT} in flight /s`;
  console.log('\nFloors (issue 12)');
  console.log(`  ADD sequential median <= 0.6x host-local: ${ratio(seqW, seqH)}  ${verdict(seqW <= 0.6 * seqH)}`);
  console.log(
    `  ADD sequential p99 <= host-local's p99:  ${n(w, 'ADD sequential p99 ms')} vs ${n(h, 'ADD sequential p99 ms')}  ${verdict(n(w, 'ADD sequential p99 ms') <= n(h, 'ADD sequential p99 ms'))}`,
  );
  console.log(
    `  ADD ${IN_FLIGHT} in flight >= 4x host-local:        ${ratio(n(w, burstKey), n(h, burstKey))}  ${verdict(n(w, burstKey) >= 4 * n(h, burstKey))}`,
  );
  console.log(
    `  VERSION <= 0.5x host-local:              ${ratio(versionForwarder.median, versionHostLocal.median)}  ${verdict(versionForwarder.median <= 0.5 * versionHostLocal.median)}`,
  );
  console.log(
    `  etcd sequential ADD <= 2x SQLite:        ${ratio(n(e, 'ADD sequential median ms'), seqW)} in the table; ${etcdPairs.median.toFixed(2)}x the median of ${etcdPairs.ratios.length} alternating pairs (${etcdPairs.ratios.map((r) => r.toFixed(2)).join(', ')})  ${verdict(etcdPairs.median <= 2)}`,
  );
  const downOk =
    downForwarder.del <= downTypescript.del * 1.1 &&
    downForwarder.add <= downTypescript.add * 1.1 &&
    downForwarder.status <= downTypescript.status * 1.1;
  console.log(`  agent-down paths no dearer than the TS plugin alone (within 10%): ${verdict(downOk)}`);
  const thenNow = engineThenNow({ quick, rounds: quick ? 1 : 5 });
  const slowest = Math.min(...thenNow.rows.map((r) => r.better));
  console.log(
    `  engine at least as fast as at ${BASELINE_COMMIT} (worst figure today/then): ${slowest.toFixed(2)}x  ${verdict(slowest >= 1)}\n`,
  );
  console.log(`The engine today beside ${BASELINE_COMMIT} (medians of alternating fresh processes)`);
  printThenNow(thenNow);
  console.log('');

  console.log(
    'In process (engine over SQLite, each figure in a fresh process; last column: what a committed allocation survives)',
  );
  for (const [k, v, d] of await engineFigures(quick)) console.log(`  ${k.padEnd(70)} ${v.padStart(10)}  ${d}`);
  rmSync(binDir, { recursive: true, force: true });
  startFigures();
}

/**
 * Agent start to serving (issue 24's floor: 0.3 s of CPU, 0.5 s of wall time on a quiet machine),
 * as the machine is and with the CPU hog: each in a process of its own (bench/agent-start.ts), the
 * hogged one under scripts/cpu-hog.sh, which stops its busy loops whatever happens.
 */
function startFigures(): void {
  const starts = quick ? '3' : '9';
  const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const run = (hog: boolean): StartSummary & { loadavg: string } => {
    const bench = [process.execPath, 'bench/agent-start.ts', '--starts', starts, '--adds', '--json'];
    const r = spawnSync(
      hog ? 'bash' : (bench[0] as string),
      hog ? ['scripts/cpu-hog.sh', 'run', '8', '--', ...bench] : bench.slice(1),
      { encoding: 'utf8' },
    );
    const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
    if (r.status !== 0 || line === undefined) throw new Error(`bench/agent-start.ts failed (${r.status}): ${r.stderr}`);
    return JSON.parse(line) as StartSummary & { loadavg: string };
  };
  console.log(
    `\nAgent start to serving (bin/warren agent, default flags but metrics on a free port; loadavg before: ${loadavg()})`,
  );
  const idle = run(false);
  console.log(
    `  ${describeStarts('as the machine is', idle)}; loadavg ${idle.loadavg.split(' ').slice(0, 3).join(' ')}`,
  );
  const hogged = run(true);
  console.log(
    `  ${describeStarts('with 8 busy loops', hogged)}; loadavg ${hogged.loadavg.split(' ').slice(0, 3).join(' ')}`,
  );
  const atListen = (x: number | null): string => (x === null || !Number.isFinite(x) ? 'n/a' : x.toFixed(2));
  // The agent serves from the moment it listens; what it did between then and the poll's answer
  // (the warm-up, beside serving) is counted in the second pair, which a loaded machine inflates.
  console.log(
    `  floor, CPU to serving <= 0.3 s: ${atListen(idle.cpuAtListen)} / ${atListen(hogged.cpuAtListen)} s when it listened, ${idle.cpu.toFixed(2)} / ${hogged.cpu.toFixed(2)} s at the first answer  ${verdict([idle.cpuAtListen, hogged.cpuAtListen].every((x) => typeof x === 'number' && x <= 0.3))}`,
  );
  console.log(
    `  floor, wall to serving <= 0.5 s on a quiet machine: ${idle.wall.toFixed(2)} s (loadavg ${idle.loadavg.split(' ')[0]})  ${verdict(idle.wall <= 0.5)}`,
  );
}

if (process.argv.includes('--start-only')) startFigures();
else await main();
