/**
 * The agent: wires the store, the allocator, the release pipeline and its sources, the cluster
 * chores, the CNI service and the API server, and owns their lifecycle. start() is ready to serve
 * when it resolves; when it rejects, everything it started is stopped (never a socket answering
 * with the rest gone). stop() stops accepting, lets in-flight calls finish (bounded), closes the
 * store and removes the socket, every step even if one fails. A part that fails after start
 * (a source's loop) resolves `failed`, for the runner to stop and exit non-zero; a part that can
 * fail alone (the CNI config manager) reports it in status instead. Nothing here decides
 * anything: the layers below do. What it knows of its store (its kind, whether nodes share it,
 * whether its file is the agent's own) comes from the options, never from the store object
 * (settings/store-kind.ts).
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { LiveTraffic, ROUNDS_BEFORE_SERVING, warmUp } from './server/warm-up.ts';
import { type CniConfigManager, readinessProblem } from './node/cni-config-manager.ts';
import { managedCniConfig } from './node/managed-config.ts';
import { HostLocalTakeover } from './node/host-local-takeover.ts';
import { NodeHandBack } from './node/hand-back.ts';
import { Allocator } from '../allocator/allocator.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import type { Store } from '../store/store.ts';
import { startUpkeep } from './cluster/upkeep.ts';
import { ClusterRecord } from './cluster/record.ts';
import { InstanceLock } from './settings/instance-lock.ts';
import {
  type StatedStore,
  type StoreFacts,
  clusterRecordKey,
  membershipOf,
  openStore,
  storeFacts,
} from './settings/store-kind.ts';
import { RecentErrors } from './metrics/recent-errors.ts';
import { ReleaseWiring } from './release-wiring.ts';
import type { AgentOptions } from './settings/options.ts';
import { CommitHealth } from './server/commit-health.ts';
import { servingParts } from './server/serving.ts';
import { type OwnSocket, closeServer, listenOnSocket } from './server/socket.ts';
import { WARREN_VERSION } from './server/version.ts';
import type { Allocation } from '../ipam/allocation.ts';
import { isBookkeeping } from '../ipam/bookkeeping.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import { DASHBOARD_ASSETS, renderDashboardBody, renderDashboardPage } from './dashboard/page.ts';
import { serveMetrics } from './metrics/http-server.ts';
import { MeasuredStore } from './metrics/measured-store.ts';
import { AgentMetrics } from './metrics/prometheus.ts';
import { agentReadings } from './metrics/readings.ts';
import { bookkeepingCounts } from './server/bookkeeping-counts.ts';
import { ReleaseHistory } from './metrics/release-history.ts';
import { NO_TELEMETRY, fanOut } from './metrics/telemetry.ts';
import { makeDirectory } from '../core/make-directory.ts';

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
  #store: Store | undefined;
  #server: Server | undefined;
  /** The socket this agent listens on; undefined until it does. */
  #socket: OwnSocket | undefined;
  #lock: InstanceLock | undefined;
  readonly #stated: StatedStore | undefined;
  readonly #blocks: boolean;
  /** What the options (or the stated store) say of the store; set by start(). */
  #facts: StoreFacts | undefined;
  /** The release pipeline and its sources. */
  #releases: ReleaseWiring | undefined;
  /** Keeps Warren's config in the CNI conf dir, when told to. */
  #cniConfig: CniConfigManager | undefined;
  /** `warren uninstall`: set once the node was handed back (now or before this start). */
  #handBack: NodeHandBack | undefined;
  /** Stops the sources, the reconcile pass, the cluster chores and the config manager. */
  #abort = new AbortController();
  /** Health, metrics and the dashboard, on their TCP address; undefined when off. */
  #metricsServer: Server | undefined;
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
    const o = this.options;
    const facts = storeFacts(o, this.#stated);
    this.#facts = facts;
    const { database } = facts;
    // Allocation state is the node's business alone: files and directories are owner-only.
    process.umask(0o077);
    makeDirectory(o.stateDir, 0o700);
    // A plugins directory that cannot be made now is a setting to fix, said at start; the watcher
    // would only keep retrying it (a directory removed later is made again there).
    if (o.pluginsDir !== undefined) makeDirectory(o.pluginsDir, 0o700);
    // Everything that must have a single agent is locked before anything is touched: a refused
    // second agent leaves the first one's socket, database and journal alone.
    this.#lock = InstanceLock.acquire([
      { what: 'state directory', path: o.stateDir },
      ...(database === undefined ? [] : [{ what: 'database' as const, path: database }]),
      { what: 'socket', path: o.socket },
      // Two agents draining one journal would each remove intents the other is applying.
      { what: 'journal', path: o.journalDir },
    ]);
    const clock = this.#clock;
    const logger = this.#logger;
    try {
      const warn = (message: string): void => logger.warn(message);
      // On a cluster store: which start of this agent last announced the node, and the store's identity then.
      const recordKey = clusterRecordKey({ ...o, store: facts.kind });
      const record = recordKey === undefined ? undefined : new ClusterRecord(o.stateDir, recordKey, warn);
      const identity = record?.identity;
      const { store: opened, published } =
        this.#stated ?? (await openStore(o, { clock, notice: warn, ...(identity === undefined ? {} : { identity }) }));
      const history = new ReleaseHistory(clock);
      // Readings are taken from the parts made below, when a scrape asks.
      const metrics =
        o.metricsAddress === undefined
          ? undefined
          : new AgentMetrics({
              version: WARREN_VERSION,
              readings: agentReadings({
                node: o.nodeName,
                pools: () => service.pools(),
                // This node's allocations tell borrowed blocks apart; a store of one node has none.
                ownAllocations: facts.shared ? () => opened.list({ node: o.nodeName }) : undefined,
                pendingJournal: () => releases.reconciler.status().pending.length,
                journalDir: o.journalDir,
                queueDepth: () => releases.pipeline.queueDepth(),
                readiness: () => service.readiness(),
                bookkeeping: () => bookkeepingCounts(opened),
                warrenPools: () => releases.kubernetes?.().planning?.pools?.list ?? [],
                ...(facts.shared
                  ? {
                      cluster: () => ({
                        halted: membership?.halted() !== undefined,
                        recovering: membership?.recovery() !== undefined,
                      }),
                    }
                  : {}),
              }),
            });
      const handBack = new NodeHandBack(o.stateDir, clock);
      this.#handBack = handBack;
      // Built before the allocator exists, told of it below: releases must reach it (hand-back).
      let takeover: HostLocalTakeover | undefined;
      const takeoverTelemetry = {
        ...NO_TELEMETRY,
        released: (_source: unknown, allocations: readonly Allocation[]) => {
          takeover?.released(allocations);
          // A reserved address released: its reservation's status stops listing it soon.
          this.#releases?.reservations?.released(allocations);
        },
      };
      const telemetry = fanOut(history, metrics ?? NO_TELEMETRY, takeoverTelemetry);
      // Counting commits costs a clock read per commit: only when someone can read the figures.
      // Readiness follows the commits the allocator makes, not only the ping (server/commit-health.ts).
      const commits = new CommitHealth(clock);
      const store = commits.watch(metrics === undefined ? opened : new MeasuredStore(opened, telemetry));
      this.#store = store;
      const membership = membershipOf(store, facts);
      const blocks = facts.shared && this.#blocks;
      // Cluster-wide reservations (ipam/reserved.ts): filled by their watch when Kubernetes is on.
      const reserved = new ReservedAddresses();
      const allocator = new Allocator({ store, clock, node: o.nodeName, blocks, reserved });
      const errors = new RecentErrors(clock, logger);
      const clusterDeps = { allocator, clock, logger, errors, version: WARREN_VERSION, record };
      // Before serving: a second agent with this node's name is refused here (ALREADY_RUNNING).
      const upkeep =
        membership === undefined ? undefined : await startUpkeep(o, { ...clusterDeps, membership }, this.#abort.signal);
      const onFailure = (error: Error): void => this.#fail(error);
      const wiringDeps = { store, membership, allocator, clock, logger, errors, telemetry, onFailure, reserved };
      const releases = await ReleaseWiring.open(o, wiringDeps);
      this.#releases = releases;
      if (o.manageCniConfig || handBack.reason() !== undefined) {
        takeover = new HostLocalTakeover({ allocator, store, node: o.nodeName, clock, logger });
        const handedBack = handBack.reason();
        if (handedBack !== undefined) takeover.restoreHandedBack(handedBack, handBack.targets());
        takeover.start(this.#abort.signal);
      }
      const configDeps = { store, takeover, handedBack: handBack.reason(), clock, logger };
      const cniConfig = o.manageCniConfig ? managedCniConfig(o, configDeps) : undefined;
      this.#cniConfig = cniConfig;
      const notReady = (): string | undefined =>
        handBack.reason() ?? readinessProblem(o.readinessIndicatorFile) ?? upkeep?.problem();
      const { service, server } = servingParts({
        options: o,
        storeKind: facts.kind,
        store,
        membership,
        allocator,
        clock,
        logger,
        version: WARREN_VERSION,
        reconciler: releases.reconciler,
        containerd: releases.containerd,
        kubernetes: releases.kubernetes,
        plugins: releases.plugins,
        notReady,
        addGate: (network) => notReady() ?? takeover?.gate(network),
        // A store of this node alone, on a node of a cluster: only node-local configs (cni/node-local.ts).
        ...(o.kubernetes && !facts.shared ? { nodeLocalOnly: () => cniConfig?.nodeLocal() } : {}),
        beforeAdd: (owner, podUID) => releases.pipeline.applyPending(owner, podUID),
        runtimeOf: (a) => releases.scopes.adapterOf(a),
        planners: releases.planners,
        reservations: releases.reservations === undefined ? undefined : () => releases.reservations?.objects() ?? [],
        afterAdd: releases.afterAdd,
        commits,
        published,
        ...(upkeep === undefined
          ? {}
          : {
              cluster: {
                problem: () => upkeep.problem(),
                // What accept wrote went through: the commits that failed on the lost store say nothing now.
                accept: () =>
                  upkeep.accept().then((report) => {
                    commits.committed();
                    return report;
                  }),
              },
            }),
        ...(cniConfig === undefined ? {} : { cniConfig: () => cniConfig.status() }),
        // Without the config manager (beside Multus, under systemd) the configs naming Warren are
        // the operator's: the node is handed back all the same, and the report says how many
        // addresses pods still hold, whose DELs still call the plugin (the CLI keeps it for them).
        uninstall: async () => {
          const held = (await store.list({ node: o.nodeName })).filter((a) => !isBookkeeping(a)).length;
          return handBack.uninstall(takeover, cniConfig, held);
        },
        telemetry,
        history,
        // Set before the socket listens, so before anyone can ask.
        ...(o.metricsAddress === undefined ? {} : { metrics: () => this.#metricsStatus as MetricsEndpointStatus }),
      });
      this.#server = server;
      if (o.kubernetes && !facts.shared)
        logger.warn(
          { store: facts.kind },
          "this node's own store under Kubernetes: only node-local configs are served (node_local, or the one " +
            "derived from the node's pod CIDR); others are refused (README, Stores)",
        );
      releases.start(this.#abort.signal);
      if (metrics !== undefined && o.metricsAddress !== undefined) {
        const served = await serveMetrics(
          {
            exposition: async () => ({ contentType: metrics.contentType, text: await metrics.exposition() }),
            dashboard: () => service.dashboard(),
            page: (data) => renderDashboardPage(data),
            fragment: (data) => renderDashboardBody(data),
            assets: DASHBOARD_ASSETS,
            // The probes' answers (liveness: the event loop turns; readiness: an ADD can commit now).
            readiness: () =>
              this.#serving ? service.readiness() : Promise.reject(new WarrenError('NOT_READY', NOT_SERVING)),
            onError: (error, path) => logger.error({ err: error, path }, 'metrics request failed'),
          },
          o.metricsAddress,
          logger,
        );
        this.#metricsServer = served.server;
        this.#metricsStatus = served.status;
      }
      // The first few rounds before serving, the rest beside it (server/warm-up.ts).
      const beforeServing = Math.min(o.warmUpRounds, ROUNDS_BEFORE_SERVING);
      await this.#warmUp(beforeServing, 'warmed up before serving');
      // Counting from the first request on: the warm-up gives way to real calls.
      const traffic = new LiveTraffic(server);
      this.#socket = await listenOnSocket(server, o.socket);
      this.#serving = true;
      // Only now: a runtime that finds Warren's config calls the plugin, which must find the agent.
      cniConfig?.start(this.#abort.signal);
      // What the start cost, all threads (the bench reads it: issue 24 set a floor on it).
      const cpu = process.cpuUsage();
      const startCpuSeconds = (cpu.user + cpu.system) / 1e6;
      const startSeconds = process.uptime();
      logger.info({ socket: o.socket, store: store.description, startCpuSeconds, startSeconds }, 'agent ready');
      this.#warmingUp = this.#warmUp(o.warmUpRounds - beforeServing, 'warmed up', traffic);
    } catch (error) {
      // Everything started so far is stopped, whatever else fails meanwhile: a start that failed
      // never leaves a socket answering while the rest is gone.
      const stopFailed = (err: unknown): void => logger.error({ err }, 'stopping after a failed start failed');
      await this.stop().catch(stopFailed);
      throw error;
    }
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
   * first failure.
   */
  async stop(): Promise<void> {
    this.#serving = false;
    const failures: unknown[] = [];
    const step = async (what: string, run: () => Promise<void> | void): Promise<void> => {
      try {
        await run();
      } catch (error) {
        this.#logger.error({ err: error }, `stopping: ${what} failed`);
        failures.push(error);
      }
    };
    this.#abort.abort();
    await this.#warmingUp;
    // Before the socket goes: with --cleanup-config-on-exit the runtime stops calling Warren first.
    const cniConfig = this.#cniConfig;
    this.#cniConfig = undefined;
    await step('the CNI config manager', () => cniConfig?.stopped());
    const metricsServer = this.#metricsServer;
    this.#metricsServer = undefined;
    if (metricsServer !== undefined) {
      await step('the metrics server', async () => {
        metricsServer.closeAllConnections();
        await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
      });
    }
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) await step('the API server', () => closeServer(server));
    // Only the socket this agent created, and only if it is still that one: never another agent's.
    this.#socket?.remove();
    this.#socket = undefined;
    const releases = this.#releases;
    this.#releases = undefined;
    await step('the release sources', () => releases?.stopped());
    const store = this.#store;
    this.#store = undefined;
    await step('the store', () => store?.close());
    // A node handed back keeps nothing of Warren's but the mark (node/hand-back.ts); its lock files
    // go while they are still held, so no agent can take a lock on a file about to vanish.
    const handBack = this.#handBack;
    this.#handBack = undefined;
    const database = this.#facts?.database;
    if (handBack?.reason() !== undefined) {
      await step('removing the handed-back state', () =>
        handBack.removeState({ ...(database === undefined ? {} : { database }), journalDir: this.options.journalDir }),
      );
    }
    const lock = this.#lock;
    this.#lock = undefined;
    await step('the instance lock', () => lock?.release());
    if (failures.length > 0) throw failures[0];
  }
}

const NOT_SERVING = 'the agent is not serving CNI calls yet (starting) or any more (stopping)';
