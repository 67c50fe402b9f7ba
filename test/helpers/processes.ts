/**
 * Child processes and scratch space for tests, all cleaned up: every process started here is
 * killed and every directory removed when the test file ends, even when a test fails, times out
 * (`--test-timeout`; a file still alive 30 s after its tests ended exits) or the file's process is
 * stopped by SIGTERM, SIGINT or SIGHUP. A helper whose start fails kills what it started at once
 * (`untilReady`), so a failed start never keeps a file alive.
 *
 * Deadlines bound a hang; they never measure speed. Waits default to HANG_BOUND_MS, long enough
 * for a machine loaded far past its cores (see docs/tests.md), and short enough that a hung
 * wait fails with its own message well before the file's timeout.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const WARREN_BIN = join(REPO, 'bin', 'warren');
/** PATH for children: this Node first, so `#!/usr/bin/env node` finds the same version. */
export const CHILD_PATH = `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

// Agents a test starts never take the node's default metrics port (127.0.0.1:9464), which another
// test's agent or a real agent on this machine may hold: each gets a free port unless it names one.
process.env.WARREN_METRICS_ADDRESS ??= '127.0.0.1:0';

/**
 * How long a wait may take before it is a hang. A loaded CI runner or a developer's machine under
 * `scripts/cpu-hog.sh` makes an agent start take tens of seconds; the file timeout in scripts/test.ts
 * (`--test-timeout`) stays several times this, so a hang names what it waited for.
 */
export const HANG_BOUND_MS = 120_000;

const live = new Set<ChildProcess>();
const dirs = new Set<string>();

function cleanUp(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  live.clear();
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // still busy (a mount a failed test left): the others are removed all the same
    }
  }
  dirs.clear();
}

process.on('exit', cleanUp);

/**
 * A test file whose tests have all ended but that something still keeps alive (a stuck helper, a
 * handle a timed-out test left) exits this long after, taking its children with it ('exit'
 * above), so no hang outlives the file's --test-timeout by more than this. Not
 * `--test-force-exit`: that exits before the runner has read the file's last reports, and whole
 * files' results were lost with it (a run counted 1,542 tests of 1,567, none failed).
 */
const FILE_EXIT_GRACE_MS = 30_000;

/** A file under test/ that is not one of the helpers (which run as children of tests). */
function isTestFile(path: string | undefined): boolean {
  if (path === undefined) return false;
  const absolute = resolve(path);
  return absolute.startsWith(`${join(REPO, 'test')}/`) && !absolute.startsWith(`${join(REPO, 'test', 'helpers')}/`);
}
// Only in a test file the runner started: a child process that imports this module (the
// registration plugin, a `node -e` program) inherits the runner's NODE_TEST_CONTEXT and must not
// grow a test harness of its own, which would write the runner's reports to its stdout.
if (process.env.NODE_TEST_CONTEXT !== undefined && isTestFile(process.argv[1])) {
  const { after } = process.getBuiltinModule('node:test') as typeof import('node:test');
  after(() => {
    setTimeout(() => {
      process.stderr.write(
        `test file ${relative(REPO, resolve(process.argv[1] ?? '?'))} still alive ${FILE_EXIT_GRACE_MS / 1000} s ` +
          `after its tests ended (held by: ${heldBy()}): exiting, with its children\n`,
      );
      process.exit();
    }, FILE_EXIT_GRACE_MS).unref();
  });
}

/** What keeps this process alive, by kind and count ("TCPWRAP ×2, Timeout"): for the message above. */
function heldBy(): string {
  const kinds = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  return [...kinds].map(([kind, n]) => (n === 1 ? kind : `${kind} ×${n}`)).join(', ') || 'nothing listed';
}

let watching = false;
/**
 * A file stopped from outside (the runner interrupted, CI cancelling) takes its children with it;
 * 'exit' alone does not run on a signal. Installed with the first child, so a process that only
 * imports this module (the registration plugin run as a child) keeps its own signal handling. A
 * SIGKILL cannot be caught: the children share the file's process group, which a CI runner kills.
 */
function watchSignals(): void {
  if (watching) return;
  watching = true;
  for (const [signal, number] of STOP_SIGNALS) process.once(signal, () => killAllAndExit(number));
}

/** The signals a file is stopped by from outside, with their numbers (the exit code is 128 + it). */
const STOP_SIGNALS = [
  ['SIGTERM', 15],
  ['SIGINT', 2],
  ['SIGHUP', 1],
] as const;

function killAllAndExit(signalNumber: number): never {
  cleanUp();
  process.exit(128 + signalNumber);
}

/**
 * For a process that stops its own way on a signal (the soak: after the step under way, cleaning up
 * as it ends): the first SIGTERM, SIGINT or SIGHUP calls `stop` instead of killing the children at
 * once; a second one kills them and exits, as without this.
 */
export function stopOnSignals(stop: (signal: NodeJS.Signals) => void): void {
  watching = true;
  let stopping = false;
  for (const [signal, number] of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stopping) killAllAndExit(number);
      stopping = true;
      stop(signal);
    });
  }
}

export function track(child: ChildProcess): ChildProcess {
  watchSignals();
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** A private temporary directory (0700), removed at exit or by the returned function. */
/** The children started through `track` that are still running (the helpers' own check). */
export function liveChildren(): number[] {
  return [...live]
    .filter((c) => c.exitCode === null && c.signalCode === null && c.pid !== undefined && !isGone(c.pid))
    .map((c) => c.pid as number);
}

/** SIGKILL, then wait until the process is gone and Node has seen it exit (so it is no longer tracked). */
export async function killAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  const pid = child.pid;
  if (pid === undefined) return;
  await waitFor(`process ${pid} to die`, () =>
    child.exitCode !== null || child.signalCode !== null ? true : undefined,
  );
}

/**
 * Waits for a just-started child to be ready; if `ready` fails (timeout, early exit, an exception
 * mid-setup) the child is killed and gone before the error is thrown, so a failed start leaves
 * nothing running and never keeps the test file's process alive.
 */
export async function untilReady<T>(
  children: ChildProcess | readonly ChildProcess[],
  ready: () => Promise<T>,
): Promise<T> {
  try {
    return await ready();
  } catch (error) {
    for (const child of Array.isArray(children) ? children : [children])
      await killAndWait(child as ChildProcess).catch(() => undefined);
    throw error;
  }
}

export function tempDir(prefix = 'warren-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to completion with optional stdin. */
export function run(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; stdin?: string | Buffer; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = track(
      spawn(command, args, {
        env: options.env ?? { ...process.env, PATH: CHILD_PATH },
        cwd: options.cwd ?? REPO,
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
    );
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.stdin?.on('error', () => undefined); // a child that exits before reading stdin
    child.stdin?.end(options.stdin ?? '');
    child.on('close', (code, signal) =>
      resolvePromise({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
}

export async function sh(command: string, args: readonly string[]): Promise<string> {
  const r = await run(command, args);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** Thrown by a `waitFor` probe when waiting longer is pointless (the process it waits on exited). */
export class StopWaiting extends Error {}

/**
 * Polls `probe` until it returns a value other than undefined, or fails after `deadlineMs`. Other
 * errors from the probe are retried (the last one is reported); a StopWaiting ends the wait at
 * once. The deadline bounds a hang (default HANG_BOUND_MS); a test that means "soon" says what it
 * measures some other way (a count of ticks, an event), never with a short deadline here.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  deadlineMs = HANG_BOUND_MS,
): Promise<T> {
  const end = Date.now() + deadlineMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      if (error instanceof StopWaiting) throw error;
      lastError = error;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out after ${deadlineMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** True once the process is gone or a zombie (a killed process may stay a zombie for seconds on a busy machine). */
export function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

/** Live processes (zombies aside) whose command line or environment (a private directory passed as an option or variable) names `dir`. */
export function processesUsing(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (
        readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir) ||
        readFileSync(`/proc/${entry}/environ`, 'utf8').includes(`=${dir}/`)
      )
        pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Runs `jobs` with at most `width` in flight; results in job order. */
export async function bounded<T>(width: number, jobs: ReadonlyArray<() => Promise<T>>): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await (jobs[i] as () => Promise<T>)();
      }
    }),
  );
  return out;
}
