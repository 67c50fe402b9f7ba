/**
 * In-process figures of the allocation engine over SQLite, each measured in a fresh child process
 * so memory and start time are the agent's own:
 *   - allocations per second and memory for 100,000 allocations (IPv4 /15, IPv6 /64), at both
 *     durabilities;
 *   - the cost of one allocation with the pool empty, half full and 99% full (/16);
 *   - agent start time with 100,000 allocations stored, and its first ADD into that pool.
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
import { SqliteStore } from '../src/store/sqlite-store.ts';
import type { PoolOp } from '../src/store/store.ts';

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

/** Writes `count` allocations from `first` on in one commit: seeding, not measuring. */
export async function bulkFill(
  store: SqliteStore,
  pool: string,
  first: bigint,
  count: number,
  family: 4 | 6 = 4,
): Promise<void> {
  const ops: PoolOp[] = [];
  for (let i = 0; i < count; i++) {
    ops.push({
      op: 'allocate',
      allocation: {
        pool,
        address: formatIP({ family, value: first + BigInt(i) }),
        network: 'b',
        containerID: `seed${i}`,
        ifname: 'eth0',
        node: 'bench',
        netns: `/var/run/netns/seed${i}`,
        createdAt: 0,
      },
    });
  }
  const read = await store.readPool(pool);
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

async function agentStart(n: number): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-agent-'));
  try {
    const store = new SqliteStore({ path: join(dir, 'warren.db') });
    const [range] = parseIpamConfig({ type: 'warren', range: '10.64.0.0/14' }).ranges;
    if (range === undefined) throw new Error('no range');
    await bulkFill(store, range.pool, range.first, n);
    await store.close();
    const socket = join(dir, 'w.sock');
    const t = performance.now();
    const agent = spawn(
      process.execPath,
      [
        join(SELF, '..', '..', 'bin', 'warren'),
        'agent',
        '--state-dir',
        dir,
        '--journal-dir',
        join(dir, 'journal'),
        '--socket',
        socket,
        '--netns-dirs',
        '',
      ],
      { stdio: 'ignore' },
    );
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
      const ready = performance.now() - t;
      const t2 = performance.now();
      const config = { cniVersion: '1.0.0', name: 'b', ipam: { type: 'warren', range: '10.64.0.0/14', socket } };
      const add = await requestJson({
        socket,
        method: 'POST',
        path: '/v1/cni',
        body: { command: 'ADD', containerID: 'first', netns: '/x', ifname: 'eth0', config },
      });
      if ((add.body as { kind: string }).kind !== 'result') throw new Error(JSON.stringify(add.body));
      return { readyMs: ready, firstAddMs: performance.now() - t2 };
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
    rows.push([
      `  agent memory after them: RSS MB (heap MB)`,
      `${(r.rssMB ?? 0).toFixed(0)} (${(r.heapMB ?? 0).toFixed(0)})`,
      '',
    ]);
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
  const start = await agentStart(n);
  rows.push([
    `agent start with ${n.toLocaleString('en')} allocations stored: ms to ready`,
    (start.readyMs ?? 0).toFixed(0),
    '',
  ]);
  rows.push([`  its first ADD into that pool (loads the pool): ms`, (start.firstAddMs ?? 0).toFixed(0), 'power loss']);
  return rows;
}

if (process.argv[2] === '--child') {
  process.stdout.write(JSON.stringify(await child(JSON.parse(process.argv[3] as string) as Job)));
} else if (process.argv[1] === SELF) {
  for (const [k, v, d] of await engineFigures(process.argv.includes('--quick')))
    console.log(`  ${k.padEnd(70)} ${v.padStart(10)}  ${d}`);
}
