/**
 * CNI plugins under test, called as a container runtime calls them: every call a fresh process,
 * timed by bench/spawn-timer.c (posix_spawn, spawn to exit), one driver run per batch. Each plugin
 * starts from a stated fill level — the allocations it already holds when the first timed call
 * comes — seeded directly, not by calls: Warren's SQLite database written before its agent starts
 * (allocations of the agent's own node, as its own ADDs would have left them), host-local's data
 * directory written as host-local writes it (one file per address holding the container ID and
 * interface, and its last reserved address). Seeding is not measured. host-local's ADD and DEL
 * read every file of its directory, so their cost grows with the fill; Warren's do not.
 */
import { readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseIpamConfig } from '../src/cni/ipam-config.ts';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import { type AgentHandle, type AgentStart, startAgent } from '../test/helpers/agent.ts';
import { CHILD_PATH, removeDir, tempDir } from '../test/helpers/processes.ts';
import { METRICS_ON_FREE_PORT, metricsAddress } from './agents.ts';
import { bulkFill } from './engine.ts';
import { type Load, underLoad } from './machine.ts';
import { type TimedCall, timeCalls } from './spawn-timer.ts';
import { type Tail, median, tail } from './stats.ts';

export const HOST_LOCAL = '/usr/lib/cni/host-local';
export const RANGE = '10.230.0.0/16';
/** The node name test/helpers/agent.ts gives its agents: seeded allocations are theirs. */
const NODE = 'test-node';

/** A real agent with metrics on its own free port (checked), and `args` after. */
export async function benchAgent(options: AgentStart = {}): Promise<AgentHandle> {
  const agent = await startAgent({ ...options, args: [...METRICS_ON_FREE_PORT, ...(options.args ?? [])] });
  try {
    await metricsAddress(agent.socket);
  } catch (error) {
    await agent.stop();
    throw error;
  }
  return agent;
}

/** How a plugin is run: the executable and its arguments. */
export interface Command {
  readonly exe: string;
  readonly args: readonly string[];
}

/** `n` calls of `c`, at most `width` in flight. */
const batch = (c: Command, env: NodeJS.ProcessEnv, stdin: string, n: number, width: number) =>
  timeCalls({ exe: c.exe, args: c.args, env, stdin, n, width });

export interface Sequential {
  readonly median: number;
  /** p99 when the calls support it, else the maximum (with n). */
  readonly tail: Tail;
  readonly failures: number;
  readonly results: TimedCall[];
}

/** `n` calls one after another: median and tail per call. */
export async function sequential(n: number, c: Command, env: NodeJS.ProcessEnv, stdin = ''): Promise<Sequential> {
  const { results } = await batch(c, env, stdin, n, 1);
  const ms = results.map((r) => r.ms);
  return { median: median(ms), tail: tail(ms, 0.99), failures: results.filter((r) => r.code !== 0).length, results };
}

/** `n` calls, `width` in flight: calls per second over the whole batch. */
export async function concurrent(n: number, width: number, c: Command, env: NodeJS.ProcessEnv, stdin = '') {
  const { results, totalMs } = await batch(c, env, stdin, n, width);
  return { perSecond: (n / totalMs) * 1000, totalMs, failures: results.filter((r) => r.code !== 0).length, results };
}

