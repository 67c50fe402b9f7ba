/**
 * What serving overlapping ranges costs an ADD (issue 37), in process over SQLite, beside the plain
 * range (the same engine with one pool: the peer here, since whereabouts cannot run on this machine):
 *   - plain: a /20 alone;
 *   - inner: a /22 served from the /20 around it, admitted first (one pool, the span restricted);
 *   - carved: the /20 used after a /22 inside it holds an address (served from three pools: the
 *     /22 and the pieces carved around it, the pool that served last tried first).
 * Each case allocates N addresses one by one in a fresh SQLite file (synchronous NORMAL); the
 * cases run in turns, ROUNDS times, and the medians are compared.
 * Usage: node bench/overlap.ts [--quick]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Allocator } from '../src/allocator/allocator.ts';
import { parseIpamConfig } from '../src/cni/ipam-config.ts';
import { ManualClock } from '../src/core/clock.ts';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import { loadavg, machineLine } from './machine.ts';
import { median } from './stats.ts';

const quick = process.argv.includes('--quick');
const N = quick ? 500 : 3_000;
const ROUNDS = quick ? 1 : 5;

type Case = 'plain' | 'inner' | 'carved';
const CASES: readonly Case[] = ['plain', 'inner', 'carved'];

const rangesOf = (range: string) => parseIpamConfig({ type: 'warren', range, network_name: 'bench' }).ranges;

/** Allocations per second of `kind`, in a fresh file. */
async function run(kind: Case): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-overlap-'));
  const store = new SqliteStore({ path: join(dir, 'w.db'), synchronous: 'NORMAL' });
  try {
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'bench' });
    const outer = rangesOf('10.96.0.0/20');
    const inner = rangesOf('10.96.4.0/22');
    const owner = (id: string) => ({ network: 'b', containerID: id, ifname: 'eth0' });
    // The set-up ADD decides the pools; then the timed ADDs.
    if (kind === 'inner') await allocator.allocate({ owner: owner('setup'), ranges: outer });
    if (kind === 'carved') await allocator.allocate({ owner: owner('setup'), ranges: inner });
    const timed = kind === 'inner' ? inner : outer;
    const n = kind === 'inner' ? Math.min(N, 1_000) : N;
    const t = performance.now();
    for (let i = 0; i < n; i++) await allocator.allocate({ owner: owner(`c${i}`), ranges: timed });
    return n / ((performance.now() - t) / 1000);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = new Map<Case, number[]>(CASES.map((c) => [c, []]));
const loadBefore = loadavg();
for (let round = 0; round < ROUNDS; round++) for (const kind of CASES) results.get(kind)?.push(await run(kind));
const plain = median(results.get('plain') ?? []);
console.log(machineLine());
console.log(
  `load ${loadBefore} → ${loadavg()}; ${N} ADDs a case (the inner /22 at most 1,000: it holds 1,022), ${ROUNDS} rounds in turns`,
);
console.log('| case | ADDs/s (median) | rounds | against plain |');
console.log('|---|---|---|---|');
for (const kind of CASES) {
  const all = results.get(kind) ?? [];
  const m = median(all);
  console.log(
    `| ${kind} | ${Math.round(m).toLocaleString('en-US')} | ${all.map((x) => Math.round(x)).join(', ')} | ${(m / plain).toFixed(2)}× |`,
  );
}
