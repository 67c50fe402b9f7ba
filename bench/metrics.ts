/**
 * What Prometheus metrics cost the agent's ADD, in one run on one machine (issue 16's floor: ADD
 * with metrics on within 5% of metrics off):
 *   - in process: CniService + Allocator over a SQLite file store (synchronous FULL, the agent's
 *     default), wired exactly as Agent.start() wires them — metrics on: AgentMetrics (process
 *     metrics too), the store wrapped in MeasuredStore, telemetry fanOut(history, metrics);
 *     metrics off: the store as opened, telemetry fanOut(history, NO_TELEMETRY). N ADDs then N
 *     DELs per round, on a fresh database each, in two designs:
 *       separate: each round a fresh child process with metrics on or off, rounds alternating
 *         ABBA so that drift hits both alike; it counts what metrics cost the whole process
 *         (the event-loop monitor, garbage), but process-to-process variation on a small VM is
 *         often larger than the difference, so the spread of the rounds is printed beside it;
 *       paired: each round a fresh child process holding both wirings, each on its own
 *         database, calls alternating between them one by one, so both meet the same
 *         conditions at the same instant; the per-call cost, precise to a few percent;
 *     each figure is the median over rounds of each round's median call;
 *   - over the socket: two real agents (bin/warren agent), one serving metrics on 127.0.0.1:0,
 *     one with an empty --metrics-address; ADDs through ApiClient.cni one at a time, alternating
 *     between the agents call by call; several pairs of fresh agents, since one agent process
 *     can run faster than another for its whole life; median and p99 (n with it) of the ADDs, and each
 *     agent's CPU time per ADD (all its threads, /proc/<pid>/task/<tid>/schedstat);
 *   - a scrape: the exposition of an agent holding 10 pools and 10,000 allocations, in process
 *     (AgentMetrics.exposition alone, its readings as the agent's: the pool summaries and this
 *     node's allocations) and over HTTP from a real agent (GET /metrics).
 * Process metrics are on in the metrics-on child as in the agent; each child is a fresh process
 * because collectDefaultMetrics starts an event-loop-delay monitor that outlives its registry.
 * The real agents are spawned from bin/warren: build first (node scripts/build.ts).
 * Usage: node bench/metrics.ts [--quick]   (no npm script of its own; bench/run.ts can call
 *        metricsFigures(quick) and printMetricsFigures)
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/core/clock.ts';
import { parseIpamConfig } from '../src/cni/ipam-config.ts';
import { Allocator } from '../src/allocator/allocator.ts';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import type { Store } from '../src/store/store.ts';
import { ApiClient } from '../src/api/client.ts';
import { CniService } from '../src/agent/server/cni-service.ts';
import { MeasuredStore } from '../src/agent/metrics/measured-store.ts';
import { AgentMetrics } from '../src/agent/metrics/prometheus.ts';
import { ReleaseHistory } from '../src/agent/metrics/release-history.ts';
import { NO_TELEMETRY, fanOut } from '../src/agent/metrics/telemetry.ts';
import { type AgentHandle, startAgent } from '../test/helpers/agent.ts';
import { removeDir, tempDir } from '../test/helpers/processes.ts';
import { type Load, cpuModel, describeLoad, machineLine, underLoad } from './machine.ts';
import { type Tail, describeTail, median, tail } from './stats.ts';

const SELF = fileURLToPath(import.meta.url);
/** The node name startAgent gives its agents: seeded allocations must be theirs. */
const NODE = 'test-node';
/** The floor: metrics on costs at most this much more than metrics off. */
const FLOOR = 1.05;
const SCRAPE_POOLS = 10;
const SCRAPE_ALLOCATIONS = 10_000;

type Job =
  | { readonly kind: 'separate'; readonly metrics: boolean; readonly n: number }
  | { readonly kind: 'paired'; readonly n: number }
  | { readonly kind: 'scrape'; readonly scrapes: number };

/** One in-process round of one wiring: per-call microseconds. */
export interface RoundResult {
  readonly addMedianUs: number;
  readonly addMeanUs: number;
  readonly delMedianUs: number;
}

/** One design's rounds, summed up: medians over rounds, and the ADD ratio on / off. */
export interface InProcessFigures {
  readonly rounds: number;
  readonly on: RoundResult;
  readonly off: RoundResult;
  readonly ratio: number;
  /** Lowest and highest round median ADD, µs, of each setting: the noise between rounds. */
  readonly spread: { readonly on: readonly [number, number]; readonly off: readonly [number, number] };
}

