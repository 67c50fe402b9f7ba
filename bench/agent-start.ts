/**
 * Agent start to serving, and the first calls after it. An agent is spawned as `bin/warren agent`
 * (what `npm start`, the image and the tests run: the bundle when it is built) on a fresh state
 * directory, and its socket is polled until GET /v1/status answers 200; at that moment its CPU
 * time is read (utime + stime of all its threads, /proc/PID/stat) and the wall time since the
 * spawn. Then, with `adds`, 200 sequential ADDs through the installed forwarder, at once: their
 * slowest is what the warm-up exists for (the first calls of a fresh agent used to be its slowest;
 * 200 calls support no p99, so the tail quoted is their maximum, with n: bench/stats.ts).
 * Figures are medians over the starts; the agent is stopped before the next start.
 *
 * Alone: node bench/agent-start.ts [--starts N] [--adds] [--json] [-- agent flags]
 * (run under load with scripts/cpu-hog.sh run 8 -- node bench/agent-start.ts ...)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { requestJson } from '../src/core/unix-http.ts';
import { INSTALLED, install } from '../src/cli/install.ts';
import { CHILD_PATH, REPO, WARREN_BIN, removeDir, tempDir, track } from '../test/helpers/processes.ts';
import { cpuModel, loadavg, machineLine } from './machine.ts';
import { timeCalls } from './spawn-timer.ts';
import { type Tail, quantile, tail } from './stats.ts';

export interface StartFigure {
  /** CPU seconds the agent had used when its socket first answered. */
  readonly cpuSeconds: number;
  /** Seconds from the spawn to the first answer. */
  readonly wallSeconds: number;
  /**
   * The agent's own CPU seconds when it began to listen ("agent ready" log line): the start alone,
   * without what it did (the warm-up, beside serving) while this poll waited for its turn on a
   * loaded machine. NaN when the agent does not log it (before issue 24).
   */
  readonly cpuAtListen: number;
  /**
   * The tail (p99 if the calls support it, else the maximum: bench/stats.ts) and median ms of the
   * first sequential ADDs after it answered, when asked for.
   */
  readonly adds?: { readonly tail: Tail; readonly median: number; readonly failures: number };
}

