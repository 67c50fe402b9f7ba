/**
 * The agent's footprint, for the DaemonSet's resource requests: an agent as the DaemonSet runs it
 * (metrics on, the runtime variables the manifest sets: NODE_OPTIONS, glibc's MALLOC_*), its CPU and resident memory idle, then through a pod
 * burst — 200 ADDs through the installed forwarder with 20 in flight, then their 200 DELs — with
 * the CPU it used in the burst (utime + stime of all its threads, /proc/PID/stat), the cores that
 * makes over the burst's wall time, and its peak resident memory (VmHWM); then through a
 * node-reboot herd: 1,000 ADDs at once, 250 pods × 4 networks (Multus' secondary networks, each its
 * own range and interface), every one through the installed forwarder, its peak resident memory
 * measured alone (VmHWM reset through /proc/PID/clear_refs before it), with the calls that failed
 * and the slowest answer; then idle again, the herd's attachments held. Medians over the rounds (peaks: the largest); each round a fresh agent.
 *
 * Beside the agents, Node's own floor: `node -e` idle, its resident memory after the same wait.
 *
 * Resident memory is VmRSS: the anonymous part (RssAnon: the heaps, which only the process frees)
 * and the file-backed part (RssFile: mostly the pages of the Node binary it touched, which the
 * kernel can drop and read again). Both are reported for idle; the peaks are VmHWM, whole.
 *
 * The stores: SQLite (the per-node overlay), and kubernetes as the DaemonSet runs it — the
 * Kubernetes sources on, against the fake API server (test/helpers/fake-kube-api/, each write
 * answered after the ~10 ms a real one takes), its Node object created first.
 *
 * Alone: node bench/footprint.ts [--rounds N] [--idle-seconds S] [--store sqlite|kubernetes|both]
 *        [--kubernetes] [--bare] [--node-options='...'] [--malloc-arena-max=N] [--json]
 * (--kubernetes: the kubernetes store alone, as before; --node-options and --malloc-arena-max: the
 * agent's NODE_OPTIONS and MALLOC_ARENA_MAX instead of the manifest's, '' for none; --bare: none
 * of the manifest's runtime variables, as before issue 36.)
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CHILD_PATH, REPO } from '../test/helpers/processes.ts';
import { cpuSecondsOf, installedForwarder } from './agent-start.ts';
import { residentMiB } from './agents.ts';
import { loadavg, machineLine } from './machine.ts';
import { kubeStoreArgs } from '../test/helpers/kube-store.ts';
import { benchApi } from './kube-large.ts';
import { benchAgent } from './plugins.ts';
import { timeCalls } from './spawn-timer.ts';
import { quantile } from './stats.ts';

const BURST = 200;
const IN_FLIGHT = 20;
/** The herd: this many pods, each with an attachment on every one of HERD_NETWORKS networks. */
const HERD_PODS = 250;
const HERD_NETWORKS = 4;

export type StoreUnderTest = 'sqlite' | 'kubernetes';

export interface Footprint {
  /** Cores used while idle (CPU seconds over the idle wall seconds). */
  readonly idleCores: number;
  readonly idleRssMiB: number;
  /** The anonymous part of idleRssMiB (RssAnon): heaps, not pages of files. */
  readonly idleAnonMiB: number;
  /** CPU seconds the agent used for the 200 ADDs and 200 DELs. */
  readonly burstCpuSeconds: number;
  /** Cores used during the burst (its CPU over its wall time). */
  readonly burstCores: number;
  readonly burstWallSeconds: number;
  /** Peak resident memory from the start through the burst (VmHWM). */
  readonly peakRssMiB: number;
  /** Peak resident memory through the herd alone (VmHWM, reset before it). */
  readonly herdPeakRssMiB: number;
  /** Seconds from the herd's first call to its last answer. */
  readonly herdWallSeconds: number;
  /** The slowest herd call, spawn to exit, ms. */
  readonly herdSlowestMs: number;
  readonly herdFailures: number;
  /** Resident memory idle again after the herd, its 1,000 attachments and 4 more ranges held. */
  readonly afterHerdRssMiB: number;
  readonly failures: number;
}

/** The variables of the runtime (not Warren's settings) the DaemonSet's manifest gives the agent. */
export const RUNTIME_ENV = [
  'NODE_OPTIONS',
  'MALLOC_ARENA_MAX',
  'MALLOC_MMAP_THRESHOLD_',
  'MALLOC_TRIM_THRESHOLD_',
] as const;
export type RuntimeEnv = Partial<Record<(typeof RUNTIME_ENV)[number], string>>;