export interface Timing {
  readonly median: number;
  /** p99 where the calls support it, else their maximum (bench/stats.ts), with n. */
  readonly p99: Tail;
}

export interface MetricsFigures {
  readonly cpu: string;
  /** The load average before → after each part: in process, over the socket, the scrapes. */
  readonly load: { readonly inProcess: Load; readonly socket: Load; readonly scrape: Load };
  readonly cores: number;
  readonly quick: boolean;
  /** In process, N ADDs then N DELs per round. */
  readonly inProcess: { readonly n: number; readonly separate: InProcessFigures; readonly paired: InProcessFigures };
  /** Over the socket: median over rounds of each round's median, p99 of all calls, median of the rounds' ratios. */
  readonly socket: {
    readonly n: number;
    readonly rounds: number;
    readonly on: Timing;
    readonly off: Timing;
    readonly ratio: number;
    /** The lowest and highest of the pairs' ratios: the noise between agent processes. */
    readonly ratioSpread: readonly [number, number];
    /** The agent's CPU time per ADD (all its threads), µs: median over pairs, and the median of the pairs' ratios. */
    readonly cpuUs: { readonly on: number; readonly off: number; readonly ratio: number } | undefined;
  };
  readonly scrape: {
    readonly pools: number;
    readonly allocations: number;
    /** AgentMetrics.exposition() in process, median ms. */
    readonly inProcessMs: number;
    /** GET /metrics from a real agent, ms. */
    readonly http: Timing;
    readonly bytes: number;
    readonly lines: number;
  };
  /** The per-call ADD ratios (paired in process, and over the socket) within the floor. */
  readonly floorMet: boolean;
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

const netConf = (network: string, range: string) => ({
  cniVersion: '1.1.0',
  name: network,
  ipam: { type: 'warren', range },
});

/** The CNI service over `path` as Agent.start() wires it, with metrics on or off. */
function wire(
  path: string,
  metricsOn: boolean,
): { service: CniService; metrics: AgentMetrics | undefined; close: () => Promise<void> } {
  const opened = new SqliteStore({ path, synchronous: 'FULL', clock: systemClock });
  const history = new ReleaseHistory(systemClock);
  const metrics = metricsOn
    ? new AgentMetrics({
        version: 'bench',
        readings: {
          pools: async () => figuresOf(opened),
          journal: () => ({ pending: 0, setAside: 0 }),
          queueDepth: () => ({}),
          ready: async () => true,
        },
      })
    : undefined;
  const telemetry = fanOut(history, metrics ?? NO_TELEMETRY);
  const store = metrics === undefined ? opened : new MeasuredStore(opened, telemetry);
  const allocator = new Allocator({ store, clock: systemClock, node: NODE });
  const service = new CniService({
    allocator,
    readiness: async () => undefined,
    storeKind: 'sqlite',
    clock: systemClock,
    telemetry,
  });
  return { service, metrics, close: () => opened.close() };
}

/**
 * The readings a scrape makes on a SQLite agent: the pool summaries. An agent lists its node's
 * allocations only on a clustered store (to tell borrowed blocks apart; src/agent/agent.ts), so
 * neither does this one.
 */
async function figuresOf(store: Store) {
  const pools = await store.ledgers();
  return pools.map((p) => ({
    pool: p.ledger,
    allocated: p.allocated,
    resting: p.resting,
    ...(p.description === undefined ? {} : { capacity: Number(p.description.capacity) }),
  }));
}

/** Timed calls of `call(i)` for i in [0, n), microseconds each. */
async function timed(n: number, call: (i: number) => Promise<unknown>): Promise<number[]> {
  const us: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await call(i);
    us.push((performance.now() - t) * 1000);
  }
  return us;
}

async function expect(outcome: Promise<{ kind: string }>, kind: string): Promise<void> {
  const o = await outcome;
  if (o.kind !== kind) throw new Error(`expected ${kind}, got ${JSON.stringify(o)}`);
}

type Wired = ReturnType<typeof wire>;
type CniCall = (command: 'ADD' | 'DEL', id: string, range: string) => Promise<void>;

/** One wiring's calls, each checked: ADD gives a result, DEL nothing. */
function caller(service: CniService): CniCall {
  return (command, id, range) =>
    expect(
      service.handle({
        command,
        containerID: id,
        netns: `/var/run/netns/${id}`,
        ifname: 'eth0',
        config: netConf('bench', range),
      }),
      command === 'ADD' ? 'result' : 'silent',
    );
}

