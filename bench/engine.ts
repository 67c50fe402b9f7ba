/**
 * In-process figures of the allocation engine over SQLite, each measured in a fresh child process:
 *   - allocations per second for 100,000 allocations (IPv4 /15, IPv6 /64), at both durabilities,
 *     and the resident memory of that child after them: the bare engine (allocator and store in a
 *     Node process), not the agent, which adds its HTTP server, metrics and client libraries;
 *   - the cost of one allocation with the pool empty, half full and 99% full (/16);
 *   - a real agent (bin/warren agent) on an empty database and on one holding 100,000 allocations:
 *     time to its first answer, its first ADD into that pool, one listing of every allocation, and
 *     the agent's own resident memory (VmRSS) after each, and its peak (VmHWM).
 * Usage: node bench/engine.ts [--quick]   (also part of npm run bench)
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ManualClock } from '../src/core/clock.ts';
import { requestJson } from '../src/core/unix-http.ts';
import { formatIP } from '../src/ipam/address.ts';
import { parseIpamConfig } from '../src/cni/ipam-config.ts';
import { Allocator } from '../src/allocator/allocator.ts';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import type { LedgerOp } from '../src/store/store.ts';
import { METRICS_ON_FREE_PORT, metricsAddress, residentMiB } from './agents.ts';

const SELF = fileURLToPath(import.meta.url);

type Job =
  | { kind: 'fill'; range: string; n: number; sync: 'FULL' | 'NORMAL' }
  | { kind: 'at-fill'; fraction: number; n: number };

async function child(job: Job): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-engine-'));
  try {
    const clock = new ManualClock(0);
    if (job.kind === 'fill') {
      const store = new SqliteStore({ path: join(dir, 'w.db'), synchronous: job.sync });
      const allocator = new Allocator({ store, clock, node: 'bench' });
      const ranges = parseIpamConfig({ type: 'warren', range: job.range }).ranges;
      const t = performance.now();
      for (let i = 0; i < job.n; i++)
        await allocator.allocate({ owner: { network: 'b', containerID: `c${i}`, ifname: 'eth0' }, ranges });
      const seconds = (performance.now() - t) / 1000;
      globalThis.gc?.();
      const m = process.memoryUsage();
      await store.close();
      // The bare engine's process (this child: the allocator and store, no agent around them).
      return { perSecond: job.n / seconds, rssMB: m.rss / 2 ** 20, heapMB: m.heapUsed / 2 ** 20 };
    }
    // Fill a /16 to the fraction in bulk, then time allocations one by one.
    const store = new SqliteStore({ path: join(dir, 'w.db'), synchronous: 'NORMAL' });
    const [range] = parseIpamConfig({ type: 'warren', range: '10.0.0.0/16' }).ranges;
    if (range === undefined) throw new Error('no range');
    const capacity = Number(range.last - range.first + 1n);
    const fill = Math.floor(capacity * job.fraction);
    await bulkFill(store, range.pool, range.first, fill);
    const allocator = new Allocator({ store, clock, node: 'bench' });
    const ranges = [range];
    await allocator.allocate({ owner: { network: 'b', containerID: 'warm', ifname: 'eth0' }, ranges }); // loads the pool
    const t = performance.now();
    for (let i = 0; i < job.n; i++)
      await allocator.allocate({ owner: { network: 'b', containerID: `m${i}`, ifname: 'eth0' }, ranges });
    const perCallUs = ((performance.now() - t) * 1000) / job.n;
    await store.close();
    return { perCallUs, filled: fill };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Writes `count` allocations from `first` on in one commit, of `node` in `network`: seeding, not measuring. */
export async function bulkFill(
  store: SqliteStore,
  pool: string,
  first: bigint,
  count: number,
  family: 4 | 6 = 4,
  node = 'bench',
  network = 'b',
): Promise<void> {
  const ops: LedgerOp[] = [];
  for (let i = 0; i < count; i++) {
    ops.push({
      op: 'allocate',
      allocation: {
        pool,
        address: formatIP({ family, value: first + BigInt(i) }),
        network,
        containerID: `seed${i}`,
        ifname: 'eth0',
        node,
        netns: `/var/run/netns/seed${i}`,
        createdAt: 0,
      },
    });
  }
  const read = await store.readLedger(pool);
  const r = await store.commit(pool, read.revision, ops);
  if (r.kind !== 'committed') throw new Error(r.reason);
}

