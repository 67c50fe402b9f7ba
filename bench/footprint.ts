/**
 * The agent's footprint, for the DaemonSet's resource requests: an agent as the DaemonSet runs it
 * (metrics on), its CPU and resident memory idle, then through a pod burst — 200 ADDs through the
 * installed forwarder with 20 in flight, then their 200 DELs — with the CPU it used in the burst
 * (utime + stime of all its threads, /proc/PID/stat), the cores that makes over the burst's wall
 * time, and its peak resident memory (VmHWM). Medians over the rounds; each round a fresh agent.
 *
 * With --kubernetes the agent runs as the DaemonSet's does: store kubernetes, the Kubernetes
 * sources on, against the fake API server (test/helpers/fake-kube-api/, each write answered after
 * the ~10 ms a real one takes), its Node object created first.
 *
 * Alone: node bench/footprint.ts [--rounds N] [--idle-seconds S] [--kubernetes] [--json]
 */
import { parseArgs } from 'node:util';
import { CHILD_PATH } from '../test/helpers/processes.ts';
import { cpuSecondsOf, installedForwarder } from './agent-start.ts';
import { residentMiB } from './agents.ts';
import { machineLine } from './machine.ts';
import { kubeStoreArgs } from '../test/helpers/kube-store.ts';
import { benchApi } from './kube-large.ts';
import { benchAgent } from './plugins.ts';
import { timeCalls } from './spawn-timer.ts';
import { quantile } from './stats.ts';

const BURST = 200;
const IN_FLIGHT = 20;

export interface Footprint {
  /** Cores used while idle (CPU seconds over the idle wall seconds). */
  readonly idleCores: number;
  readonly idleRssMiB: number;
  /** CPU seconds the agent used for the 200 ADDs and 200 DELs. */
  readonly burstCpuSeconds: number;
  /** Cores used during the burst (its CPU over its wall time). */
  readonly burstCores: number;
  readonly burstWallSeconds: number;
  /** Peak resident memory over the whole round (VmHWM). */
  readonly peakRssMiB: number;
  readonly failures: number;
}

async function round(forwarder: string, idleSeconds: number, kubernetes: boolean): Promise<Footprint> {
  const api = kubernetes ? await benchApi() : undefined;
  api?.createNode('bench');
  // As the tests start an agent (test/helpers/agent.ts), metrics on; on the DaemonSet's store when asked.
  const agent = await benchAgent(api === undefined ? {} : { args: kubeStoreArgs(api, 'bench', [], 'default') });
  const { pid, socket } = agent;
  try {
    // Idle: past its start and warm-up, nothing asked of it but what the node's agent does anyway.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const idleFrom = cpuSecondsOf(pid);
    const idleStart = performance.now();
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const idleCores = (cpuSecondsOf(pid) - idleFrom) / ((performance.now() - idleStart) / 1000);
    const idleRssMiB = residentMiB(pid).rss;

    const config = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'footprint',
      ipam: { type: 'warren', socket, range: '10.231.0.0/20' },
    });
    const env = (command: string) => ({
      PATH: CHILD_PATH,
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'pod-%i',
      CNI_NETNS: '/var/run/netns/pod-%i',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    });
    const burstFrom = cpuSecondsOf(pid);
    const burstStart = performance.now();
    let failures = 0;
    for (const command of ['ADD', 'DEL']) {
      const { results } = await timeCalls({
        exe: forwarder,
        args: [],
        env: env(command),
        stdin: config,
        n: BURST,
        width: IN_FLIGHT,
      });
      failures += results.filter((r) => r.code !== 0).length;
    }
    const burstWallSeconds = (performance.now() - burstStart) / 1000;
    const burstCpuSeconds = cpuSecondsOf(pid) - burstFrom;
    return {
      idleCores,
      idleRssMiB,
      burstCpuSeconds,
      burstCores: burstCpuSeconds / burstWallSeconds,
      burstWallSeconds,
      peakRssMiB: residentMiB(pid).peak,
      failures,
    };
  } finally {
    await agent.stop();
    await api?.stop();
  }
}

export async function footprint(rounds: number, idleSeconds: number, kubernetes = false): Promise<Footprint> {
  const forwarder = installedForwarder();
  const all: Footprint[] = [];
  for (let i = 0; i < rounds; i++) all.push(await round(forwarder, idleSeconds, kubernetes));
  const median = (f: (x: Footprint) => number) => quantile(all.map(f), 0.5);
  return {
    idleCores: median((f) => f.idleCores),
    idleRssMiB: median((f) => f.idleRssMiB),
    burstCpuSeconds: median((f) => f.burstCpuSeconds),
    burstCores: median((f) => f.burstCores),
    burstWallSeconds: median((f) => f.burstWallSeconds),
    peakRssMiB: Math.max(...all.map((f) => f.peakRssMiB)),
    failures: all.reduce((n, f) => n + f.failures, 0),
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      'idle-seconds': { type: 'string', default: '20' },
      kubernetes: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const rounds = Number(values.rounds);
  const f = await footprint(rounds, Number(values['idle-seconds']), values.kubernetes);
  if (values.json) console.log(JSON.stringify(f));
  else {
    console.log(machineLine());
    const store = values.kubernetes ? 'store kubernetes, Kubernetes sources on (fake API server)' : 'store sqlite';
    console.log(`agent footprint, ${store}, medians of ${rounds} rounds (peak: the largest):`);
    console.log(
      `  idle                 ${(f.idleCores * 1000).toFixed(1)} mCPU, ${f.idleRssMiB.toFixed(0)} MiB resident`,
    );
    console.log(
      `  burst ${BURST} ADD + ${BURST} DEL, ${IN_FLIGHT} in flight: ${f.burstCpuSeconds.toFixed(2)} CPU s over ` +
        `${f.burstWallSeconds.toFixed(2)} s (${(f.burstCores * 1000).toFixed(0)} mCPU), ${f.failures} failed`,
    );
    console.log(`  peak resident        ${f.peakRssMiB.toFixed(0)} MiB`);
  }
  process.exit(0);
}
