/**
 * Cluster allocation throughput: 1, 2 and 3 agents (three nodes on one machine) sharing one pool on
 * a real 3-member etcd cluster on loopback, fresh key prefix for each run. Like is compared with
 * like, in two tables that say how the calls reach the allocator:
 *
 * Over each agent's API (the request the plugin sends, without the process start), 16 in flight
 * per agent, so the figure is the store path. Two layouts of the same Warren, in the same run:
 *   - blocks on (Warren's default with etcd): each node allocates in blocks it claimed;
 *   - one key per range: the whole range in one etcd key, the layout whereabouts uses, so every
 *     node's every ADD contends on that key (whereabouts adds a lock around it; here it is
 *     optimistic). The agent has no flag for it: these agents run bench/one-key-agent.ts.
 *
 * Through the CNI plugin (a fresh process per call, timed by bench/spawn-timer.c as in
 * bench/run.ts), the way the only peer figure for a cluster IPAM was taken (whereabouts v0.5.4
 * on etcd through its own plugin, REFERENCE.md: ~25 ms per sequential ADD, 40-60 ADD/s with 20 in
 * flight; not installable here, so not measured in this run, and printed apart as such):
 *   - sequential ADDs through the forwarder to one agent;
 *   - 20 in flight over 3 agents (7, 7 and 6 in flight to each).
 *
 * Every agent serves metrics on a free port of its own (checked). Tail percentiles are quoted only
 * where the calls support them (bench/stats.ts), with n; each row states the load before → after.
 * Usage: node bench/cluster.ts [--quick]
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requestJson } from '../src/core/unix-http.ts';
import type { AgentHandle } from '../test/helpers/agent.ts';
import { cniBinDir } from '../test/helpers/cni.ts';
import { startEtcd } from '../test/helpers/etcd.ts';
import { CHILD_PATH, bounded } from '../test/helpers/processes.ts';
import { type Load, loadavg, machineLine, underLoad } from './machine.ts';
import { benchAgent } from './plugins.ts';
import { timeCalls } from './spawn-timer.ts';
import { type Tail, median, tail } from './stats.ts';

/** An agent that keeps each range in one key: no flag of `warren agent` does. */
const ONE_KEY_AGENT = fileURLToPath(new URL('one-key-agent.ts', import.meta.url));

const quick = process.argv.includes('--quick');
/** 1,000 ADDs per agent, so even one agent's p99 stands on 10 calls beyond it. */
const PER_AGENT = quick ? 150 : 1_000;
const WIDTH = 16;
const PLUGIN_SEQUENTIAL = quick ? 30 : 200;
const PLUGIN_PER_AGENT = quick ? 40 : 100;
const RANGE = '10.240.0.0/16';

interface Row {
  readonly label: string;
  readonly agents: number;
  readonly adds: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p90: Tail;
  readonly p99: Tail;
  readonly failures: number;
  readonly duplicates: number;
  readonly load: Load;
}

function config(socket?: string) {
  return {
    cniVersion: '1.1.0',
    name: 'bench',
    ipam: { type: 'warren', range: RANGE, ...(socket === undefined ? {} : { socket }) },
  };
}

async function viaApi(agent: AgentHandle, id: string): Promise<{ ms: number; address?: string }> {
  const started = performance.now();
  const r = await requestJson({
    socket: agent.socket,
    method: 'POST',
    path: '/v1/cni',
    body: { command: 'ADD', containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config: config() },
    timeoutMs: 60_000,
  });
  const ms = performance.now() - started;
  const body = r.body as { kind?: string; output?: { ips?: Array<{ address: string }> } };
  const address = body.kind === 'result' ? body.output?.ips?.[0]?.address : undefined;
  return address === undefined ? { ms } : { ms, address };
}

/** `n` ADDs through the installed forwarder to `agent`, `width` in flight, container IDs `tag-%i`. */
async function viaPlugin(
  agent: AgentHandle,
  tag: string,
  n: number,
  width: number,
): Promise<Array<{ ms: number; address?: string }>> {
  const env = {
    PATH: CHILD_PATH,
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: `${tag}-%i`,
    CNI_NETNS: `/var/run/netns/${tag}-%i`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniBinDir(),
  };
  const { results } = await timeCalls({
    exe: join(cniBinDir(), 'warren'),
    args: [],
    env,
    stdin: JSON.stringify(config(agent.socket)),
    n,
    width,
  });
  return results.map((r) => {
    if (r.code !== 0) return { ms: r.ms };
    const address = (JSON.parse(r.stdout) as { ips?: Array<{ address: string }> }).ips?.[0]?.address;
    return address === undefined ? { ms: r.ms } : { ms: r.ms, address };
  });
}

async function withAgents<T>(
  endpoints: readonly string[],
  prefix: string,
  count: number,
  blocks: boolean,
  measure: (agents: AgentHandle[]) => Promise<T>,
): Promise<T> {
  const agents: AgentHandle[] = [];
  try {
    for (let i = 1; i <= count; i++) {
      const args = [
        '--node-name',
        `bench-${i}`,
        '--store',
        'etcd',
        '--etcd-endpoints',
        endpoints.join(','),
        '--etcd-prefix',
        prefix,
        '--log-level',
        'warn',
      ];
      agents.push(await benchAgent({ args, ...(blocks ? {} : { entry: [ONE_KEY_AGENT] }) }));
    }
    // One ADD per agent first, so a node's first block claim is not in the timing.
    await Promise.all(agents.map((a, i) => viaApi(a, `warm-${i}`)));
    return await measure(agents);
  } finally {
    for (const a of agents) await a.kill();
  }
}