/** RUNTIME_ENV as the DaemonSet's manifest sets it for the agent (each absent when it sets none). */
export function manifestRuntimeEnv(): RuntimeEnv {
  const manifest = readFileSync(join(REPO, 'deploy', 'base', '10-daemonset.yaml'), 'utf8');
  const env: RuntimeEnv = {};
  for (const name of RUNTIME_ENV) {
    const value = new RegExp(`- name: ${name}\\n\\s+value: "([^"]*)"`).exec(manifest)?.[1];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** VmRSS split as /proc/PID/status states it, MiB. */
function residentParts(pid: number): { anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  return { anon: mib('RssAnon'), file: mib('RssFile') + mib('RssShmem') };
}

/** Starts VmHWM again from the current VmRSS (Linux: "5" to clear_refs). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

const cniEnv = (command: string, id: string, ifname: string) => ({
  PATH: CHILD_PATH,
  CNI_COMMAND: command,
  CNI_CONTAINERID: `${id}-%i`,
  CNI_NETNS: `/var/run/netns/${id}-%i`,
  CNI_IFNAME: ifname,
  CNI_PATH: '/usr/lib/cni',
});

/** The herd: HERD_PODS pods × HERD_NETWORKS networks, every ADD in flight at once. */
export async function herd(forwarder: string, socket: string) {
  const started = performance.now();
  const batches = await Promise.all(
    Array.from({ length: HERD_NETWORKS }, (_, n) =>
      timeCalls({
        exe: forwarder,
        args: [],
        env: cniEnv('ADD', 'herd', `net${n + 1}`),
        stdin: JSON.stringify({
          cniVersion: '1.0.0',
          name: `herd-${n + 1}`,
          ipam: { type: 'warren', socket, range: `10.232.${n * 4}.0/22` },
        }),
        n: HERD_PODS,
        width: HERD_PODS,
      }),
    ),
  );
  const results = batches.flatMap((b) => b.results);
  return {
    wallSeconds: (performance.now() - started) / 1000,
    slowestMs: Math.max(...results.map((r) => r.ms)),
    failures: results.filter((r) => r.code !== 0).length,
  };
}

async function round(
  forwarder: string,
  idleSeconds: number,
  store: StoreUnderTest,
  runtimeEnv: RuntimeEnv,
): Promise<Footprint> {
  const api = store === 'kubernetes' ? await benchApi() : undefined;
  api?.createNode('bench');
  // As the tests start an agent (test/helpers/agent.ts), metrics on; on the DaemonSet's store when asked.
  const agent = await benchAgent({
    ...(api === undefined ? {} : { args: kubeStoreArgs(api, 'bench', [], 'default') }),
    // Each variable unset where not given (or given empty: an empty MALLOC_MMAP_THRESHOLD_ would be 0),
    // so the bench's own environment does not leak into the agent's.
    env: Object.fromEntries(RUNTIME_ENV.map((name) => [name, runtimeEnv[name] || undefined])),
  });
  const { pid, socket } = agent;
  try {
    // Idle: past its start and warm-up, nothing asked of it but what the node's agent does anyway.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const idleFrom = cpuSecondsOf(pid);
    const idleStart = performance.now();
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const idleCores = (cpuSecondsOf(pid) - idleFrom) / ((performance.now() - idleStart) / 1000);
    const idleRssMiB = residentMiB(pid).rss;
    const idleAnonMiB = residentParts(pid).anon;

    const config = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'footprint',
      ipam: { type: 'warren', socket, range: '10.231.0.0/20' },
    });
    const burstFrom = cpuSecondsOf(pid);
    const burstStart = performance.now();
    let failures = 0;
    for (const command of ['ADD', 'DEL']) {
      const { results } = await timeCalls({
        exe: forwarder,
        args: [],
        env: cniEnv(command, 'pod', 'eth0'),
        stdin: config,
        n: BURST,
        width: IN_FLIGHT,
      });
      failures += results.filter((r) => r.code !== 0).length;
    }
    const burstWallSeconds = (performance.now() - burstStart) / 1000;
    const burstCpuSeconds = cpuSecondsOf(pid) - burstFrom;
    const peakRssMiB = residentMiB(pid).peak;

    resetPeak(pid);
    const h = await herd(forwarder, socket);
    const herdPeakRssMiB = residentMiB(pid).peak;
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    return {
      idleCores,
      idleRssMiB,
      idleAnonMiB,
      burstCpuSeconds,
      burstCores: burstCpuSeconds / burstWallSeconds,
      burstWallSeconds,
      peakRssMiB,
      herdPeakRssMiB,
      herdWallSeconds: h.wallSeconds,
      herdSlowestMs: h.slowestMs,
      herdFailures: h.failures,
      afterHerdRssMiB: residentMiB(pid).rss,
      failures,
    };
  } finally {
    await agent.stop();
    await api?.stop();
  }
}

