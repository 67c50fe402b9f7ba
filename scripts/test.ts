/**
 * Runs the test suites test/suites.ts names, with Node's test runner: `node scripts/test.ts unit`,
 * `... e2e`, or both when no suite is named (`npm test`). Never more than two files at a time:
 * - the e2e files of E2E_ALONE one after another, each with no other e2e file beside it, while the
 *   unit files (which touch nothing machine-wide) run one at a time beside them;
 * - then the e2e files that share nothing, two at a time.
 * The unit suite alone runs two at a time. Every step runs even when an earlier one failed, so one
 * run reports every failure; the exit code is non-zero if any failed. Of two lanes running at once,
 * the e2e lane's report is shown as it comes and the unit lane's after it, whole.
 *
 * Two at a time because the machines this runs on have two cores and the e2e files spend much of
 * their time waiting on other processes; the file timeout is the one the single serial run had.
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { E2E_ALONE, E2E_FILES, UNIT_FILES } from '../test/suites.ts';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** How long one test or `describe` block may run before the runner fails it as hung. */
export const FILE_TIMEOUT_MS = 1_200_000;

/** The runner's flags for a lane of files, `concurrency` of them at a time. */
export function runnerFlags(concurrency: number): string[] {
  return ['--test', `--test-concurrency=${concurrency}`, `--test-timeout=${FILE_TIMEOUT_MS}`];
}

/** Files one `node --test` runs, `concurrency` at a time. */
export interface Lane {
  readonly what: string;
  readonly files: readonly string[];
  readonly concurrency: number;
}

export type Suite = 'unit' | 'e2e';

/** What runs `suites` (none named: both): steps in order, each a set of lanes that run at once. */
export function planOf(suites: readonly Suite[]): Lane[][] {
  const unit = suites.length === 0 || suites.includes('unit');
  const e2e = suites.length === 0 || suites.includes('e2e');
  // Two at a time on two cores; no more where there are more, so a run's load is alike everywhere.
  const together = Math.min(2, availableParallelism());
  const alone: Lane = {
    what: 'e2e files that run alone, one after another',
    files: Object.keys(E2E_ALONE),
    concurrency: 1,
  };
  const shared: Lane = { what: 'e2e files that share nothing, two at a time', files: E2E_FILES, concurrency: together };
  if (!e2e) return [[{ what: 'unit files, two at a time', files: UNIT_FILES, concurrency: together }]];
  if (!unit) return [[alone], [shared]];
  return [[alone, { what: 'unit files, one at a time beside them', files: UNIT_FILES, concurrency: 1 }], [shared]];
}

/** Runs a lane; its output goes to this process's as it comes, or, when `buffer`, into it. */
function runLane(lane: Lane, buffer?: Buffer[]): Promise<boolean> {
  const args = [...runnerFlags(lane.concurrency), ...lane.files];
  const output = buffer ? 'pipe' : 'inherit';
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', output, output] });
  if (buffer) {
    child.stdout?.on('data', (chunk: Buffer) => buffer.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => buffer.push(chunk));
  }
  return new Promise((resolve) => child.once('close', (code) => resolve(code === 0)));
}

async function main(args: readonly string[]): Promise<number> {
  const suites: Suite[] = [];
  for (const arg of args) {
    if (arg !== 'unit' && arg !== 'e2e') {
      process.stderr.write(`unknown suite ${JSON.stringify(arg)}: name unit, e2e, or none for both\n`);
      return 2;
    }
    suites.push(arg);
  }
  let failed = false;
  for (const step of planOf(suites)) {
    const [live, ...beside] = step.filter((lane) => lane.files.length > 0);
    if (live === undefined) continue;
    for (const lane of [live, ...beside]) process.stdout.write(`# ${lane.what}: ${lane.files.length} files\n`);
    const buffers = beside.map((): Buffer[] => []);
    const results = await Promise.all([runLane(live), ...beside.map((lane, i) => runLane(lane, buffers[i]))]);
    for (const [i, lane] of beside.entries()) {
      process.stdout.write(`\n# ${lane.what}:\n${Buffer.concat(buffers[i] ?? []).toString()}`);
    }
    if (results.includes(false)) failed = true;
  }
  return failed ? 1 : 0;
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
