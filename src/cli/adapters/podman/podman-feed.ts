/**
 * podman as an `EventFeed`: container lifecycle events from the podman CLI, and the listing of the
 * containers that exist. It follows `podman events --format json --filter type=container --since T`
 * as a child process and lists with `podman ps -a --format json`; every invocation gets the
 * configured binary and environment (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, …).
 *
 * Guarantees:
 * - Nothing falls between followers. The first follower starts `--since` the moment `start()` was
 *   called (so what happens while podman starts up is read back from its log); a follower that
 *   exits is restarted with backoff on the injected clock, `--since` the last line it read (less a
 *   second: lines of concurrent podman processes reach the log slightly out of order). Events from
 *   that overlap may come twice, in their original order; consumers treat them as idempotent.
 * - One bad line skips that line only: lines are decoded by podman-events.ts, which never throws;
 *   malformed lines are logged, others podman reports (image events, `start`, `cleanup`, …) are
 *   dropped quietly. A listener that throws is logged and the others still get the event.
 * - A listing is all or nothing (podman-list.ts).
 * - `close()` stops following: the follower's process group (it is started as a group leader, so a
 *   wrapper script goes too) gets SIGTERM, then SIGKILL after a grace on the clock; it resolves once
 *   the follower has exited. No restart is scheduled after close.
 * - Events carry no network namespace. podman creates a container's namespace at `init`, after the
 *   `create` event, and its cleanup (right after `died`, in tens of milliseconds) removes it, so
 *   `podman inspect` at either event finds none; Warren's release rule judges the namespace
 *   recorded at ADD instead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Logger } from 'pino';
import type { RuntimeEvent } from '../../../api/plugins/wire.ts';
import { type BackoffPolicy, ExponentialBackoff } from '../../../core/backoff.ts';
import { type CancelTimer, type Clock, systemClock } from '../../../core/clock.ts';
import { messageOf } from '../../../core/errors.ts';
import type { EventFeed } from '../plugin-server.ts';
import { decodePodmanEvent } from './podman-events.ts';
import { listPodmanContainers } from './podman-list.ts';

export interface PodmanFeedOptions {
  /** The podman binary. Default `podman` (found on PATH). */
  readonly podman?: string | undefined;
  /** The environment of every podman invocation. Default this process's. */
  readonly env?: NodeJS.ProcessEnv | undefined;
  readonly logger: Logger;
  /** Default the system clock. */
  readonly clock?: Clock;
  /** Between restarts of a follower that keeps exiting. Default 500 ms doubling to 30 s. */
  readonly backoff?: BackoffPolicy;
  /** How long `podman ps` may take. Default 30 s. */
  readonly listTimeoutMs?: number;
  /** Between SIGTERM and SIGKILL when a child is stopped. Default 2 s. */
  readonly killGraceMs?: number;
}

/** What the feed has done so far. */
export interface FeedCounts {
  /** `podman events` processes started. */
  readonly followers: number;
  /** Events delivered to listeners. */
  readonly events: number;
  /** Lines read and not acted on (other statuses and types). */
  readonly ignored: number;
  readonly malformed: number;
}

/** A follower that ran this long is healthy again: the next exit restarts after the first delay. */
const HEALTHY_RUN_MS = 60_000;
/** How far before the last line read a restarted follower starts (see the header). */
const REPLAY_MARGIN_MS = 1_000;
/** A line longer than this is not podman's; it is skipped up to its end. */
const MAX_LINE = 1 << 20;
/** How much of the follower's stderr is kept for the log. */
const STDERR_TAIL = 2_000;

/** `--since` as podman reads it: RFC 3339 in UTC, milliseconds (podman compares strictly after). */
export function sinceArgument(ms: number): string {
  return new Date(ms).toISOString();
}