export async function footprint(
  rounds: number,
  idleSeconds: number,
  store: StoreUnderTest = 'sqlite',
  runtimeEnv: RuntimeEnv = manifestRuntimeEnv(),
): Promise<Footprint> {
  const forwarder = installedForwarder();
  const all: Footprint[] = [];
  for (let i = 0; i < rounds; i++) all.push(await round(forwarder, idleSeconds, store, runtimeEnv));
  const median = (f: (x: Footprint) => number) => quantile(all.map(f), 0.5);
  const largest = (f: (x: Footprint) => number) => Math.max(...all.map(f));
  return {
    idleCores: median((f) => f.idleCores),
    idleRssMiB: median((f) => f.idleRssMiB),
    idleAnonMiB: median((f) => f.idleAnonMiB),
    burstCpuSeconds: median((f) => f.burstCpuSeconds),
    burstCores: median((f) => f.burstCores),
    burstWallSeconds: median((f) => f.burstWallSeconds),
    peakRssMiB: largest((f) => f.peakRssMiB),
    herdPeakRssMiB: largest((f) => f.herdPeakRssMiB),
    herdWallSeconds: median((f) => f.herdWallSeconds),
    herdSlowestMs: largest((f) => f.herdSlowestMs),
    herdFailures: all.reduce((n, f) => n + f.herdFailures, 0),
    afterHerdRssMiB: median((f) => f.afterHerdRssMiB),
    failures: all.reduce((n, f) => n + f.failures, 0),
  };
}

/** Node's own floor: `node -e` with nothing to do, its resident memory after `idleSeconds`. */
export async function nodeBaseline(idleSeconds: number): Promise<{ rss: number; anon: number }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', env: {} });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const pid = child.pid as number;
    return { rss: residentMiB(pid).rss, anon: residentParts(pid).anon };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

function describe(store: StoreUnderTest, rounds: number, f: Footprint): string[] {
  const name = store === 'kubernetes' ? 'store kubernetes, Kubernetes sources on (fake API server)' : 'store sqlite';
  return [
    `agent footprint, ${name}, medians of ${rounds} rounds (peaks: the largest):`,
    `  idle                 ${(f.idleCores * 1000).toFixed(1)} mCPU, ${f.idleRssMiB.toFixed(0)} MiB resident ` +
      `(${f.idleAnonMiB.toFixed(0)} MiB anonymous)`,
    `  burst ${BURST} ADD + ${BURST} DEL, ${IN_FLIGHT} in flight: ${f.burstCpuSeconds.toFixed(2)} CPU s over ` +
      `${f.burstWallSeconds.toFixed(2)} s (${(f.burstCores * 1000).toFixed(0)} mCPU), ${f.failures} failed`,
    `  peak resident        ${f.peakRssMiB.toFixed(0)} MiB (start, idle and burst)`,
    `  herd ${HERD_PODS * HERD_NETWORKS} ADDs at once (${HERD_PODS} pods × ${HERD_NETWORKS} networks): ` +
      `${f.herdWallSeconds.toFixed(2)} s, slowest ${f.herdSlowestMs.toFixed(0)} ms, ${f.herdFailures} failed; ` +
      `peak resident ${f.herdPeakRssMiB.toFixed(0)} MiB`,
    `  idle after the herd  ${f.afterHerdRssMiB.toFixed(0)} MiB resident (its attachments and 4 more ranges held)`,
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      'idle-seconds': { type: 'string', default: '20' },
      store: { type: 'string', default: 'both' },
      kubernetes: { type: 'boolean', default: false },
      'node-options': { type: 'string' },
      'malloc-arena-max': { type: 'string' },
      bare: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const rounds = Number(values.rounds);
  const idleSeconds = Number(values['idle-seconds']);
  const runtimeEnv: RuntimeEnv = values.bare ? {} : { ...manifestRuntimeEnv() };
  if (values['node-options'] !== undefined) runtimeEnv.NODE_OPTIONS = values['node-options'];
  if (values['malloc-arena-max'] !== undefined) runtimeEnv.MALLOC_ARENA_MAX = values['malloc-arena-max'];
  const stores: StoreUnderTest[] = values.kubernetes
    ? ['kubernetes']
    : values.store === 'both'
      ? ['sqlite', 'kubernetes']
      : [values.store as StoreUnderTest];
  if (!stores.every((s) => s === 'sqlite' || s === 'kubernetes'))
    throw new Error(`--store is sqlite, kubernetes or both, not ${values.store}`);
  const loadBefore = loadavg();
  const node = await nodeBaseline(idleSeconds);
  const figures: Partial<Record<StoreUnderTest, Footprint>> = {};
  for (const store of stores) figures[store] = await footprint(rounds, idleSeconds, store, runtimeEnv);
  if (values.json) console.log(JSON.stringify({ node, runtimeEnv, ...figures, loadBefore, loadAfter: loadavg() }));
  else {
    console.log(machineLine());
    console.log(`load ${loadBefore} → ${loadavg()}; the agent's runtime environment: ${JSON.stringify(runtimeEnv)}`);
    console.log(
      `node -e idle          ${node.rss.toFixed(0)} MiB resident (${node.anon.toFixed(0)} MiB anonymous): Node's floor`,
    );
    for (const store of stores)
      for (const line of describe(store, rounds, figures[store] as Footprint)) console.log(line);
  }
  process.exit(0);
}