export interface StartSummary {
  readonly starts: number;
  readonly cpu: number;
  readonly cpuAtListen: number;
  readonly wall: number;
  /** Median over the starts of each start's ADD tail (its label and n: addTailLabel) and median. */
  readonly addTail?: number;
  readonly addTailLabel?: string;
  readonly addMedian?: number;
  readonly addFailures?: number;
  readonly all: readonly StartFigure[];
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux
const FIRST_ADDS = 200;

/** utime + stime of the whole process (all threads), in seconds. */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses: fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** One start of an agent with `args`: spawn to the first answer of its socket; then the ADDs. */
export async function measureStart(args: readonly string[], forwarder: string | undefined): Promise<StartFigure> {
  const dir = tempDir('bench-agent-start-');
  const socket = join(dir, 'warren.sock');
  const started = performance.now();
  const child = track(
    spawn(
      process.execPath,
      [
        WARREN_BIN,
        'agent',
        '--state-dir',
        dir,
        '--socket',
        socket,
        '--journal-dir',
        join(dir, 'journal'),
        '--node-name',
        'bench',
        '--netns-dirs',
        '',
        '--containerd',
        'off',
        '--metrics-address',
        '127.0.0.1:0',
        ...args,
      ],
      {
        cwd: REPO,
        env: { ...process.env, PATH: CHILD_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let stderr = '';
  let stdout = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pid = child.pid as number;
  try {
    let figure: StartFigure | undefined;
    while (figure === undefined) {
      if (child.exitCode !== null) throw new Error(`agent exited with ${child.exitCode}: ${stderr}`);
      const answered = await requestJson({ socket, method: 'GET', path: '/v1/status', timeoutMs: 5_000 }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (answered)
        figure = { cpuSeconds: cpuSecondsOf(pid), wallSeconds: (performance.now() - started) / 1000, cpuAtListen: NaN };
      else if (performance.now() - started > 120_000) throw new Error(`agent did not answer within 120 s: ${stderr}`);
      // A short pause between attempts: the poll must not take the CPU the agent needs.
      else await new Promise((resolve) => setTimeout(resolve, 2));
    }
    // The log line is written before the socket answers; its pipe may deliver it a moment later.
    const deadline = performance.now() + 5_000;
    while (!stdout.includes('"agent ready"') && performance.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 5));
    const ready = stdout.split('\n').find((line) => line.includes('"agent ready"'));
    figure = {
      ...figure,
      cpuAtListen: Number((JSON.parse(ready ?? '{}') as { startCpuSeconds?: number }).startCpuSeconds ?? NaN),
    };
    if (forwarder === undefined) return figure;
    const config = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'bench',
      ipam: { type: 'warren', socket, range: '10.230.0.0/16' },
    });
    const env = {
      PATH: CHILD_PATH,
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'first-%i',
      CNI_NETNS: '/var/run/netns/first-%i',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    };
    const { results } = await timeCalls({ exe: forwarder, args: [], env, stdin: config, n: FIRST_ADDS, width: 1 });
    const ms = results.map((r) => r.ms);
    const failures = results.filter((r) => r.code !== 0).length;
    return { ...figure, adds: { tail: tail(ms, 0.99), median: quantile(ms, 0.5), failures } };
  } finally {
    child.kill('SIGTERM');
    await exited;
    removeDir(dir);
  }
}

/** `starts` starts one after another (ADDs through `forwarder` after each, when given). */
export async function startToServing(
  starts: number,
  args: readonly string[] = [],
  forwarder?: string,
): Promise<StartSummary> {
  const all: StartFigure[] = [];
  for (let i = 0; i < starts; i++) all.push(await measureStart(args, forwarder));
  const adds = all.flatMap((f) => (f.adds === undefined ? [] : [f.adds]));
  return {
    starts,
    cpu: quantile(
      all.map((f) => f.cpuSeconds),
      0.5,
    ),
    cpuAtListen: quantile(
      all.map((f) => f.cpuAtListen),
      0.5,
    ),
    wall: quantile(
      all.map((f) => f.wallSeconds),
      0.5,
    ),
    ...(adds.length === 0
      ? {}
      : {
          addTail: quantile(
            adds.map((a) => a.tail.value),
            0.5,
          ),
          addTailLabel: `${adds[0]?.tail.label} of ${adds[0]?.tail.n}`,
          addMedian: quantile(
            adds.map((a) => a.median),
            0.5,
          ),
          addFailures: adds.reduce((n, a) => n + a.failures, 0),
        }),
    all,
  };
}

/** The forwarder installed as on a node (linking this Node), in a directory removed at exit. */
export function installedForwarder(): string {
  const binDir = mkdtempSync(join(tmpdir(), 'bench-start-bin-'));
  process.once('exit', () => rmSync(binDir, { recursive: true, force: true }));
  install({ cniBinDir: binDir, link: true });
  return join(binDir, INSTALLED.forwarder);
}

/** One line per summary, as the bench prints it. */
export function describeStarts(label: string, s: StartSummary): string {
  const adds =
    s.addTail === undefined
      ? ''
      : `; then ${FIRST_ADDS} sequential ADDs: ${s.addTailLabel} ${s.addTail.toFixed(1)} ms, ` +
        `median ${s.addMedian?.toFixed(2)} ms, ${s.addFailures} failed`;
  // NaN (JSON: null) when the agent does not log its start's CPU (before issue 24).
  const atListen =
    typeof s.cpuAtListen === 'number' && Number.isFinite(s.cpuAtListen) ? `${s.cpuAtListen.toFixed(2)} s` : 'n/a';
  return `${label.padEnd(26)} CPU ${s.cpu.toFixed(2)} s (${atListen} when it listened), wall ${s.wall.toFixed(2)} s (medians of ${s.starts})${adds}`;
}

if (process.argv[1] === import.meta.filename) {
  const dash = process.argv.indexOf('--');
  const { values } = parseArgs({
    args: process.argv.slice(2, dash === -1 ? undefined : dash),
    options: {
      starts: { type: 'string', default: '5' },
      adds: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const args = dash === -1 ? [] : process.argv.slice(dash + 1);
  const loadBefore = loadavg();
  const summary = await startToServing(Number(values.starts), args, values.adds ? installedForwarder() : undefined);
  if (values.json) console.log(JSON.stringify({ ...summary, cpuModel: cpuModel(), loadBefore, loadavg: loadavg() }));
  else {
    console.log(describeStarts(args.join(' ') || 'default flags', summary));
    const tailOf = (f: StartFigure): string => (f.adds === undefined ? '' : `/${f.adds.tail.value.toFixed(1)}`);
    const each = summary.all.map((f) => `${f.cpuSeconds.toFixed(2)}/${f.wallSeconds.toFixed(2)}${tailOf(f)}`);
    const heading = `CPU/wall s${summary.addTail === undefined ? '' : `/ADD ${summary.addTailLabel} ms`}`;
    console.log(`  each (${heading}): ${each.join(' ')}`);
    console.log(`  load ${loadBefore} → ${loadavg()}; ${machineLine()}`);
  }
}
