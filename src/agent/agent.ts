/**
 * The agent's lifecycle: start() is ready to serve when it resolves; when it rejects, everything it
 * started is stopped (never a socket answering with the rest gone). stop() stops accepting, lets
 * in-flight calls finish (bounded), closes the store and removes the socket, every step even if one
 * fails (held-parts.ts). A part that fails after start (a source's loop) resolves `failed`, for the
 * runner to stop and exit non-zero; a part that can fail alone (the CNI config manager) reports it
 * in status instead. Nothing here decides anything: the layers below do. What it knows of its store
 * (its kind, whether nodes share it, whether its file is the agent's own) comes from the options,
 * never from the store object (settings/store-kind.ts).
 * start() runs four steps: lock the state, open the base (base-wiring.ts: the store and what stands
 * on it) and start the cluster's upkeep, build the release, Kubernetes and serving sides side by
 * side on it (sides-wiring.ts: none builds another), serve. stop() undoes them from the socket
 * inwards.
 */
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { makeDirectory } from '../core/make-directory.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import type { Allocation } from '../ipam/allocation.ts';
import { type Base, openBase } from './base-wiring.ts';
import { startUpkeep } from './cluster/upkeep.ts';
import { type HeldParts, stopHeldParts } from './held-parts.ts';
import { NO_TELEMETRY, type Telemetry } from './metrics/telemetry.ts';
import { type Built, buildSides } from './sides-wiring.ts';
import { listenOnSocket } from './server/socket.ts';
import { WARREN_VERSION } from './server/version.ts';
import { LiveTraffic, ROUNDS_BEFORE_SERVING, warmUp } from './server/warm-up.ts';
import { serveMetricsEndpoint } from './serving-wiring.ts';
import { InstanceLock } from './settings/instance-lock.ts';
import type { AgentOptions } from './settings/options.ts';
import { type StatedStore, type StoreFacts, storeFacts } from './settings/store-kind.ts';

export interface AgentDeps {
  readonly clock?: Clock;
  readonly logger: Logger;
  /**
   * A store to use instead of the one the options name (tests, other backends), with its kind
   * stated: the agent never asks a store what it is (settings/store-kind.ts).
   */
  readonly store?: StatedStore;
  /**
   * Whether a cluster store's ranges are split into blocks with node affinity (default: yes). No
   * keeps a range in one key, as whereabouts does, so every node contends on it: for the cluster
   * benchmark's comparison only, so no flag or variable reaches it.
   */
  readonly blocks?: boolean;
}

export class Agent {
  readonly options: AgentOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  /** What stop() must undo, each set the moment it exists (held-parts.ts). */
  readonly #held: HeldParts = {};
  readonly #stated: StatedStore | undefined;
  readonly #blocks: boolean;
  /** What the options (or the stated store) say of the store; set by start(). */
  #facts: StoreFacts | undefined;
  /** Stops the sources, the reconcile pass, the cluster chores and the config manager. */
  #abort = new AbortController();
  #metricsStatus: MetricsEndpointStatus | undefined;
  /** Whether the CNI socket is served: /readyz says ready only then (not while starting or stopping). */
  #serving = false;
  /** Resolves `failed` once, with the first failure of a part the agent cannot serve without. */
  #fail: (error: Error) => void = () => undefined;
  /**
   * Resolves when a part the agent cannot serve without failed after start (a source's loop, the
   * plugin watcher): whoever runs the agent stops it and exits non-zero, rather than leave it
   * answering ADD and saying ready with a release path gone. Never rejects.
   */
  readonly failed: Promise<Error>;
  /** The warm-up running beside serving; stop() waits for it (it stops at the abort). */
  #warmingUp: Promise<void> | undefined;
  /** What start built (step 3), set once: the metrics and release telemetry read it. */
  #built: Built | undefined;