export class PodmanFeed implements EventFeed {
  /** The options with their defaults applied, read by every invocation. */
  readonly #podman: string;
  readonly #env: NodeJS.ProcessEnv;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #backoff: BackoffPolicy;
  readonly #listTimeoutMs: number;
  readonly #killGraceMs: number;
  /** Who gets each event (one per open Watch stream). */
  readonly #listeners = new Set<(event: RuntimeEvent) => void>();
  /** Where the next follower starts reading (ms since the epoch). */
  #since: number | undefined;
  /** The running follower, if any. */
  #child: ChildProcess | undefined;
  /** Consecutive followers that exited without being healthy: the backoff's input. */
  #failures = 0;
  /** The pending restart of a follower. */
  #restart: CancelTimer | undefined;
  /** Set by close(): no follower starts or restarts after it. */
  #closed = false;
  /** Resolves when the follower running at close() has exited. */
  #closing: Promise<void> | undefined;
  /** For a status line in the log and for tests. */
  readonly #counts: { -readonly [K in keyof FeedCounts]: number } = {
    followers: 0,
    events: 0,
    ignored: 0,
    malformed: 0,
  };

  constructor(options: PodmanFeedOptions) {
    this.#podman = options.podman ?? 'podman';
    this.#env = options.env ?? process.env;
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#backoff = options.backoff ?? new ExponentialBackoff({ initialMs: 500, maxMs: 30_000 });
    this.#listTimeoutMs = options.listTimeoutMs ?? 30_000;
    this.#killGraceMs = options.killGraceMs ?? 2_000;
  }

  /** Starts following, from now. Idempotent; nothing after close(). */
  start(): void {
    if (this.#closed || this.#since !== undefined) return;
    this.#since = this.#clock.now();
    this.#follow();
  }

  /** Followers started, events delivered, lines ignored and malformed so far. */
  get counts(): FeedCounts {
    return { ...this.#counts };
  }

  /** The running follower's PID (for tests and logs). */
  get followerPid(): number | undefined {
    return this.#child?.pid;
  }

  subscribe(listener: (event: RuntimeEvent) => void): () => void {
    // A wrapper, so one listener subscribed twice gets two subscriptions.
    const entry = (event: RuntimeEvent): void => listener(event);
    this.#listeners.add(entry);
    return () => {
      this.#listeners.delete(entry);
    };
  }

  /** The full IDs of every container podman has (any state): see podman-list.ts. */
  list(): Promise<readonly string[]> {
    return listPodmanContainers({
      podman: this.#podman,
      env: this.#env,
      clock: this.#clock,
      timeoutMs: this.#listTimeoutMs,
    });
  }

  /** Stops following (see the header). Idempotent. */
  close(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    this.#closed = true;
    this.#restart?.();
    this.#restart = undefined;
    this.#listeners.clear();
    const child = this.#child;
    this.#closing = child === undefined ? Promise.resolve() : this.#stop(child);
    return this.#closing;
  }

  #follow(): void {
    this.#restart = undefined;
    if (this.#closed) return;
    const since = this.#since ?? this.#clock.now();
    const args = ['events', '--format', 'json', '--filter', 'type=container', '--since', sinceArgument(since)];
    const startedAt = this.#clock.monotonic();
    let linesRead = 0;
    let ended = false;
    let stderr = '';
    let child: ChildProcess;
    try {
      // A group leader, so close() can stop the whole group (a wrapper and the podman it runs).
      child = spawn(this.#podman, args, { env: this.#env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    } catch (error) {
      this.#followerEnded(`podman events could not start: ${messageOf(error)}`, false);
      return;
    }
    this.#child = child;
    this.#counts.followers += 1;
    this.#logger.info({ pid: child.pid, since: args.at(-1) }, 'following podman events');
    let partial = '';
    let skipping = false;
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (skipping) skipping = false;
        else if (line.trim() !== '') {
          linesRead += 1;
          this.#line(line);
        }
      }
      if (partial.length > MAX_LINE) {
        if (!skipping) this.#counts.malformed += 1;
        if (!skipping)
          this.#logger.warn({ length: partial.length }, 'podman events wrote an over-long line; skipping it');
        skipping = true;
        partial = '';
      }
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL);
    });
    const end = (how: string): void => {
      if (ended) return;
      ended = true;
      if (this.#child === child) this.#child = undefined;
      const tail = stderr.trim();
      const healthy = linesRead > 0 || this.#clock.monotonic() - startedAt >= HEALTHY_RUN_MS;
      this.#followerEnded(`podman events ${how}${tail === '' ? '' : `: ${tail}`}`, healthy);
    };
    child.once('error', (error) => end(`failed (${error.message})`));
    // 'close', not 'exit': every line written before the exit has been read by then.
    child.once('close', (code, signal) => end(signal !== null ? `killed by ${signal}` : `exited with ${code}`));
  }

  #line(line: string): void {
    const decoded = decodePodmanEvent(line);
    switch (decoded.kind) {
      case 'event':
        this.#advance(decoded.event.time);
        this.#counts.events += 1;
        this.#logger.debug({ event: decoded.event }, 'podman event');
        for (const listener of [...this.#listeners]) {
          try {
            listener(decoded.event);
          } catch (error) {
            this.#logger.error({ err: messageOf(error), event: decoded.event }, 'a podman event listener threw');
          }
        }
        break;
      case 'ignored':
        if (decoded.time !== undefined) this.#advance(decoded.time);
        this.#counts.ignored += 1;
        break;
      case 'malformed':
        this.#counts.malformed += 1;
        this.#logger.warn({ reason: decoded.reason }, 'skipping a malformed podman event');
        break;
      default: {
        const never: never = decoded;
        throw new Error(`unhandled decoding ${JSON.stringify(never)}`);
      }
    }
  }

  /** Moves where a restarted follower begins, never backwards. */
  #advance(time: number): void {
    const next = time - REPLAY_MARGIN_MS;
    if (this.#since === undefined || next > this.#since) this.#since = next;
  }

  #followerEnded(why: string, healthy: boolean): void {
    if (this.#closed) return;
    this.#failures = healthy ? 1 : this.#failures + 1;
    const delay = this.#backoff.delay(this.#failures);
    this.#logger.warn(
      { reason: why, restartInMs: delay, failures: this.#failures },
      'podman events stopped; restarting it',
    );
    this.#restart = this.#clock.setTimer(delay, () => this.#follow());
  }

  /** SIGTERM to the child's group, SIGKILL after the grace; resolves when it has exited. */
  #stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return Promise.resolve();
    const pid = child.pid;
    const exited = new Promise<void>((resolve) => {
      child.once('close', () => resolve());
      child.once('error', () => resolve());
    });
    const signalGroup = (sig: NodeJS.Signals): void => {
      try {
        process.kill(-pid, sig);
      } catch {
        child.kill(sig); // not a group leader after all, or already gone
      }
    };
    signalGroup('SIGTERM');
    const escalate = this.#clock.setTimer(this.#killGraceMs, () => signalGroup('SIGKILL'));
    return exited.finally(escalate);
  }
}
