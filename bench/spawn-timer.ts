/**
 * Times batches of plugin calls with bench/spawn-timer.c (posix_spawn, CLOCK_MONOTONIC), so the
 * figures are the plugins' and not Node's child_process overhead. The driver is compiled once per
 * bench run into a temporary directory; each batch is one spawn of the driver.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), 'spawn-timer.c');

let workDir: string | undefined;
let driver: string | undefined;
let batches = 0;

function compiled(): string {
  if (driver !== undefined) return driver;
  workDir = mkdtempSync(join(tmpdir(), 'bench-spawn-timer-'));
  process.once('exit', () => rmSync(workDir as string, { recursive: true, force: true }));
  const out = join(workDir, 'spawn-timer');
  execFileSync('gcc', ['-O2', '-std=c11', '-D_GNU_SOURCE', '-o', out, SOURCE], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  driver = out;
  return out;
}

export interface TimedCall {
  ms: number;
  code: number;
  stdout: string;
}

export interface TimeCallsOptions {
  exe: string;
  args: readonly string[];
  /** The calls' environment; "%i" in CNI_CONTAINERID and CNI_NETNS becomes the call's index. */
  env: NodeJS.ProcessEnv;
  stdin: string;
  n: number;
  /** Calls in flight at most. */
  width: number;
  /** Where each call's stdout is kept (file per index); a temporary directory if not given. */
  outDir?: string;
}

/** Runs `n` calls of `exe`, at most `width` at a time; results are in index order. */
export async function timeCalls(o: TimeCallsOptions): Promise<{ results: TimedCall[]; totalMs: number }> {
  const exe = compiled();
  const batch = join(workDir as string, `batch-${batches++}`);
  mkdirSync(batch);
  const outDir = o.outDir ?? join(batch, 'out');
  mkdirSync(outDir, { recursive: true });
  const stdinFile = join(batch, 'stdin');
  writeFileSync(stdinFile, o.stdin);
  try {
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(exe, [String(o.n), String(o.width), stdinFile, '--', o.exe, ...o.args], {
        env: { ...o.env, SPAWN_TIMER_OUT: outDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolve(out) : reject(new Error(`spawn-timer exited ${code}: ${err.trim()}`)),
      );
    });
    const results: TimedCall[] = new Array(o.n);
    let totalMs = NaN;
    for (const line of output.split('\n')) {
      const f = line.trim().split(' ');
      if (f[0] === 'total_us') totalMs = Number(f[1]) / 1000;
      else if (f.length === 3) {
        const i = Number(f[0]);
        let stdout = '';
        try {
          stdout = readFileSync(join(outDir, String(i)), 'utf8');
        } catch {
          // No file: the call produced nothing the driver could keep.
        }
        results[i] = { code: Number(f[1]), ms: Number(f[2]) / 1000, stdout };
      }
    }
    for (let i = 0; i < o.n; i++) if (results[i] === undefined) throw new Error(`spawn-timer: no result for call ${i}`);
    return { results, totalMs };
  } finally {
    rmSync(batch, { recursive: true, force: true });
  }
}
