/**
 * One large range on store `kubernetes`: blocks and their published allocations of SIM_NODES
 * simulated nodes written straight into the fake API server's storage (`preload`: no requests, no
 * watch events), as those nodes' agents would have left them (one /22 block each, its allocations
 * in its WarrenBlockPublication object, through the tier's own object builders), and one live agent
 * on it, against the same agent on an empty fake. Each simulated node has its Node object, as in a
 * cluster (without one, the live agent's relisting of Nodes takes the node for one deleted while
 * every agent was down, and frees its blocks: claimHolders), and no Lease. The range's record is
 * left to the live agent's first ADD.
 * Measured for each: sequential ADD median through the installed forwarder (after a first ADD that
 * claims the live agent's block), the live agent's API requests per minute while idle, its resident
 * memory, and `warren allocations --json` against it (time, bytes, allocations listed, memory after).
 * The size is `--allocations N` (default 1,000,000; --quick 20,000), spread over SIM_NODES blocks.
 * The same on etcd (`--store etcd`): bench/etcd-large.ts, a backend of `largeRangeOn`.
 */
import { spawn } from 'node:child_process';
import { systemClock } from '../src/core/clock.ts';
import type { Allocation } from '../src/ipam/allocation.ts';
import type { PublishedBlock } from '../src/store/tiered/cluster-tier.ts';
import { formatIP, parseIP } from '../src/ipam/address.ts';
import { blockKey } from '../src/ipam/blocks.ts';
import { blockName } from '../src/store/kubernetes/names.ts';
import { blockObject, publicationObject } from '../src/store/kubernetes/objects.ts';
import { type FakeKubeApi, type KubeObject as FakeObject, startFakeKubeApi } from '../test/helpers/fake-kube-api.ts';
import { kubeStoreArgs } from '../test/helpers/kube-store.ts';
import { CHILD_PATH, WARREN_BIN } from '../test/helpers/processes.ts';
import { residentMiB } from './agents.ts';
import { describeLoad, underLoad, type Load } from './machine.ts';
import { type Command, benchAgent, cniEnv, sequential } from './plugins.ts';

/** A create's or update's p50 on a real API server (KUBERNETES-API.md): ~10 ms. */
export const WRITE_LATENCY_MS = 10;

/** A fake API server with Warren's CRDs, answering each write after the measured latency. */
export function benchApi(): Promise<FakeKubeApi> {
  return startFakeKubeApi({ crds: 'deploy', writeLatencyMs: WRITE_LATENCY_MS });
}

export const SIM_NODES = 1_000;
export const POOL = '10.64.0.0/12';
/** /22 blocks: 1,022 addresses each, so 1,000 allocations a node fit one block. */
export const BLOCK_PREFIX = 22;
const BLOCK_SIZE = 1 << (32 - BLOCK_PREFIX);

export interface Listing {
  readonly ms: number;
  readonly bytes: number;
  /** Allocations in the output (its "address" keys, counted as it streams). */
  readonly entries: number;
  readonly code: number | null;
  readonly stderr: string;
}

const KEY = '"address":';

/** `warren allocations --json ARGS`, its output counted as it comes rather than held. */
function listing(args: readonly string[]): Promise<Listing> {
  const started = performance.now();
  const child = spawn(process.execPath, [WARREN_BIN, 'allocations', '--json', ...args], {
    env: { ...process.env, PATH: CHILD_PATH },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let bytes = 0;
  let entries = 0;
  let carry = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    bytes += Buffer.byteLength(chunk);
    // A key split across two chunks is found in the next: the carry (shorter than the key, so it
    // never holds a whole one already counted) is the tail of what came before.
    const text = carry + chunk;
    entries += text.split(KEY).length - 1;
    carry = text.slice(-(KEY.length - 1));
  });
  child.stderr.on('data', (c: Buffer) => {
    if (stderr.length < 2_000) stderr += c.toString();
  });
  return new Promise((resolve) =>
    child.on('close', (code) => resolve({ ms: performance.now() - started, bytes, entries, code, stderr })),
  );
}

const KUBE_WORDS = { into: 'the fake', store: 'fake', requests: 'API requests' };

export interface LargeFigures {
  readonly addMedian: number;
  readonly idlePerMinute: number;
  readonly idleRequests: Readonly<Record<string, number>>;
  readonly rssMiB: number;
  /** `warren allocations --json`: this node's own. */
  readonly local: Listing;
  readonly rssAfterLocalMiB: number;
  /** `warren allocations --cluster --json`: every node's, as published, a page at a time. */
  readonly cluster: Listing;
  readonly rssAfterClusterMiB: number;
  readonly failures: number;
  /** What the first failed call answered (its CNI error), if one failed. */
  readonly firstFailure: string | undefined;
  readonly load: Load;
}

export interface Large {
  readonly allocations: number;
  readonly nodes: number;
  readonly preloadSeconds: number;
  readonly idleSeconds: number;
  readonly empty: LargeFigures;
  readonly full: LargeFigures;
}