/** Warms the JIT and the pool cache on a range of its own, outside the timed figures. */
async function warm(call: CniCall): Promise<void> {
  for (let i = 0; i < 200; i++) await call('ADD', `warm-${i}`, '10.99.0.0/16');
  for (let i = 0; i < 200; i++) await call('DEL', `warm-${i}`, '10.99.0.0/16');
}

const roundOf = (adds: number[], dels: number[]): RoundResult => ({
  addMedianUs: median(adds),
  addMeanUs: mean(adds),
  delMedianUs: median(dels),
});

async function child(job: Job): Promise<RoundResult | { on: RoundResult; off: RoundResult } | { inProcessMs: number }> {
  const dir = tempDir('bench-metrics-');
  const opened: Wired[] = [];
  try {
    switch (job.kind) {
      case 'separate': {
        const wired = wire(join(dir, 'warren.db'), job.metrics);
        opened.push(wired);
        const call = caller(wired.service);
        await warm(call);
        const adds = await timed(job.n, (i) => call('ADD', `c-${i}`, '10.64.0.0/14'));
        const dels = await timed(job.n, (i) => call('DEL', `c-${i}`, '10.64.0.0/14'));
        return roundOf(adds, dels);
      }
      case 'paired': {
        const on = wire(join(dir, 'on.db'), true);
        const off = wire(join(dir, 'off.db'), false);
        opened.push(on, off);
        const calls = { on: caller(on.service), off: caller(off.service) };
        await warm(calls.on);
        await warm(calls.off);
        const us = {
          on: { ADD: [] as number[], DEL: [] as number[] },
          off: { ADD: [] as number[], DEL: [] as number[] },
        };
        for (const command of ['ADD', 'DEL'] as const) {
          for (let i = 0; i < job.n; i++) {
            // Who goes first alternates too: neither always follows the other's commit.
            for (const which of i % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
              const t = performance.now();
              await calls[which](command, `c-${i}`, '10.64.0.0/14');
              us[which][command].push((performance.now() - t) * 1000);
            }
          }
        }
        return { on: roundOf(us.on.ADD, us.on.DEL), off: roundOf(us.off.ADD, us.off.DEL) };
      }
      case 'scrape': {
        const path = join(dir, 'warren.db');
        await seed(path);
        const wired = wire(path, true);
        opened.push(wired);
        const metrics = wired.metrics as AgentMetrics;
        for (let i = 0; i < 3; i++) await metrics.exposition();
        const ms = (await timed(job.scrapes, () => metrics.exposition())).map((us) => us / 1000);
        return { inProcessMs: median(ms) };
      }
      default:
        return job satisfies never;
    }
  } finally {
    for (const w of opened) await w.close();
  }
}

/** 10 pools (/22 each) holding 1,000 allocations each, of node `NODE`, described as the allocator describes them. */
async function seed(path: string): Promise<void> {
  const store = new SqliteStore({ path, synchronous: 'NORMAL', clock: systemClock });
  try {
    const allocator = new Allocator({ store, clock: systemClock, node: NODE });
    const perPool = SCRAPE_ALLOCATIONS / SCRAPE_POOLS;
    for (let p = 0; p < SCRAPE_POOLS; p++) {
      const network = `net-${p}`;
      const ranges = parseIpamConfig({ type: 'warren', range: `10.20.${p * 4}.0/22` }).ranges;
      for (let i = 0; i < perPool; i++)
        await allocator.allocate({ owner: { network, containerID: `s-${p}-${i}`, ifname: 'eth0' }, ranges });
    }
  } finally {
    await store.close();
  }
}