/** The CNI environment for container `id` ("%i" in it: the call's index). */
export function cniEnv(command: string, id: string): NodeJS.ProcessEnv {
  return {
    PATH: CHILD_PATH,
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: `/var/run/netns/${id}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
}

export interface PluginUnderTest {
  readonly name: string;
  readonly command: Command;
  /** Allocations it held before the first timed call. */
  readonly fill: number;
  readonly config: object;
  /** Allocations it holds now, the fill included. */
  held(): Promise<number>;
  stop(): Promise<void>;
}

/** Warren through `command`, on a fresh agent (SQLite, --sync FULL, unless args say otherwise) holding `fill`. */
export async function warrenPlugin(
  name: string,
  command: Command,
  agentArgs: readonly string[] = [],
  fill = 0,
): Promise<PluginUnderTest> {
  const dir = tempDir('bench-agent-');
  if (fill > 0) {
    const store = new SqliteStore({ path: join(dir, 'warren.db') });
    const [range] = parseIpamConfig({ type: 'warren', range: RANGE }).ranges;
    if (range === undefined) throw new Error('no range');
    // The gateway's address (the range's first) stays free, as Warren's own ADDs leave it.
    await bulkFill(store, range.pool, range.first + 1n, fill, 4, NODE, 'bench');
    await store.close();
  }
  const agent: AgentHandle = await benchAgent({ dir, args: agentArgs });
  return {
    name,
    command,
    fill,
    config: { cniVersion: '1.0.0', name: 'bench', ipam: { type: 'warren', socket: agent.socket, range: RANGE } },
    held: async () => (await agent.allocations()).length,
    stop: async () => void (await agent.stop()),
  };
}

/** host-local on a fresh data directory holding `fill` addresses, from 10.230.0.2 on (.1 is its gateway). */
export function hostLocalPlugin(fill = 0): PluginUnderTest {
  const dir = tempDir('bench-hostlocal-');
  const network = join(dir, 'bench');
  mkdirSync(network);
  const ip = (i: number): string => `10.230.${(i + 2) >> 8}.${(i + 2) & 255}`;
  for (let i = 0; i < fill; i++) writeFileSync(join(network, ip(i)), `seed-${i}\r\neth0`);
  // Where its next search starts, as its own ADDs would have left it.
  if (fill > 0) writeFileSync(join(network, 'last_reserved_ip.0'), ip(fill - 1));
  return {
    name: 'host-local',
    command: { exe: HOST_LOCAL, args: [] },
    fill,
    config: {
      cniVersion: '1.0.0',
      name: 'bench',
      ipam: { type: 'host-local', dataDir: dir, ranges: [[{ subnet: RANGE }]] },
    },
    held: async () => readdirSync(network).filter((f) => /^[0-9.]+$/.test(f)).length,
    stop: async () => removeDir(dir),
  };
}

function addresses(results: TimedCall[]): string[] {
  return results.flatMap((r) => {
    try {
      return (JSON.parse(r.stdout).ips as Array<{ address: string }>).map((ip) => ip.address);
    } catch {
      return [];
    }
  });
}

const duplicates = (xs: string[]): number => xs.length - new Set(xs).size;

/** How many calls: sequential ADDs (then as many DELs), and calls in a burst `width` wide. */
export interface Counts {
  readonly sequential: number;
  readonly burst: number;
  readonly width: number;
}

export interface PluginFigures {
  readonly addMedian: number;
  readonly addTail: Tail;
  readonly delMedian: number;
  readonly addPerSecond: number;
  readonly delPerSecond: number;
  readonly duplicates: number;
  readonly failures: number;
  /** Allocations left after all DELs beyond the fill (0 when every DEL released its ADD's). */
  readonly leftover: number;
  /** The load before and after each of its rounds. */
  readonly loads: readonly Load[];
}

/** One round of one plugin: sequential ADDs then their DELs, then a burst of ADDs then its DELs. */
async function round(p: PluginUnderTest, n: Counts, tag: string) {
  const conf = JSON.stringify(p.config);
  const seqAdd = await sequential(n.sequential, p.command, cniEnv('ADD', `${tag}-seq-%i`), conf);
  const seqDel = await sequential(n.sequential, p.command, cniEnv('DEL', `${tag}-seq-%i`), conf);
  const burstAdd = await concurrent(n.burst, n.width, p.command, cniEnv('ADD', `${tag}-burst-%i`), conf);
  const burstDel = await concurrent(n.burst, n.width, p.command, cniEnv('DEL', `${tag}-burst-%i`), conf);
  return { seqAdd, seqDel, burstAdd, burstDel };
}

type Round = Awaited<ReturnType<typeof round>>;

/**
 * The plugins side by side: `rounds` rounds, each running every plugin's share of the calls (the
 * counts split evenly), the order reversed every other round (ABBA), so that the machine's drift —
 * other work starting and stopping on its shared cores — falls on every plugin alike and their
 * ratios hold even when the absolute figures move. Per plugin `counts[i]`.
 */
export async function sideBySide(
  plugins: readonly PluginUnderTest[],
  counts: readonly Counts[],
  rounds: number,
): Promise<PluginFigures[]> {
  const done: Round[][] = plugins.map(() => []);
  const loads: Load[][] = plugins.map(() => []);
  for (let r = 0; r < rounds; r++) {
    const order = plugins.map((_, i) => i);
    if (r % 2 === 1) order.reverse();
    for (const i of order) {
      const n = counts[i] as Counts;
      const share = { ...n, sequential: Math.ceil(n.sequential / rounds), burst: Math.ceil(n.burst / rounds) };
      const { value, load } = await underLoad(() => round(plugins[i] as PluginUnderTest, share, `r${r}`));
      done[i]?.push(value);
      loads[i]?.push(load);
    }
  }
  return Promise.all(
    plugins.map(async (p, i) => {
      const rs = done[i] as Round[];
      const all = <K extends keyof Round>(k: K): Round[K][] => rs.map((x) => x[k]);
      const addMs = all('seqAdd').flatMap((x) => x.results.map((c) => c.ms));
      const delMs = all('seqDel').flatMap((x) => x.results.map((c) => c.ms));
      const rate = (bs: Array<{ totalMs: number; results: TimedCall[] }>): number =>
        (bs.reduce((s, b) => s + b.results.length, 0) / bs.reduce((s, b) => s + b.totalMs, 0)) * 1000;
      return {
        addMedian: median(addMs),
        addTail: tail(addMs, 0.99),
        delMedian: median(delMs),
        addPerSecond: rate(all('burstAdd')),
        delPerSecond: rate(all('burstDel')),
        // Held twice at once: within each phase every address is held until the phase's DELs
        // (across phases an address released by the DELs may rightly be handed out again).
        duplicates: rs.reduce(
          (s, x) => s + duplicates(addresses(x.seqAdd.results)) + duplicates(addresses(x.burstAdd.results)),
          0,
        ),
        failures: rs.reduce(
          (s, x) => s + x.seqAdd.failures + x.seqDel.failures + x.burstAdd.failures + x.burstDel.failures,
          0,
        ),
        leftover: (await p.held()) - p.fill,
        loads: loads[i] as Load[],
      };
    }),
  );
}

/** The figures of several plugins as a table, a column each, with the counts and load beside them. */
export function printPluginTable(
  title: string,
  plugins: readonly PluginUnderTest[],
  figures: readonly PluginFigures[],
  counts: readonly Counts[],
  rounds: number,
): void {
  console.log(`${title}; ${rounds} rounds, the order reversed every other round`);
  const oneMinute = (l: string): number => Number(l.split(' ')[0]);
  const rows: Array<[string, (f: PluginFigures, p: PluginUnderTest, n: Counts) => string]> = [
    ['allocations held at the first call', (_, p) => String(p.fill)],
    ['sequential ADDs (then DELs); in bursts', (_, __, n) => `${n.sequential}; ${n.burst}`],
    ['ADD sequential median ms', (f) => f.addMedian.toFixed(2)],
    ['ADD sequential tail ms', (f) => `${f.addTail.label} ${f.addTail.value.toFixed(1)} n=${f.addTail.n}`],
    ['DEL sequential median ms', (f) => f.delMedian.toFixed(2)],
    [`ADD ${counts[0]?.width} in flight /s`, (f) => f.addPerSecond.toFixed(0)],
    [`DEL ${counts[0]?.width} in flight /s`, (f) => f.delPerSecond.toFixed(0)],
    ['duplicates, failures, left over', (f) => `${f.duplicates}, ${f.failures}, ${f.leftover}`],
    [
      'loadavg 1 min over its rounds',
      (f) => {
        const xs = f.loads.flatMap((l) => [oneMinute(l.before), oneMinute(l.after)]);
        return `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`;
      },
    ],
  ];
  console.log(`  ${''.padEnd(38)} ${plugins.map((p) => p.name.padStart(18)).join(' ')}`);
  for (const [label, cell] of rows) {
    const cells = figures.map((f, i) => cell(f, plugins[i] as PluginUnderTest, counts[i] as Counts).padStart(18));
    console.log(`  ${label.padEnd(38)} ${cells.join(' ')}`);
  }
}
