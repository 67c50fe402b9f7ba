/**
 * Child processes and scratch space for tests, all cleaned up: every process started here is
 * killed and every directory removed when the test file ends, even when a test fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const WARREN_BIN = join(REPO, 'bin', 'warren');
/** PATH for children: this Node first, so `#!/usr/bin/env node` finds the same version. */
export const CHILD_PATH = `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

// Agents a test starts never take the node's default metrics port (127.0.0.1:9464), which another
// test's agent or a real agent on this machine may hold: each gets a free port unless it names one.
process.env.WARREN_METRICS_ADDRESS ??= '127.0.0.1:0';

const live = new Set<ChildProcess>();
const dirs = new Set<string>();

process.on('exit', () => {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** A private temporary directory (0700), removed at exit or by the returned function. */
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
export function run(command: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; stdin?: string | Buffer; cwd?: string } = {}): Promise<RunResult> {
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
      resolvePromise({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}

export async function sh(command: string, args: readonly string[]): Promise<string> {
  const r = await run(command, args);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** Polls `probe` until it returns a value other than undefined, or fails after `deadlineMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, deadlineMs = 10_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > end) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** True once the process is gone or a zombie (reaping is slow here; see REFERENCE.md). */
export function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
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