function runChild(job: Job): Record<string, number> {
  const r = spawnSync(process.execPath, [SELF, '--child', JSON.stringify(job)], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, number>;
}

/** Medians over rounds, the ADD ratio, and the spread of the rounds. */
function summarise(on: readonly RoundResult[], off: readonly RoundResult[], ratio: number): InProcessFigures {
  const summary = (rs: readonly RoundResult[]): RoundResult => ({
    addMedianUs: median(rs.map((x) => x.addMedianUs)),
    addMeanUs: median(rs.map((x) => x.addMeanUs)),
    delMedianUs: median(rs.map((x) => x.delMedianUs)),
  });
  const range = (rs: readonly RoundResult[]): [number, number] => [
    Math.min(...rs.map((x) => x.addMedianUs)),
    Math.max(...rs.map((x) => x.addMedianUs)),
  ];
  return { rounds: on.length, on: summary(on), off: summary(off), ratio, spread: { on: range(on), off: range(off) } };
}

/** Rounds of each setting in a process of its own, ABBA. */
function separate(n: number, rounds: number): InProcessFigures {
  const on: RoundResult[] = [];
  const off: RoundResult[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const metrics of r % 2 === 0 ? [true, false] : [false, true])
      (metrics ? on : off).push(runChild({ kind: 'separate', metrics, n }) as unknown as RoundResult);
  }
  const s = summarise(on, off, NaN);
  return { ...s, ratio: s.on.addMedianUs / s.off.addMedianUs };
}

/** Rounds holding both settings, calls alternating; the ratio is the median of the rounds' ratios. */
function paired(n: number, rounds: number): InProcessFigures {
  const results = Array.from(
    { length: rounds },
    () => runChild({ kind: 'paired', n }) as unknown as { on: RoundResult; off: RoundResult },
  );
  return summarise(
    results.map((r) => r.on),
    results.map((r) => r.off),
    median(results.map((r) => r.on.addMedianUs / r.off.addMedianUs)),
  );
}

/**
 * ADDs through the sockets of two real agents, alternating call by call, then DELs (untimed);
 * `rounds` pairs of fresh agents, since one process can run faster than another for its life.
 */
async function overSocket(n: number, rounds: number): Promise<MetricsFigures['socket']> {
  const all = { on: [] as number[], off: [] as number[] };
  const medians = { on: [] as number[], off: [] as number[] };
  const ratios: number[] = [];
  const cpu: Array<{ on: number; off: number }> = [];
  for (let r = 0; r < rounds; r++) {
    const round = await socketRound(n, r % 2 === 0);
    for (const which of ['on', 'off'] as const) {
      all[which].push(...round.ms[which]);
      medians[which].push(median(round.ms[which]));
    }
    ratios.push(median(round.ms.on) / median(round.ms.off));
    if (round.cpuUs !== undefined) cpu.push(round.cpuUs);
  }
  const timing = (which: 'on' | 'off'): Timing => ({ median: median(medians[which]), p99: tail(all[which], 0.99) });
  return {
    n,
    rounds,
    on: timing('on'),
    off: timing('off'),
    ratio: median(ratios),
    ratioSpread: [Math.min(...ratios), Math.max(...ratios)],
    cpuUs:
      cpu.length === 0
        ? undefined
        : {
            on: median(cpu.map((c) => c.on)),
            off: median(cpu.map((c) => c.off)),
            ratio: median(cpu.map((c) => c.on / c.off)),
          },
  };
}

/** Nanoseconds a process has run on a CPU, all its threads (Linux schedstat); undefined where unreadable. */
function cpuNanoseconds(pid: number): number | undefined {
  try {
    return readdirSync(`/proc/${pid}/task`).reduce(
      (sum, task) => sum + Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]),
      0,
    );
  } catch {
    return undefined;
  }
}

