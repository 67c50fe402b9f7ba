/**
 * The in-process engine today beside the engine at an earlier commit, in one run: each commit's
 * own bench/engine.ts child (same job shapes: `fill` and `at-fill`) runs in a fresh process,
 * alternating then/now so a noisy neighbour hits both alike; medians of the rounds and the ratio.
 * The earlier tree is taken with `git archive` into a temporary directory and shares this
 * checkout's node_modules.
 * Usage: node bench/engine-then-now.ts [--against COMMIT] [--rounds N] [--quick]
 *        (default: e9c30a3, the commit issue 12 names; also part of npm run bench)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');
export const BASELINE_COMMIT = 'e9c30a3';

type Job =
  | { kind: 'fill'; range: string; n: number; sync: 'FULL' | 'NORMAL' }
  | { kind: 'at-fill'; fraction: number; n: number };

function runChild(tree: string, job: Job): Record<string, number> {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', join(tree, 'bench', 'engine.ts'), '--child', JSON.stringify(job)],
    { cwd: tree, encoding: 'utf8', maxBuffer: 1 << 20 },
  );
  if (r.status !== 0) throw new Error(`bench child in ${tree} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, number>;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** Extracts `commit` into a temporary tree that shares node_modules; the caller removes it. */
function checkout(commit: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'bench-then-'));
  const archive = execFileSync('git', ['-C', REPO, 'archive', '--format=tar', commit], { maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

export interface ThenNowRow {
  readonly figure: string;
  readonly then: number;
  readonly now: number;
  /** now / then, oriented so that > 1 means today is better. */
  readonly better: number;
}

export function engineThenNow(
  options: { against?: string | undefined; rounds?: number | undefined; quick?: boolean } = {},
): { commit: string; rows: ThenNowRow[] } {
  const commit = options.against ?? BASELINE_COMMIT;
  const rounds = options.rounds ?? 3;
  const n = options.quick === true ? 5_000 : 20_000;
  const then = checkout(commit);
  try {
    const jobs: Array<{
      figure: string;
      job: Job;
      value: (r: Record<string, number>) => number;
      higherIsBetter: boolean;
    }> = [
      {
        figure: `${n.toLocaleString('en')} allocations in IPv4 /15, allocations/s`,
        job: { kind: 'fill', range: '10.0.0.0/15', n, sync: 'NORMAL' },
        value: (r) => r.perSecond ?? NaN,
        higherIsBetter: true,
      },
      {
        figure: `${n.toLocaleString('en')} allocations in IPv6 /64, allocations/s`,
        job: { kind: 'fill', range: 'fd00::/64', n, sync: 'NORMAL' },
        value: (r) => r.perSecond ?? NaN,
        higherIsBetter: true,
      },
      {
        figure: 'one allocation in a /16 50% full, µs',
        job: { kind: 'at-fill', fraction: 0.5, n: 500 },
        value: (r) => r.perCallUs ?? NaN,
        higherIsBetter: false,
      },
    ];
    const rows: ThenNowRow[] = [];
    for (const j of jobs) {
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < rounds; i++) {
        a.push(j.value(runChild(then, j.job)));
        b.push(j.value(runChild(REPO, j.job)));
      }
      const t = median(a);
      const w = median(b);
      // biome-ignore lint/suspicious/noThenProperty: the figure then and now; a row is never awaited
      rows.push({ figure: j.figure, then: t, now: w, better: j.higherIsBetter ? w / t : t / w });
    }
    return { commit, rows };
  } finally {
    rmSync(then, { recursive: true, force: true });
  }
}

export function printThenNow(result: { commit: string; rows: ThenNowRow[] }): void {
  console.log(`  ${'figure'.padEnd(50)} ${result.commit.padStart(10)} ${'today'.padStart(10)}  today vs then`);
  for (const r of result.rows) {
    console.log(
      `  ${r.figure.padEnd(50)} ${r.then.toFixed(1).padStart(10)} ${r.now.toFixed(1).padStart(10)}  ${r.better.toFixed(2)}x ${r.better >= 1 ? 'as fast or faster' : 'slower'}`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = (flag: string): string | undefined => {
    const i = process.argv.indexOf(flag);
    return i < 0 ? undefined : process.argv[i + 1];
  };
  const rounds = at('--rounds');
  printThenNow(
    engineThenNow({
      against: at('--against'),
      rounds: rounds === undefined ? undefined : Number(rounds),
      quick: process.argv.includes('--quick'),
    }),
  );
}
