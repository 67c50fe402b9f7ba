/**
 * Cluster allocation throughput: 1, 2 and 3 agents (three nodes on one machine) sharing one pool on
 * a real 3-member etcd cluster on loopback, fresh key prefix for each run.
 *
 * Each agent takes ADDs over its API socket (the same request the plugin sends), 16 in flight per
 * agent, so the figure is the store path and not process start-up. Two layouts are measured in
 * the same run:
 *   - blocks on (Warren's default with etcd): each node allocates in blocks it claimed;
 *   - one key per range: the whole range in one etcd key, the layout whereabouts uses, so every
 *     node's every ADD contends on that key (whereabouts adds a lock around it; here it is
 *     optimistic). The agent has no flag for it: these agents run bench/one-key-agent.ts.
 * A last row runs ADDs through the plugin executable, 20 in flight over 3 agents, the way the peer
 * figure for whereabouts on etcd (REFERENCE.md: 40-60 ADD/s, one lock for the range) was taken.
 *
 * Usage: node bench/cluster.ts [--quick]
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requestJson } from '../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../test/helpers/agent.ts';
import { cniBinDir } from '../test/helpers/cni.ts';
import { startEtcd } from '../test/helpers/etcd.ts';
import { CHILD_PATH, bounded } from '../test/helpers/processes.ts';

const quick = process.argv.includes('--quick');
/** An agent that keeps each range in one key: no flag of `warren agent` does. */
const ONE_KEY_AGENT = fileURLToPath(new URL('one-key-agent.ts', import.meta.url));
const PER_AGENT = quick ? 150 : 400;
const WIDTH = 16;

interface Run {
  readonly label: string;
  readonly agents: number;
  readonly adds: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly failures: number;
  readonly duplicates: number;
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};

function config(network: string) {
  return { cniVersion: '1.1.0', name: network, ipam: { type: 'warren', range: '10.240.0.0/16' } };
}

async function viaApi(agent: AgentHandle, network: string, id: string): Promise<{ ms: number; address?: string }> {
  const started = performance.now();
  const r = await requestJson({
    socket: agent.socket,
    method: 'POST',
    path: '/v1/cni',
    body: { command: 'ADD', containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config: config(network) },
    timeoutMs: 60_000,
  });
  const ms = performance.now() - started;
  const body = r.body as { kind?: string; output?: { ips?: Array<{ address: string }> } };
  const address = body.kind === 'result' ? body.output?.ips?.[0]?.address : undefined;
  return address === undefined ? { ms } : { ms, address };
}

function viaPlugin(agent: AgentHandle, network: string, id: string): Promise<{ ms: number; address?: string }> {
  const started = performance.now();
  const conf = { ...config(network), ipam: { ...config(network).ipam, socket: agent.socket } };
  return new Promise((resolve, reject) => {
    const child = spawn(join(cniBinDir(), 'warren'), [], {
      env: {
        PATH: CHILD_PATH,
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: id,
        CNI_NETNS: `/var/run/netns/${id}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: cniBinDir(),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.stdin.end(JSON.stringify(conf));
    child.on('close', (code) => {
      const ms = performance.now() - started;
      if (code !== 0) return resolve({ ms });
      const address = (JSON.parse(out) as { ips?: Array<{ address: string }> }).ips?.[0]?.address;
      resolve(address === undefined ? { ms } : { ms, address });
    });
  });
}

async function measure(
  label: string,
  endpoints: readonly string[],
  prefix: string,
  count: number,
  blocks: boolean,
  path: 'api' | 'plugin',
  perAgent: number,
  width: number,
): Promise<Run> {
  const agents: AgentHandle[] = [];
  try {
    for (let i = 1; i <= count; i++) {
      agents.push(
        await startAgent({
          args: ['--node-name', `bench-${i}`, '--store', 'etcd', '--etcd-endpoints', endpoints.join(',')].concat([
            '--etcd-prefix',
            prefix,
            '--log-level',
            'warn',
          ]),
          ...(blocks ? {} : { entry: [ONE_KEY_AGENT] }),
        }),
      );
    }
    const network = 'bench';
    const call = path === 'api' ? viaApi : viaPlugin;
    // One ADD per agent first, so a node's first block claim is not in the timing.
    await Promise.all(agents.map((a, i) => call(a, network, `warm-${i}`)));
    const jobs = Array.from(
      { length: perAgent * count },
      (_, i) => () => call(agents[i % count] as AgentHandle, network, `c-${i}`),
    );
    const started = performance.now();
    const results = await bounded(width, jobs);
    const seconds = (performance.now() - started) / 1000;
    const addresses = results.flatMap((r) => (r.address === undefined ? [] : [r.address]));
    return {
      label,
      agents: count,
      adds: jobs.length,
      perSecond: jobs.length / seconds,
      p50: quantile(
        results.map((r) => r.ms),
        0.5,
      ),
      p99: quantile(
        results.map((r) => r.ms),
        0.99,
      ),
      failures: results.length - addresses.length,
      duplicates: addresses.length - new Set(addresses).size,
    };
  } finally {
    for (const a of agents) await a.kill();
  }
}

async function main(): Promise<void> {
  const etcd = await startEtcd(3);
  const runs: Run[] = [];
  let serial = 0;
  try {
    for (const blocks of [true, false]) {
      for (const count of [1, 2, 3]) {
        serial += 1;
        runs.push(
          await measure(
            blocks ? 'blocks (Warren)' : 'one key per range',
            etcd.endpoints,
            `/bench-${serial}/`,
            count,
            blocks,
            'api',
            PER_AGENT,
            WIDTH * count,
          ),
        );
      }
    }
    serial += 1;
    runs.push(
      await measure(
        'blocks, via plugin, 20 in flight',
        etcd.endpoints,
        `/bench-${serial}/`,
        3,
        true,
        'plugin',
        quick ? 40 : 100,
        20,
      ),
    );
  } finally {
    await etcd.stop();
  }
  const rows = [
    ['layout', 'agents', 'ADDs', 'ADD/s', 'p50 ms', 'p99 ms', 'failed', 'duplicates'],
    ...runs.map((r) => [
      r.label,
      String(r.agents),
      String(r.adds),
      r.perSecond.toFixed(0),
      r.p50.toFixed(1),
      r.p99.toFixed(1),
      String(r.failures),
      String(r.duplicates),
    ]),
    ['whereabouts v0.5.4 on etcd (REFERENCE.md)', '-', '-', '40-60', '~25 seq', '-', '-', 'retried ADD: 2nd address'],
  ];
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((row) => (row[c] ?? '').length))) ?? [];
  for (const row of rows) console.log(row.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  '));
  console.log(
    `\n3-member etcd on loopback, ${PER_AGENT} ADDs per agent over the API with ${WIDTH} in flight per agent; node ${process.version}; ${new Date().toISOString()}`,
  );
}

await main();