/** One pair of fresh agents, started in either order: ADD milliseconds of each, and their CPU µs per ADD. */
async function socketRound(
  n: number,
  onFirst: boolean,
): Promise<{ ms: { on: number[]; off: number[] }; cpuUs?: { on: number; off: number } }> {
  const agents: AgentHandle[] = [];
  try {
    for (const address of onFirst ? ['127.0.0.1:0', ''] : ['', '127.0.0.1:0'])
      agents.push(await startAgent({ args: ['--metrics-address', address] }));
    const [on, off] = (onFirst ? agents : [...agents].reverse()) as [AgentHandle, AgentHandle];
    const clients = { on: new ApiClient({ socket: on.socket }), off: new ApiClient({ socket: off.socket }) };
    if ((await clients.on.status()).metrics?.address === undefined)
      throw new Error('the metrics-on agent serves no metrics');
    if ((await clients.off.status()).metrics !== undefined) throw new Error('the metrics-off agent serves metrics');
    const call = (client: ApiClient, command: 'ADD' | 'DEL', id: string) =>
      expect(
        client.cni({
          command,
          containerID: id,
          netns: `/var/run/netns/${id}`,
          ifname: 'eth0',
          config: netConf('bench', '10.64.0.0/14'),
        }),
        command === 'ADD' ? 'result' : 'silent',
      );
    for (let i = 0; i < 100; i++) for (const c of [clients.on, clients.off]) await call(c, 'ADD', `warm-${i}`);
    const ms = { on: [] as number[], off: [] as number[] };
    const cpuBefore = [cpuNanoseconds(on.pid), cpuNanoseconds(off.pid)];
    for (let i = 0; i < n; i++) {
      for (const which of i % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const t = performance.now();
        await call(clients[which], 'ADD', `c-${i}`);
        ms[which].push(performance.now() - t);
      }
    }
    const cpuAfter = [cpuNanoseconds(on.pid), cpuNanoseconds(off.pid)];
    for (let i = 0; i < n; i++) for (const c of [clients.on, clients.off]) await call(c, 'DEL', `c-${i}`);
    const perAdd = (i: number): number | undefined => {
      const [before, after] = [cpuBefore[i], cpuAfter[i]];
      return before === undefined || after === undefined ? undefined : (after - before) / n / 1000;
    };
    const [cpuOn, cpuOff] = [perAdd(0), perAdd(1)];
    return { ms, ...(cpuOn === undefined || cpuOff === undefined ? {} : { cpuUs: { on: cpuOn, off: cpuOff } }) };
  } finally {
    for (const a of agents) await a.stop();
  }
}

/** GET /metrics from a real agent on a database seeded with 10 pools and 10,000 allocations. */
async function scrapeOverHttp(scrapes: number): Promise<{ http: Timing; bytes: number; lines: number }> {
  const dir = tempDir('bench-metrics-agent-');
  await seed(join(dir, 'warren.db'));
  const agent = await startAgent({ dir, args: ['--metrics-address', '127.0.0.1:0'] });
  try {
    const address = (await new ApiClient({ socket: agent.socket }).status()).metrics?.address;
    if (address === undefined) throw new Error('the agent serves no metrics');
    const get = async (): Promise<string> => {
      const res = await fetch(`http://${address}/metrics`);
      if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
      return res.text();
    };
    const text = await get();
    if (!text.includes(`warren_pool_allocated_addresses{pool="10.20.0.0/22"} ${SCRAPE_ALLOCATIONS / SCRAPE_POOLS}`))
      throw new Error('the seeded pools are not in the exposition');
    for (let i = 0; i < 3; i++) await get();
    const ms = (await timed(scrapes, get)).map((us) => us / 1000);
    const lines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
    return { http: { median: median(ms), p99: tail(ms, 0.99) }, bytes: Buffer.byteLength(text), lines };
  } finally {
    await agent.stop();
    removeDir(dir);
  }
}

export async function metricsFigures(quick: boolean): Promise<MetricsFigures> {
  const n = quick ? 1_000 : 5_000;
  const rounds = quick ? 5 : 9;
  const scrapes = quick ? 20 : 100;
  const inProcessRun = await underLoad(() => ({ n, separate: separate(n, rounds), paired: paired(n, rounds) }));
  const inProc = inProcessRun.value;
  const socketRun = await underLoad(() => overSocket(quick ? 300 : 1_000, quick ? 3 : 7));
  const socket = socketRun.value;
  const scrapeRun = await underLoad(async () => ({
    inProcess: runChild({ kind: 'scrape', scrapes }),
    http: await scrapeOverHttp(scrapes),
  }));
  const { inProcess: scrapeInProcess, http } = scrapeRun.value;
  return {
    cpu: cpuModel(),
    load: { inProcess: inProcessRun.load, socket: socketRun.load, scrape: scrapeRun.load },
    cores: availableParallelism(),
    quick,
    inProcess: inProc,
    socket,
    scrape: {
      pools: SCRAPE_POOLS,
      allocations: SCRAPE_ALLOCATIONS,
      inProcessMs: scrapeInProcess.inProcessMs ?? NaN,
      ...http,
    },
    floorMet: inProc.paired.ratio <= FLOOR && socket.ratio <= FLOOR,
  };
}