function requestedSize(quick: boolean): number {
  const i = process.argv.indexOf('--allocations');
  const given = i < 0 ? undefined : Number(process.argv[i + 1]);
  if (given !== undefined && (!Number.isInteger(given) || given < SIM_NODES))
    throw new Error(`--allocations must be a whole number of at least ${SIM_NODES}`);
  return given ?? (quick ? 20_000 : 1_000_000);
}

/** The name of simulated node `n`. */
const simulatedNode = (n: number): string => `sim-${String(n).padStart(4, '0')}`;

/** A block of a simulated node with its allocations, as its agent publishes it. */
export interface SimulatedBlock {
  readonly key: string;
  readonly node: string;
  readonly block: PublishedBlock;
}

/** The blocks of SIM_NODES nodes holding `total` allocations in all, as their agents leave them, one at a time. */
export function* simulatedBlocks(total: number): Generator<SimulatedBlock> {
  const base = (parseIP(POOL.split('/')[0] as string) as { value: bigint }).value;
  const now = systemClock.now();
  for (let n = 0; n < SIM_NODES; n++) {
    const node = simulatedNode(n);
    const start = base + BigInt(n * BLOCK_SIZE);
    const key = blockKey(POOL, `${formatIP({ family: 4, value: start })}/${BLOCK_PREFIX}`);
    const count = Math.floor(total / SIM_NODES) + (n < total % SIM_NODES ? 1 : 0);
    const allocations: Allocation[] = Array.from({ length: count }, (_, i) => {
      const id = `${node}-c${i}`;
      return {
        pool: key,
        address: formatIP({ family: 4, value: start + BigInt(i + 1) }),
        network: 'kbench',
        containerID: id,
        ifname: 'eth0',
        podNamespace: 'default',
        podName: `pod-${id}`,
        podUID: `00000000-0000-4000-8000-${String(n * 10_000 + i).padStart(12, '0')}`,
        node,
        createdAt: now,
      };
    });
    yield { key, node, block: { key, node, counts: { allocated: count, resting: 0 }, allocations, publishedAt: now } };
  }
}

/** The claims, then the publications, as the fake stores what it is given (JSON, so a plain copy of the tier's objects). */
function* kubeObjects(total: number, what: 'claims' | 'publications'): Generator<FakeObject> {
  for (const { key, node, block } of simulatedBlocks(what === 'claims' ? 0 : total)) {
    if (what === 'claims') yield structuredClone(blockObject(blockName(key), key, node)) as FakeObject;
    else yield structuredClone(publicationObject(blockName(key), block).object) as FakeObject;
  }
}

/**
 * Where the large range lives for one measurement: a cluster store, its simulated blocks written
 * straight into its storage, the live agent's arguments, and what the agent asks of it meanwhile.
 */