  constructor(options: AgentOptions, deps: AgentDeps) {
    this.options = options;
    this.#logger = deps.logger;
    this.#clock = deps.clock ?? systemClock;
    this.#blocks = deps.blocks ?? true;
    this.#stated = deps.store;
    this.failed = new Promise<Error>((resolve) => {
      this.#fail = (error) => {
        this.#fail = () => undefined;
        resolve(error);
      };
    });
  }

  async start(): Promise<void> {
    const facts = storeFacts(this.options, this.#stated);
    this.#facts = facts;
    this.#lockState(facts);
    try {
      const base = await this.#openBase(facts);
      const built = await this.#buildSides(base);
      await this.#serve(built);
    } catch (error) {
      // Everything started so far is stopped, whatever else fails meanwhile: a start that failed
      // never leaves a socket answering while the rest is gone.
      const stopFailed = (err: unknown): void => this.#logger.error({ err }, 'stopping after a failed start failed');
      await this.stop().catch(stopFailed);
      throw error;
    }
  }

  /** Step 1: the state directory made, and everything that must have a single agent locked. */
  #lockState({ database }: StoreFacts): void {
    const o = this.options;
    // Allocation state is the node's business alone: files and directories are owner-only.
    process.umask(0o077);
    makeDirectory(o.stateDir, 0o700);
    // A plugins directory that cannot be made now is a setting to fix, said at start; the watcher
    // would only keep retrying it (a directory removed later is made again there).
    if (o.pluginsDir !== undefined) makeDirectory(o.pluginsDir, 0o700);
    // Everything that must have a single agent is locked before anything is touched: a refused
    // second agent leaves the first one's socket, database and journal alone.
    this.#held.lock = InstanceLock.acquire([
      { what: 'state directory', path: o.stateDir },
      ...(database === undefined ? [] : [{ what: 'database' as const, path: database }]),
      { what: 'socket', path: o.socket },
      // Two agents draining one journal would each remove intents the other is applying.
      { what: 'journal', path: o.journalDir },
    ]);
  }

  /**
   * Step 2: the base (base-wiring.ts: the store, measured when metrics are on and watched for
   * commit health, the allocator on it) and, on a cluster store, the upkeep: a second agent with
   * this node's name is refused here (ALREADY_RUNNING), before anything serves.
   */
  async #openBase(facts: StoreFacts): Promise<Base> {
    const o = this.options;
    const clock = this.#clock;
    const logger = this.#logger;
    const { record, ...base } = await openBase(o, facts, {
      clock,
      logger,
      stated: this.#stated,
      blocks: this.#blocks,
      sides: () => this.#parts(),
      released: this.#releasedTelemetry(),
    });
    // Held before the upkeep starts: a refused start closes the store (stop()).
    this.#held.handBack = base.handBack;
    this.#held.store = base.store;
    const { allocator, errors, membership } = base;
    const clusterDeps = { allocator, clock, logger, errors, version: WARREN_VERSION, record };
    const upkeep =
      membership === undefined ? undefined : await startUpkeep(o, { ...clusterDeps, membership }, this.#abort.signal);
    return { ...base, upkeep };
  }

  /**
   * Step 3: the release, Kubernetes and serving sides, side by side on the base (the Kubernetes
   * side fed into the release pipeline), and the node's takeover and CNI config manager; the
   * takeover runs from here on, the rest is started by the next step.
   */
  async #buildSides(base: Base): Promise<Built> {
    const o = this.options;
    this.#built = await buildSides(o, base, {
      clock: this.#clock,
      logger: this.#logger,
      signal: this.#abort.signal,
      onFailure: (error) => this.#fail(error),
      // Set before the socket listens, so before anyone can ask.
      metricsStatus: o.metricsAddress === undefined ? undefined : () => this.#metricsStatus as MetricsEndpointStatus,
      hold: this.#held,
    });
    return this.#built;
  }

  /**
   * Step 4: the sources started, the metrics endpoint served, the first warm-up rounds run, then
   * the CNI socket served and only then the CNI config written; the rest of the warm-up beside.
   */
  async #serve(built: Built): Promise<void> {
    const o = this.options;
    const { facts, releases, metrics, service, server, cniConfig } = built;
    const logger = this.#logger;
    if (o.kubernetes && !facts.shared)
      logger.warn(
        { store: facts.kind },
        "this node's own store under Kubernetes: only node-local configs are served (node_local, or the one " +
          "derived from the node's pod CIDR); others are refused (README, Stores)",
      );
    releases.start(this.#abort.signal);
    if (metrics !== undefined && o.metricsAddress !== undefined) {
      const served = await serveMetricsEndpoint(o.metricsAddress, metrics, service, () => this.#serving, logger);
      this.#held.metricsServer = served.server;
      this.#metricsStatus = served.status;
    }
    // The first few rounds before serving, the rest beside it (server/warm-up.ts).
    const beforeServing = Math.min(o.warmUpRounds, ROUNDS_BEFORE_SERVING);
    await this.#warmUp(beforeServing, 'warmed up before serving');
    // Counting from the first request on: the warm-up gives way to real calls.
    const traffic = new LiveTraffic(server);
    this.#held.socket = await listenOnSocket(server, o.socket);
    this.#serving = true;
    // Only now: a runtime that finds Warren's config calls the plugin, which must find the agent.
    cniConfig?.start(this.#abort.signal);
    // What the start cost, all threads (the bench reads it: issue 24 set a floor on it).
    const cpu = process.cpuUsage();
    const startCpuSeconds = (cpu.user + cpu.system) / 1e6;
    const startSeconds = process.uptime();
    logger.info({ socket: o.socket, store: built.store.description, startCpuSeconds, startSeconds }, 'agent ready');
    this.#warmingUp = this.#warmUp(o.warmUpRounds - beforeServing, 'warmed up', traffic);
  }

  /** Released addresses, told to the parts that keep something of them once start built them. */
  #releasedTelemetry(): Telemetry {
    return {
      ...NO_TELEMETRY,
      released: (_source: unknown, allocations: readonly Allocation[]) => {
        // Releases reach the takeover (hand-back).
        this.#built?.takeover?.released(allocations);
        // A reserved address released: its reservation's status stops listing it soon.
        this.#built?.kubernetes?.addressesReleased(allocations);
      },
    };
  }

  /** What start built; a part read before it is not ready (the metrics read it only when scraped). */
  #parts(): Built {
    if (this.#built === undefined) throw new WarrenError('NOT_READY', 'the agent is still starting');
    return this.#built;
  }

  /** Runs the ADD path on a throwaway store (server/warm-up.ts); a failure only costs speed. */
  async #warmUp(rounds: number, done: string, traffic?: LiveTraffic): Promise<void> {
    try {
      const report = await warmUp({
        rounds,
        clock: this.#clock,
        node: this.options.nodeName,
        signal: this.#abort.signal,
        ...(traffic === undefined ? {} : { busy: () => traffic.busy() }),
      });
      if (report.calls > 0) this.#logger.info(report, done);
    } catch (error) {
      this.#logger.warn({ err: error }, 'warm-up failed; serving cold');
    }
  }

  /**
   * Stops every part, each step even when one before it failed (a part that throws while stopping
   * must not leave the socket served, the store open or the lock held); rejects afterwards with the
   * first failure (held-parts.ts); the sources, chores and warm-up are stopped by the abort first.
   */
  async stop(): Promise<void> {
    this.#serving = false;
    this.#abort.abort();
    await this.#warmingUp;
    const database = this.#facts?.database;
    await stopHeldParts(this.#held, { database, journalDir: this.options.journalDir }, this.#logger);
  }
}