export function printMetricsFigures(f: MetricsFigures): void {
  const verdict = (ratio: number) => (ratio <= FLOOR ? 'met' : 'NOT met');
  const row = (what: string, on: string, off: string, ratio = '') =>
    console.log(`  ${what.padEnd(62)} ${on.padStart(10)} ${off.padStart(10)}  ${ratio}`);
  const us = (x: number) => x.toFixed(1);
  const n = f.inProcess.n.toLocaleString('en');
  // machineLine() names the CPU (f.cpu) and its threads (f.cores) with the command and the time.
  console.log(`  ${machineLine()}${f.quick ? '; quick run' : ''}`);
  row('ADD cost, metrics on vs off', 'on', 'off', 'on / off');
  for (const [design, p] of [
    ['paired (both in one process, calls alternating)', f.inProcess.paired],
    ['separate (a process each, ABBA)', f.inProcess.separate],
  ] as const) {
    console.log(
      `  in process, SQLite FULL, ${n} ADDs then ${n} DELs, ${p.rounds} rounds, ` +
        `${design}; ${describeLoad(f.load.inProcess)}:`,
    );
    row(
      '  median µs per ADD',
      us(p.on.addMedianUs),
      us(p.off.addMedianUs),
      `${p.ratio.toFixed(3)} (floor ${FLOOR}: ${verdict(p.ratio)})`,
    );
    row(
      "  rounds' median ADD, lowest–highest µs",
      `${p.spread.on[0].toFixed(0)}–${p.spread.on[1].toFixed(0)}`,
      `${p.spread.off[0].toFixed(0)}–${p.spread.off[1].toFixed(0)}`,
    );
    row('  mean µs per ADD', us(p.on.addMeanUs), us(p.off.addMeanUs), (p.on.addMeanUs / p.off.addMeanUs).toFixed(3));
    row(
      `  then ${n} DELs: median µs`,
      us(p.on.delMedianUs),
      us(p.off.delMedianUs),
      (p.on.delMedianUs / p.off.delMedianUs).toFixed(3),
    );
  }
  const s = f.socket;
  console.log(
    `  two real agents over their sockets, ${s.rounds} pairs of fresh agents, ` +
      `${s.n.toLocaleString('en')} ADDs each, alternating; ${describeLoad(f.load.socket)}:`,
  );
  row(
    '  median ms per ADD',
    s.on.median.toFixed(3),
    s.off.median.toFixed(3),
    `${s.ratio.toFixed(3)} (floor ${FLOOR}: ${verdict(s.ratio)})`,
  );
  const [onTail, offTail] = [s.on.p99.value, s.off.p99.value];
  const tailLabel = `  ${s.on.p99.label} ms (n=${s.on.p99.n} each)`;
  row(tailLabel, onTail.toFixed(3), offTail.toFixed(3), (onTail / offTail).toFixed(3));
  row("  pairs' ratios, lowest–highest", '', '', `${s.ratioSpread[0].toFixed(3)}–${s.ratioSpread[1].toFixed(3)}`);
  if (s.cpuUs !== undefined)
    row("  the agent's CPU µs per ADD (all threads)", us(s.cpuUs.on), us(s.cpuUs.off), s.cpuUs.ratio.toFixed(3));
  const c = f.scrape;
  console.log(
    `  one scrape with ${c.pools} pools and ${c.allocations.toLocaleString('en')} ` +
      `allocations (${c.lines} samples, ${(c.bytes / 1024).toFixed(1)} KiB); ` +
      `${describeLoad(f.load.scrape)}:`,
  );
  console.log(`    in process, AgentMetrics.exposition(): median ms ${c.inProcessMs.toFixed(2)}`);
  console.log(
    `    real agent, GET /metrics over HTTP: median ms ${c.http.median.toFixed(2)}, ` +
      `${describeTail(c.http.p99, 2)}`,
  );
  const sep = f.inProcess.separate;
  console.log(
    `  floor "ADD with metrics on within 5% of off": ${f.floorMet ? 'met' : 'NOT met'} per call (in process, paired ${f.inProcess.paired.ratio.toFixed(3)}; over the socket ${s.ratio.toFixed(3)}); ` +
      `a process each: ${sep.ratio.toFixed(3)}, its rounds spreading ${((sep.spread.off[1] / sep.spread.off[0] - 1) * 100).toFixed(0)}% (off) and ${((sep.spread.on[1] / sep.spread.on[0] - 1) * 100).toFixed(0)}% (on)`,
  );
}

if (process.argv[2] === '--child') {
  process.stdout.write(JSON.stringify(await child(JSON.parse(process.argv[3] as string) as Job)));
} else if (process.argv[1] === SELF) {
  printMetricsFigures(await metricsFigures(process.argv.includes('--quick')));
}