export interface LargeBackend {
  /** Writes the simulated blocks of `total` allocations (none for 0); seconds taken. */
  preload(total: number): Promise<number>;
  /** The live agent's arguments (its store, on this backend). */
  agentArgs(): readonly string[];
  /** Starts counting the agent's requests. */
  mark(): Promise<void>;
  /** The requests since `mark`, by what they were. */
  counted(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** The fake API server as the backend: its storage preloaded, its requests counted by verb and resource. */
async function kubeBackend(): Promise<LargeBackend> {
  const api = await benchApi();
  return {
    async preload(total) {
      if (total === 0) return 0;
      const started = performance.now();
      api.preload('warrenblocks', kubeObjects(total, 'claims'));
      api.preload('warrenblockpublications', kubeObjects(total, 'publications'));
      for (let n = 0; n < SIM_NODES; n++) api.createNode(simulatedNode(n));
      return (performance.now() - started) / 1000;
    },
    agentArgs: () => kubeStoreArgs(api, 'live', [], 'default'),
    async mark() {
      api.clearRequests();
    },
    counted: async () => api.requestCounts(),
    stop: () => api.stop(),
  };
}

async function figures(forwarder: Command, quick: boolean, total: number, backendOf: () => Promise<LargeBackend>) {
  const backend = await backendOf();
  const preloadSeconds = await backend.preload(total);
  const agent = await benchAgent({ args: [...backend.agentArgs()] });
  const ipam = { range: POOL, block_size: BLOCK_PREFIX };
  const config = JSON.stringify({
    cniVersion: '1.1.0',
    name: 'kbench',
    ipam: { type: 'warren', socket: agent.socket, ...ipam },
  });
  const command = forwarder;
  try {
    const measured = await underLoad(async () => {
      // The first ADD pins the range and claims the live agent's block: not what is compared.
      const warm = await sequential(1, command, cniEnv('ADD', 'warm-%i'), config);
      const adds = await sequential(quick ? 30 : 200, command, cniEnv('ADD', 'large-%i'), config);
      // Idle: what the agent reads and writes on its own, by verb and resource.
      await backend.mark();
      const idleMs = quick ? 15_000 : 60_000;
      await new Promise((resolve) => setTimeout(resolve, idleMs));
      const idleRequests = await backend.counted();
      const idleTotal = Object.values(idleRequests).reduce((s, x) => s + x, 0);
      const rssMiB = residentMiB(agent.pid).rss;
      const local = await listing(['--socket', agent.socket]);
      const rssAfterLocal = residentMiB(agent.pid).rss;
      const cluster = await listing(['--cluster', '--socket', agent.socket]);
      return {
        addMedian: adds.median,
        idlePerMinute: (idleTotal / idleMs) * 60_000,
        idleRequests,
        rssMiB,
        local,
        rssAfterLocalMiB: rssAfterLocal,
        cluster,
        rssAfterClusterMiB: residentMiB(agent.pid).rss,
        failures: warm.failures + adds.failures + (local.code === 0 ? 0 : 1) + (cluster.code === 0 ? 0 : 1),
        firstFailure: [...warm.results, ...adds.results].find((r) => r.code !== 0)?.stdout.trim(),
        idleSeconds: idleMs / 1000,
      };
    });
    return { ...measured.value, load: measured.load, preloadSeconds };
  } finally {
    await agent.stop();
    await backend.stop();
  }
}

/** The live agent on an empty fake, then on one holding the large range. */
export function largeRange(forwarder: Command, o: { quick: boolean }): Promise<Large> {
  return largeRangeOn(kubeBackend, forwarder, o);
}

/** The live agent on an empty backend, then on one holding the large range. */
export async function largeRangeOn(
  backendOf: () => Promise<LargeBackend>,
  forwarder: Command,
  o: { quick: boolean },
): Promise<Large> {
  const total = requestedSize(o.quick);
  const empty = await figures(forwarder, o.quick, 0, backendOf);
  const full = await figures(forwarder, o.quick, total, backendOf);
  return {
    allocations: total,
    nodes: SIM_NODES,
    preloadSeconds: full.preloadSeconds,
    idleSeconds: full.idleSeconds,
    empty,
    full,
  };
}

export function printLarge(l: Large, o: { into: string; store: string; requests: string } = KUBE_WORDS): void {
  console.log(
    `\nOne range (${POOL}, blocks of /${BLOCK_PREFIX}) holding ${l.allocations.toLocaleString('en')} allocations ` +
      `over ${l.nodes.toLocaleString('en')} simulated nodes (preloaded into ${o.into} in ${l.preloadSeconds.toFixed(1)} s), ` +
      `one live agent; against the same agent on an empty ${o.store}`,
  );
  const rows: Array<[string, (f: LargeFigures) => string]> = [
    ['ADD sequential median ms', (f) => f.addMedian.toFixed(2)],
    [`${o.requests} per minute, idle (${l.idleSeconds} s)`, (f) => f.idlePerMinute.toFixed(1)],
    ['agent RSS MiB, idle', (f) => f.rssMiB.toFixed(0)],
    ['warren allocations --json: ms', (f) => f.local.ms.toFixed(0)],
    ['  bytes; allocations listed', (f) => `${f.local.bytes}; ${f.local.entries}`],
    ['  agent RSS MiB after', (f) => f.rssAfterLocalMiB.toFixed(0)],
    ['warren allocations --cluster --json: s', (f) => (f.cluster.ms / 1000).toFixed(1)],
    ['  MB; allocations listed', (f) => `${(f.cluster.bytes / 1e6).toFixed(1)}; ${f.cluster.entries}`],
    ['  agent RSS MiB after', (f) => f.rssAfterClusterMiB.toFixed(0)],
    ['failures', (f) => String(f.failures)],
  ];
  console.log(`  ${''.padEnd(44)} ${'empty'.padStart(16)} ${l.allocations.toLocaleString('en').padStart(16)}`);
  for (const [label, cell] of rows)
    console.log(`  ${label.padEnd(44)} ${cell(l.empty).padStart(16)} ${cell(l.full).padStart(16)}`);
  const idle = (f: LargeFigures) =>
    Object.entries(f.idleRequests)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || 'none';
  console.log(`  idle requests, empty: ${idle(l.empty)}`);
  console.log(`  idle requests, full:  ${idle(l.full)}`);
  for (const [name, f] of [
    ['empty', l.empty],
    ['full', l.full],
  ] as const) {
    if (f.firstFailure !== undefined) console.log(`  first failure, ${name}: ${f.firstFailure}`);
    for (const [what, l] of [
      ['allocations', f.local],
      ['allocations --cluster', f.cluster],
    ] as const)
      if (l.code !== 0) console.log(`  warren ${what} failed, ${name} (${l.code}): ${l.stderr.trim()}`);
  }
  console.log(`  ${describeLoad(l.empty.load)} (empty); ${describeLoad(l.full.load)} (full)`);
}
