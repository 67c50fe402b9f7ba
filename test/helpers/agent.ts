/**
 * A real Warren agent in a child process, on its own state directory and socket. A start that
 * fails (the agent exits, never answers within HANG_BOUND_MS, or the wait throws) kills the agent
 * and waits until it is gone before throwing an error that says which, with the agent's log.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { requestJson } from '../../src/core/unix-http.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import {
  CHILD_PATH,
  HANG_BOUND_MS,
  REPO,
  WARREN_BIN,
  StopWaiting,
  isGone,
  tempDir,
  track,
  untilReady,
  waitFor,
} from './processes.ts';

export interface AgentHandle {
  readonly dir: string;
  readonly socket: string;
  readonly child: ChildProcess;
  readonly pid: number;
  log(): string;
  /** SIGTERM and wait for a clean exit; returns the exit code. A hang is killed and thrown. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait until the process is gone. */
  kill(): Promise<void>;
  /**
   * Waits for the agent to exit on its own (a failpoint's death: test/e2e/failpoints.test.ts) and
   * answers how; throws after `deadlineMs` (default HANG_BOUND_MS) while it still runs.
   */
  exited(deadlineMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  allocations(query?: string): Promise<Allocation[]>;
}

export interface AgentStart {
  /** Reuse a state directory (restart after a crash). */
  readonly dir?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly args?: readonly string[];
  /**
   * Leave --netns-dirs to the agent's default (the host's /run/netns and /var/run/netns) instead of
   * none. For tests of the default itself; the agent judges only its own allocations.
   */
  readonly defaultNetnsDirs?: boolean;
  /** How long the agent may take to answer before the start is a hang (default HANG_BOUND_MS). */
  readonly readyWithinMs?: number;
  /** The script run with the agent's flags instead of `bin/warren agent` (a benchmark's own build). */
  readonly entry?: readonly string[];
  /**
   * false: answer as soon as the agent is spawned, without waiting for it to answer /v1/status (an
   * agent armed to die as it starts, whose death the test awaits with `exited`). Default true.
   */
  readonly awaitReady?: boolean;
}

/**
 * A test's agent publishes every change at the next run and announces nothing, as agents did before
 * issue 36 (part 2): tests that read the published view wait seconds, not the settle interval, and
 * the addresses handed out after a restart are the ones they name. What publications announce, and
 * when covered changes are written, is tested on the fake API server (test/store/tiered/publish-ahead.test.ts);
 * a test of the defaults sets these in its `env`.
 */
const PUBLISH_AS_BEFORE = { WARREN_PUBLISH_SETTLE: '0', WARREN_PUBLISH_AHEAD: '0' };

export async function startAgent(options: AgentStart = {}): Promise<AgentHandle> {
  const dir = options.dir ?? tempDir('warren-agent-');
  const socket = join(dir, 'warren.sock');
  const args = options.args ?? [];
  // As root the journal's default is the system's /var/lib/warren/journal whatever --state-dir
  // says; a test's agent keeps its journal in its own directory unless the test names one.
  const namesJournal =
    args.some((a) => a === '--journal-dir' || a.startsWith('--journal-dir=')) ||
    options.env?.WARREN_JOURNAL_DIR !== undefined;
  const journal = namesJournal ? [] : ['--journal-dir', join(dir, 'journal')];
  const netns = options.defaultNetnsDirs === true ? [] : ['--netns-dirs', ''];
  const child = track(
    spawn(
      process.execPath,
      [
        ...(options.entry ?? [WARREN_BIN, 'agent']),
        '--state-dir',
        dir,
        '--socket',
        socket,
        '--node-name',
        'test-node',
        ...journal,
        ...netns,
        '--containerd',
        'off',
        ...args,
      ],
      {
        cwd: REPO,
        env: { ...process.env, PATH: CHILD_PATH, ...PUBLISH_AS_BEFORE, ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const exited = exit.then(({ code }) => code);
  const pid = child.pid as number;
  const handle: AgentHandle = {
    dir,
    socket,
    child,
    pid,
    log: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      // An agent wedged on SIGTERM is a failure to report, not a wait until the file times out.
      let timer: NodeJS.Timeout | undefined;
      const wedged = new Promise<'wedged'>((resolve) => (timer = setTimeout(() => resolve('wedged'), HANG_BOUND_MS)));
      const outcome = await Promise.race([exited, wedged]).finally(() => clearTimeout(timer));
      if (outcome !== 'wedged') return outcome;
      await handle.kill();
      throw new Error(
        `agent ${pid} did not exit within ${HANG_BOUND_MS} ms of SIGTERM (killed); its log:\n${excerpt(output)}`,
      );
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await waitFor(`agent ${pid} to die`, () => (isGone(pid) ? true : undefined));
      await exited;
    },
    async exited(deadlineMs = HANG_BOUND_MS) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), deadlineMs)));
      const outcome = await Promise.race([exit, late]).finally(() => clearTimeout(timer));
      if (outcome !== 'late') return outcome;
      throw new Error(`agent ${pid} still runs ${deadlineMs} ms later; its log:\n${excerpt(output)}`);
    },
    async allocations(query = '') {
      const r = await requestJson({ socket, method: 'GET', path: `/v1/allocations${query}` });
      return r.body as Allocation[];
    },
  };
  if (options.awaitReady === false) return handle;
  await untilReady(child, async () => {
    try {
      await waitFor(
        `agent ${pid} on ${socket} to answer /v1/status`,
        async () => {
          if (child.exitCode !== null || child.signalCode !== null)
            throw new AgentExited(child.exitCode ?? child.signalCode);
          const r = await requestJson({ socket, method: 'GET', path: '/v1/status', timeoutMs: 5_000 });
          return r.status === 200 ? true : undefined;
        },
        options.readyWithinMs ?? HANG_BOUND_MS,
      );
    } catch (error) {
      // The reason first (exited, or timed out), then what the agent said.
      const reason =
        error instanceof AgentExited ? error.message : String(error instanceof Error ? error.message : error);
      throw new Error(`the agent did not start: ${reason}; its log:\n${excerpt(output)}`, { cause: error });
    }
  });
  return handle;
}

/** The start of a log (where a start failure is said) and its end (what happened last). */
function excerpt(log: string): string {
  return log.length <= 6_000 ? log : `${log.slice(0, 3_000)}\n[…]\n${log.slice(-3_000)}`;
}

class AgentExited extends StopWaiting {
  constructor(code: number | string | null) {
    super(`agent exited (${code}) before answering`);
  }
}
