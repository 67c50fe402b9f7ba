/**
 * Runs the test suites test/suites.ts names, with Node's test runner: `node scripts/test.ts unit`,
 * `... e2e`, or both when no suite is named (`npm test`). Files that share nothing run two at a time
 * (the e2e files not told to run alone, then the unit files: the long ones start first); then each
 * e2e file that must run alone, one after another. Every group runs even when an earlier one
 * failed, so one run reports every failure; the exit code is non-zero if any group failed.
 *
 * Two at a time because the machines this runs on have two cores and the e2e files spend much of
 * their time waiting on other processes; the file timeout is the one the single serial run had.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { E2E_ALONE, E2E_FILES, UNIT_FILES } from '../test/suites.ts';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** How long one test or `describe` block may run before the runner fails it as hung. */
export const FILE_TIMEOUT_MS = 1_200_000;

/** The runner's flags for a group of files, `concurrency` of them at a time. */
export function runnerFlags(concurrency: number): string[] {
  return ['--test', `--test-concurrency=${concurrency}`, `--test-timeout=${FILE_TIMEOUT_MS}`];
}

export interface Group {
  readonly what: string;
  readonly files: readonly string[];
  readonly concurrency: number;
}

/** The groups that run `suites` (none named: both), in order. */
export function groupsOf(suites: readonly ('unit' | 'e2e')[]): Group[] {
  const wants = (suite: 'unit' | 'e2e'): boolean => suites.length === 0 || suites.includes(suite);
  // Two at a time on two cores; no more where there are more, so a run's load is alike everywhere.
  const together = Math.min(2, availableParallelism());
  return [
    {
      what: 'files that share nothing, two at a time',
      files: [...(wants('e2e') ? E2E_FILES : []), ...(wants('unit') ? UNIT_FILES : [])],
      concurrency: together,
    },
    { what: 'e2e files that run alone', files: wants('e2e') ? Object.keys(E2E_ALONE) : [], concurrency: 1 },
  ];
}

function main(args: readonly string[]): number {
  const suites: ('unit' | 'e2e')[] = [];
  for (const arg of args) {
    if (arg !== 'unit' && arg !== 'e2e') {
      process.stderr.write(`unknown suite ${JSON.stringify(arg)}: name unit, e2e, or none for both\n`);
      return 2;
    }
    suites.push(arg);
  }
  let failed = false;
  for (const group of groupsOf(suites)) {
    if (group.files.length === 0) continue;
    process.stdout.write(`\n# ${group.what}: ${group.files.length} files\n`);
    const args = [...runnerFlags(group.concurrency), ...group.files];
    const result = spawnSync(process.execPath, args, { cwd: REPO_ROOT, stdio: 'inherit' });
    if (result.status !== 0) failed = true;
  }
  return failed ? 1 : 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