function runChild(job: Job): Record<string, number> {
  const r = spawnSync(process.execPath, ['--expose-gc', SELF, '--child', JSON.stringify(job)], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, number>;
}

/** What an agent's start and its first calls cost, on a database holding `n` allocations of one pool. */
export interface AgentStartFigures {
  readonly readyMs: number;
  readonly firstAddMs: number;
  readonly listingMs: number;
  readonly listed: number;
  /**
   * The agent's resident memory (VmRSS, MiB) at its first answer, once its warm-up (which runs
   * beside serving) has finished, after its first ADD, after the listing.
   */
  readonly rssAtStart: number;
  readonly rssWarmedUp: number;
  readonly rssAfterAdd: number;
  readonly rssAfterListing: number;
  /** Its peak resident memory (VmHWM, MiB) by the end. */
  readonly rssPeak: number;
}

/**
 * A real agent (bin/warren agent, default flags but metrics on a free port, checked) on a database
 * seeded with `n` allocations of a /14: time to its first answer, its first ADD into that pool
 * (which loads the pool), and one listing of every allocation (GET /v1/allocations, what
 * `warren list` and the dashboard's export ask), with the agent's resident memory after each.
 */
export async function agentStart(n: number): Promise<AgentStartFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-agent-'));
  try {
    const store = new SqliteStore({ path: join(dir, 'warren.db') });
    const [range] = parseIpamConfig({ type: 'warren', range: '10.64.0.0/14' }).ranges;
    if (range === undefined) throw new Error('no range');
    if (n > 0) await bulkFill(store, range.pool, range.first, n);
    await store.close();
    const socket = join(dir, 'w.sock');
    const t = performance.now();
    const warren = join(SELF, '..', '..', 'bin', 'warren');
    const args = [warren, 'agent', '--state-dir', dir, '--journal-dir', join(dir, 'journal'), '--socket', socket];
    const agent = spawn(process.execPath, [...args, '--netns-dirs', '', ...METRICS_ON_FREE_PORT], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const pid = agent.pid as number;
    let log = '';
    agent.stdout?.on('data', (c: Buffer) => (log += c.toString()));
    try {
      for (;;) {
        try {
          if ((await requestJson({ socket, method: 'GET', path: '/v1/status', timeoutMs: 2_000 })).status === 200)
            break;
        } catch {
          await new Promise((r) => setTimeout(r, 2));
        }
        if (performance.now() - t > 30_000) throw new Error('agent did not start');
      }
      const readyMs = performance.now() - t;
      const rssAtStart = residentMiB(pid).rss;
      await metricsAddress(socket);
      // The warm-up's last rounds run beside serving; its "warmed up" line says they are done.
      const warmDeadline = performance.now() + 120_000;
      while (!log.includes('"warmed up"')) {
        if (performance.now() > warmDeadline) throw new Error('the agent did not log "warmed up" within 120 s');
        if (agent.exitCode !== null) throw new Error(`the agent exited (${agent.exitCode}) before it warmed up`);
        await new Promise((r) => {
          agent.stdout?.once('data', r);
          agent.once('exit', r);
          setTimeout(r, 1_000).unref();
        });
      }
      const rssWarmedUp = residentMiB(pid).rss;
      const t2 = performance.now();
      const config = { cniVersion: '1.0.0', name: 'b', ipam: { type: 'warren', range: '10.64.0.0/14', socket } };
      const add = await requestJson({
        socket,
        method: 'POST',
        path: '/v1/cni',
        body: { command: 'ADD', containerID: 'first', netns: '/x', ifname: 'eth0', config },
      });
      if ((add.body as { kind: string }).kind !== 'result') throw new Error(JSON.stringify(add.body));
      const firstAddMs = performance.now() - t2;
      const rssAfterAdd = residentMiB(pid).rss;
      const t3 = performance.now();
      const listing = await requestJson({ socket, method: 'GET', path: '/v1/allocations', timeoutMs: 120_000 });
      const listingMs = performance.now() - t3;
      const listed = (listing.body as unknown[]).length;
      if (listed !== n + 1) throw new Error(`listed ${listed} allocations, expected ${n + 1}`);
      const after = residentMiB(pid);
      const rss = { rssAtStart, rssWarmedUp, rssAfterAdd, rssAfterListing: after.rss, rssPeak: after.peak };
      return { readyMs, firstAddMs, listingMs, listed, ...rss };
    } finally {
      agent.kill('SIGTERM');
      await new Promise((r) => agent.once('exit', r));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function engineFigures(quick: boolean): Promise<Array<[string, string, string]>> {
  const rows: Array<[string, string, string]> = [];
  const n = quick ? 20_000 : 100_000;
  for (const [label, range] of [
    ['IPv4 /15', '10.0.0.0/15'],
    ['IPv6 /64', 'fd00::/64'],
  ] as const) {
    const r = runChild({ kind: 'fill', range, n, sync: 'NORMAL' });
    rows.push([
      `${n.toLocaleString('en')} allocations in ${label}: allocations/s`,
      (r.perSecond ?? 0).toFixed(0),
      'process crash',
    ]);
    const memory = `${(r.rssMB ?? 0).toFixed(0)} (${(r.heapMB ?? 0).toFixed(0)})`;
    rows.push([`  the engine's process after them (no agent): RSS MiB (heap MiB)`, memory, '']);
  }
  const full = runChild({ kind: 'fill', range: '10.0.0.0/15', n: quick ? 2_000 : 10_000, sync: 'FULL' });
  rows.push([
    `${(quick ? 2_000 : 10_000).toLocaleString('en')} allocations in IPv4 /15: allocations/s`,
    (full.perSecond ?? 0).toFixed(0),
    'power loss',
  ]);
  const costs: number[] = [];
  for (const fraction of [0, 0.5, 0.99]) {
    const r = runChild({ kind: 'at-fill', fraction, n: quick ? 200 : 500 });
    costs.push(r.perCallUs ?? NaN);
    rows.push([
      `one allocation in a /16 ${fraction * 100}% full (${r.filled} held): µs`,
      (r.perCallUs ?? 0).toFixed(1),
      'process crash',
    ]);
  }
  rows.push(['  99% full / empty', ((costs[2] ?? NaN) / (costs[0] ?? NaN)).toFixed(2), '']);
  for (const held of [0, n]) {
    const a = await agentStart(held);
    const of = `agent (bin/warren agent) on ${held.toLocaleString('en')} stored allocations`;
    rows.push([`${of}: ms to its first answer`, a.readyMs.toFixed(0), '']);
    rows.push([`  its first ADD into that pool (loads the pool): ms`, a.firstAddMs.toFixed(0), 'power loss']);
    const listing = `  one listing of all ${a.listed.toLocaleString('en')} (GET /v1/allocations): ms`;
    rows.push([listing, a.listingMs.toFixed(0), '']);
    const rss = [a.rssAtStart, a.rssWarmedUp, a.rssAfterAdd, a.rssAfterListing].map((x) => x.toFixed(0)).join(' / ');
    rows.push([`  its RSS MiB: first answer / warmed up / after the ADD / after the listing`, rss, '']);
    rows.push([`  its peak RSS MiB (VmHWM)`, a.rssPeak.toFixed(0), '']);
  }
  return rows;
}

if (process.argv[2] === '--child') {
  process.stdout.write(JSON.stringify(await child(JSON.parse(process.argv[3] as string) as Job)));
} else if (process.argv[1] === SELF) {
  for (const [k, v, d] of await engineFigures(process.argv.includes('--quick')))
    console.log(`  ${k.padEnd(70)} ${v.padStart(10)}  ${d}`);
}