function row(
  label: string,
  agents: number,
  results: ReadonlyArray<{ ms: number; address?: string }>,
  seconds: number,
  load: Load,
): Row {
  const ms = results.map((r) => r.ms);
  const addresses = results.flatMap((r) => (r.address === undefined ? [] : [r.address]));
  return {
    label,
    agents,
    adds: results.length,
    perSecond: results.length / seconds,
    p50: median(ms),
    p90: tail(ms, 0.9),
    p99: tail(ms, 0.99),
    failures: results.length - addresses.length,
    duplicates: addresses.length - new Set(addresses).size,
    load,
  };
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number; load: Load }> {
  const { value, load } = await underLoad(async () => {
    const started = performance.now();
    const value = await run();
    return { value, seconds: (performance.now() - started) / 1000 };
  });
  return { value: value.value, seconds: value.seconds, load };
}

function print(title: string, rows: readonly Row[], extra: ReadonlyArray<readonly string[]> = []): void {
  console.log(`\n${title}`);
  const tailCell = (t: Tail): string => `${t.label} ${t.value.toFixed(1)} (n=${t.n})`;
  const table = [
    [
      'layout',
      'agents',
      'ADDs',
      'ADD/s',
      'p50 ms',
      'p90 ms',
      'p99 ms (or max)',
      'failed',
      'duplicates',
      'loadavg 1 min',
    ],
    ...rows.map((r) => [
      r.label,
      String(r.agents),
      String(r.adds),
      r.perSecond.toFixed(0),
      r.p50.toFixed(1),
      tailCell(r.p90),
      tailCell(r.p99),
      String(r.failures),
      String(r.duplicates),
      `${r.load.before.split(' ')[0]} → ${r.load.after.split(' ')[0]}`,
    ]),
    ...extra,
  ];
  const widths = table[0]?.map((_, c) => Math.max(...table.map((r) => (r[c] ?? '').length))) ?? [];
  const line = (r: readonly string[]): string => `| ${r.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join(' | ')} |`;
  // A Markdown table: the header, its rule, the rows.
  const [header, ...body] = table;
  console.log(line(header ?? []));
  console.log(line(widths.map((w) => '-'.repeat(w))));
  for (const r of body) console.log(line(r));
}

async function main(): Promise<void> {
  console.log(`Cluster allocation on a 3-member etcd on loopback. ${machineLine()}; load at start ${loadavg()}`);
  cniBinDir(); // builds and installs the plugin once, before any timing
  const etcd = await startEtcd(3);
  const api: Row[] = [];
  const plugin: Row[] = [];
  let serial = 0;
  const prefix = (): string => `/bench-${++serial}/`;
  try {
    for (const blocks of [true, false]) {
      for (const count of [1, 2, 3]) {
        const label = blocks ? 'blocks (Warren default)' : 'one key per range';
        const r = await withAgents(etcd.endpoints, prefix(), count, blocks, (agents) =>
          timed(() =>
            bounded(
              WIDTH * count,
              Array.from(
                { length: PER_AGENT * count },
                (_, i) => () => viaApi(agents[i % count] as AgentHandle, `c-${i}`),
              ),
            ),
          ),
        );
        api.push(row(label, count, r.value, r.seconds, r.load));
      }
    }
    const seq = await withAgents(etcd.endpoints, prefix(), 1, true, ([a]) =>
      timed(() => viaPlugin(a as AgentHandle, 'seq', PLUGIN_SEQUENTIAL, 1)),
    );
    plugin.push(row('blocks, sequential', 1, seq.value, seq.seconds, seq.load));
    const burst = await withAgents(etcd.endpoints, prefix(), 3, true, (agents) =>
      timed(async () =>
        (await Promise.all(agents.map((a, i) => viaPlugin(a, `burst-${i}`, PLUGIN_PER_AGENT, i < 2 ? 7 : 6)))).flat(),
      ),
    );
    plugin.push(row('blocks, 20 in flight', 3, burst.value, burst.seconds, burst.load));
  } finally {
    await etcd.stop();
  }
  print(`Over each agent's API (no process start), ${PER_AGENT} ADDs per agent, ${WIDTH} in flight per agent`, api);
  print('Through the CNI plugin (the installed forwarder, a process per call, timed by bench/spawn-timer.c)', plugin);
  console.log('\nNot measured in this run (REFERENCE.md, earlier, on this kind of machine, through its own plugin):');
  console.log(
    '  whereabouts v0.5.4 on etcd: ~25 ms per sequential ADD, 40-60 ADD/s with 20 in flight; one lock for the',
  );
  console.log('  range; a retried ADD of the same container gets a second address.');
  const seqMs = plugin[0]?.p50 ?? Number.NaN;
  console.log(
    `Warren through its plugin, same shapes, this run: ${seqMs.toFixed(1)} ms per sequential ADD, ` +
      `${(plugin[1]?.perSecond ?? Number.NaN).toFixed(0)} ADD/s with 20 in flight over 3 agents`,
  );
  console.log(`Load at end ${loadavg()}`);
}

await main();
