/**
 * The agent: wires the store, the allocator, the release pipeline and its sources, the cluster
 * chores, the CNI service and the API server, and owns their lifecycle. start() is ready to serve
 * when it resolves; when it rejects, everything it started is stopped (never a socket answering
 * with the rest gone). stop() stops accepting, lets in-flight calls finish (bounded), closes the
 * store and removes the socket, every step even if one fails. A part that fails after start
 * (a source's loop) resolves `failed`, for the runner to stop and exit non-zero; a part that can
 * fail alone (the CNI config manager) reports it in status instead. Nothing here decides
 * anything: the layers below do.
 */
import { chmodSync, existsSync, mkdirSync, unlinkSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import type { Server } from 'node:http';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { CniService } from './server/cni-service.ts';
import { LiveTraffic, ROUNDS_BEFORE_SERVING, warmUp } from './server/warm-up.ts';
import { CniConfigManager, readinessProblem } from './node/cni-config-manager.ts';
import { HostLocalTakeover } from './node/host-local-takeover.ts';
import { NodeHandBack } from './node/hand-back.ts';
import { DEFAULT_SOCKET } from '../api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../cni/journal-dir.ts';
import { Allocator } from '../allocator/allocator.ts';
import { SqliteStore } from '../store/sqlite-store.ts';
import type { Store } from '../store/store.ts';
import { createApiServer } from './server/api-server.ts';
import { ClusterUpkeep } from './cluster/upkeep.ts';
import { ClusterRecord } from './cluster/record.ts';
import { InstanceLock } from './settings/instance-lock.ts';
import { RecentErrors } from './metrics/recent-errors.ts';
import { ReleaseWiring } from './release-wiring.ts';
import type { AgentOptions } from './settings/options.ts';
import { AgentService } from './server/operator-service.ts';
import { CommitHealth } from './server/commit-health.ts';
import { WARREN_VERSION } from './server/version.ts';
import { doctorFacts } from './server/doctor-facts.ts';
import { NetnsObserver } from '../sources/netns.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import { DASHBOARD_ASSETS, renderDashboardBody, renderDashboardPage } from './dashboard/page.ts';
import { createMetricsServer, listenMetrics } from './metrics/http-server.ts';
import { MeasuredStore } from './metrics/measured-store.ts';
import { AgentMetrics } from './metrics/prometheus.ts';
import { poolFigures, setAsideCount } from './metrics/readings.ts';
import { ReleaseHistory } from './metrics/release-history.ts';
import { NO_TELEMETRY, fanOut } from './metrics/telemetry.ts';
import { type ListenAddress, formatListenAddress } from './settings/listen-address.ts';

export interface AgentDeps {
  readonly clock?: Clock;
  readonly logger: Logger;
  /** A store to use instead of opening the SQLite database (tests, other backends). */
  readonly store?: Store;
}

export class Agent {
  readonly options: AgentOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  #store: Store | undefined;
  #server: Server | undefined;
  /** Inode of the socket file this agent created; undefined until it listens. */
  #socketIno: number | undefined;
  #lock: InstanceLock | undefined;
  #injectedStore: Store | undefined;
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
    this.#injectedStore = deps.store;
    this.failed = new Promise<Error>((resolve) => {
      this.#fail = (error) => {
        this.#fail = () => undefined;
        resolve(error);
      };
    });
  }

  async start(): Promise<void> {
    const o = this.options;
    // Allocation state is the node's business alone: files and directories are owner-only.
    process.umask(0o077);
    mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
    // Everything that must have a single agent is locked before anything is touched: a refused
    // second agent leaves the first one's socket, database and journal alone.
    this.#lock = InstanceLock.acquire([
      { what: 'state directory', path: o.stateDir },
      ...(this.#injectedStore === undefined && o.store === 'sqlite' ? [{ what: 'database' as const, path: o.database }] : []),
      { what: 'socket', path: o.socket },
      // Two agents draining one journal would each remove intents the other is applying.
      { what: 'journal', path: o.journalDir },
    ]);
    try {
      // On etcd: which start of this agent last announced the node, and the store's identity then.
      const record = o.store === 'etcd' ? new ClusterRecord(o.stateDir, o.etcdPrefix, (message) => this.#logger.warn(message)) : undefined;
      const opened = this.#injectedStore ?? (await openStore(o, this.#clock, record, (message) => this.#logger.warn(message)));
      const history = new ReleaseHistory(this.#clock);
      // Readings are taken from the parts made below, when a scrape asks.
      const metrics =
        o.metricsAddress === undefined
          ? undefined
          : new AgentMetrics({
              version: WARREN_VERSION,
              readings: {
                // This node's allocations tell borrowed blocks apart; a store of one node has none.
                pools: async () => {
                  const clustered = opened.membership !== undefined;
                  return poolFigures(await service.pools(), clustered ? await opened.list({ node: o.nodeName }) : [], o.nodeName, clustered);
                },
                journal: () => ({ pending: releases.reconciler.status().pending.length, setAside: setAsideCount(o.journalDir) }),
                queueDepth: () => releases.pipeline.queueDepth(),
                ready: () => service.readiness().then(() => true, () => false),
              },
            });
      const handBack = new NodeHandBack(o.stateDir, this.#clock);
      this.#handBack = handBack;
      // Built before the allocator exists, told of it below: releases must reach it (hand-back).
      let takeover: HostLocalTakeover | undefined;
      const takeoverTelemetry = { ...NO_TELEMETRY, released: (_source: unknown, allocations: readonly Allocation[]) => takeover?.released(allocations) };
      const telemetry = fanOut(history, metrics ?? NO_TELEMETRY, takeoverTelemetry);
      // Counting commits costs a clock read per commit: only when someone can read the figures.
      // Readiness follows the commits the allocator makes, not only the ping (server/commit-health.ts).
      const commits = new CommitHealth(this.#clock);
      const store = commits.watch(metrics === undefined ? opened : new MeasuredStore(opened, telemetry));
      this.#store = store;
      const clustered = store.membership !== undefined;
      const allocator = new Allocator({ store, clock: this.#clock, node: o.nodeName, blocks: clustered && o.blocks });
      const errors = new RecentErrors(this.#clock, this.#logger);
      const membership = store.membership;
      const upkeep =
        membership === undefined
          ? undefined
          : new ClusterUpkeep({
          membership,
          allocator,
          clock: this.#clock,
          logger: this.#logger,
          errors,
          node: o.nodeName,
          version: WARREN_VERSION,
          ...(record === undefined ? {} : { instance: record.instance, onAnnounced: () => record.recordIdentity(membership.identity()) }),
          intervalMs: o.upkeepIntervalSeconds * 1000,
          blockGraceMs: o.blockGraceSeconds * 1000,
        });
      if (upkeep !== undefined) {
        // Before serving: a second agent with this node's name is refused here (ALREADY_RUNNING).
        record?.recordInstance();
        await upkeep.announceFirst();
        upkeep.start(this.#abort.signal);
      }
      const releases = await ReleaseWiring.open(o, { store, allocator, clock: this.#clock, logger: this.#logger, errors, telemetry, onFailure: (error) => this.#fail(error) });
      this.#releases = releases;
      const { reconciler, containerd, kubernetes, plugins } = releases;
      if (o.manageCniConfig || handBack.reason() !== undefined) {
        takeover = new HostLocalTakeover({ allocator, store, node: o.nodeName, clock: this.#clock, logger: this.#logger });
        const handedBack = handBack.reason();
        if (handedBack !== undefined) takeover.restoreHandedBack(handedBack, handBack.targets());
        takeover.start(this.#abort.signal);
      }
      const cniConfig = o.manageCniConfig ? this.#configManager(store, takeover, handBack.reason()) : undefined;
      this.#cniConfig = cniConfig;
      const clusterProblem = upkeep === undefined ? undefined : () => upkeep.problem();
      const notReady = (): string | undefined => handBack.reason() ?? readinessProblem(o.readinessIndicatorFile) ?? clusterProblem?.();
      // Set by #serveMetrics before the socket listens, so before anyone can ask.
      const metricsEndpoint = o.metricsAddress === undefined ? {} : { metrics: () => this.#metricsStatus as MetricsEndpointStatus };
      const service = new AgentService({
        store,
        allocator,
        clock: this.#clock,
        socket: o.socket,
        version: WARREN_VERSION,
        reconciler,
        containerd,
        kubernetes,
        notReady,
        commits,
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
        plugins,
        // Without the config manager nothing would remove the config naming Warren: refusing ADD
        // for good would then fail every pod start on the node.
        uninstall: async () => {
          if (cniConfig === undefined) throw new WarrenError('BAD_REQUEST', "this agent does not manage the node's CNI config (--manage-cni-config off): there is no " + "config of its own to hand back; remove the config that names warren, then the plugin");
          return handBack.uninstall(takeover, cniConfig);
        },
        telemetry,
        history,
        ...metricsEndpoint,
        doctor: () =>
          doctorFacts({
            options: o,
            store,
            observer: new NetnsObserver(o.netnsDirs),
            clock: this.#clock,
            version: WARREN_VERSION,
            containerd,
            ...(cniConfig === undefined ? {} : { cniConfig: () => cniConfig.status() }),
            ...metricsEndpoint,
            ...(upkeep === undefined ? {} : { clusterProblem: () => upkeep.problem() }),
          }),
      });
      const cni = new CniService({
        allocator,
        readiness: () => service.readiness(),
        addGate: (network) => notReady() ?? takeover?.gate(network),
        storeKind: clustered ? 'etcd' : 'sqlite',
        clock: this.#clock,
        gcGraceMs: o.gcGraceSeconds * 1000,
        beforeAdd: (owner, podUID) => releases.pipeline.settle(owner, podUID),
        runtimeOf: (a) => releases.pipeline.adapterOf(a),
        onIgnoredKeys: (network, keys) =>
          this.#logger.warn({ network, keys }, `network ${network}: ignoring whereabouts keys that configure whereabouts itself (Warren keeps ` + `addresses in its agent's store)`),
        onFailure: (error, command) => this.#logger.error({ err: error, command }, 'CNI call failed'),
        telemetry,
      });
      releases.start(this.#abort.signal);
      this.#server = createApiServer({
        cni,
        service,
        onError: (error, route) => this.#logger.error({ err: error, route }, 'request failed'),
      });
      if (metrics !== undefined && o.metricsAddress !== undefined) {
        await this.#serveMetrics(o.metricsAddress, metrics, service);
      }
      // The first few rounds before serving, the rest beside it (server/warm-up.ts).
      const beforeServing = Math.min(o.warmUpRounds, ROUNDS_BEFORE_SERVING);
      await this.#warmUp(beforeServing, 'warmed up before serving');
      await prepareSocket(o.socket);
      // Counting from the first request on: the warm-up gives way to real calls.
      const traffic = new LiveTraffic(this.#server);
      await listen(this.#server, o.socket);
      this.#socketIno = statSync(o.socket).ino;
      this.#serving = true;
      // Only now: a runtime that finds Warren's config calls the plugin, which must find the agent.
      cniConfig?.start(this.#abort.signal);
      // What the start cost, all threads (the bench reads it: issue 24 set a floor on it).
      const cpu = process.cpuUsage();
      this.#logger.info({ socket: o.socket, store: store.description, startCpuSeconds: (cpu.user + cpu.system) / 1e6, startSeconds: process.uptime() }, 'agent ready');
      this.#warmingUp = this.#warmUp(o.warmUpRounds - beforeServing, 'warmed up', traffic);
    } catch (error) {
      // Everything started so far is stopped, whatever else fails meanwhile: a start that failed
      // never leaves a socket answering while the rest is gone.
      await this.stop().catch((stopError: unknown) => this.#logger.error({ err: stopError }, 'stopping after a failed start failed'));
      throw error;
    }
  }

  /** Runs the ADD path on a throwaway store (server/warm-up.ts); a failure only costs speed. */
  async #warmUp(rounds: number, done: string, traffic?: LiveTraffic): Promise<void> {
    try {
      const report = await warmUp({ rounds, clock: this.#clock, node: this.options.nodeName, signal: this.#abort.signal, ...(traffic === undefined ? {} : { busy: () => traffic.busy() }) });
      if (report.calls > 0) this.#logger.info(report, done);
    } catch (error) {
      this.#logger.warn({ err: error }, 'warm-up failed; serving cold');
    }
  }

  /**
   * Health, metrics and the dashboard on their own TCP address. An address that cannot be bound (taken by
   * another process) is logged and reported in status and by `warren doctor`; the agent serves
   * CNI calls regardless: a node must not lose its IPAM over its metrics port.
   */
  async #serveMetrics(address: ListenAddress, metrics: AgentMetrics, service: AgentService): Promise<void> {
    const server = createMetricsServer({
      exposition: async () => ({ contentType: metrics.contentType, text: await metrics.exposition() }),
      dashboard: () => service.dashboard(),
      page: (data) => renderDashboardPage(data),
      fragment: (data) => renderDashboardBody(data),
      assets: DASHBOARD_ASSETS,
      // The probes' answers (liveness: the event loop turns; readiness: an ADD can commit now).
      readiness: () => (this.#serving ? service.readiness() : Promise.reject(new WarrenError('NOT_READY', 'the agent is not serving CNI calls yet (starting) or any more (stopping)'))),
      hostNames: [address.host],
      onError: (error, path) => this.#logger.error({ err: error, path }, 'metrics request failed'),
    });
    try {
      const bound = await listenMetrics(server, address);
      this.#metricsServer = server;
      this.#metricsStatus = { address: bound };
      this.#logger.info({ address: bound }, 'metrics and dashboard served');
    } catch (error) {
      const wanted = formatListenAddress(address);
      this.#metricsStatus = { address: wanted, error: `cannot listen on ${wanted}: ${messageOf(error)}` };
      this.#logger.error({ err: error, address: wanted }, 'metrics and dashboard not served: cannot listen on --metrics-address (pass another, or an empty one ' + 'to turn them off)');
    }
  }

  #configManager(store: Store, takeover: HostLocalTakeover | undefined, handedBack: string | undefined): CniConfigManager {
    const o = this.options;
    const socket = unlessDefault(o.socket, DEFAULT_SOCKET);
    const journalDir = unlessDefault(o.journalDir, DEFAULT_JOURNAL_DIR);
    return new CniConfigManager({
      confDir: o.cniConfDir,
      primaryConfig: o.primaryConfig,
      primaryWaitMs: o.primaryWaitSeconds * 1000,
      readinessIndicator: o.readinessIndicatorFile,
      cniVersionMax: o.cniVersionMax,
      cleanupOnExit: o.cleanupConfigOnExit,
      holdsAddresses: async (network) => (await store.list({ network, node: o.nodeName })).length > 0,
      takeover,
      handedBack,
      socket,
      journalDir,
      clock: this.#clock,
      logger: this.#logger,
    });
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
    if (server !== undefined) {
      await step('the API server', () =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => server.closeAllConnections(), 10_000);
          server.close(() => {
            clearTimeout(timer);
            resolve();
          });
          server.closeIdleConnections();
        }),
      );
    }
    // Only the socket this agent created, and only if it is still that one: never another agent's.
    if (this.#socketIno !== undefined) {
      try {
        if (statSync(this.options.socket).ino === this.#socketIno) unlinkSync(this.options.socket);
      } catch {
        // gone already
      }
      this.#socketIno = undefined;
    }
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
    if (handBack?.reason() !== undefined) {
      const ownDatabase = this.#injectedStore === undefined && this.options.store === 'sqlite';
      await step('removing the handed-back state', () =>
        handBack.removeState({ ...(ownDatabase ? { database: this.options.database } : {}), journalDir: this.options.journalDir }),
      );
    }
    const lock = this.#lock;
    this.#lock = undefined;
    await step('the instance lock', () => lock?.release());
    if (failures.length > 0) throw failures[0];
  }
}

/** Plugin defaults need not be written into the config: the plugin finds them by itself. */
function unlessDefault(value: string, plugin: string): string | undefined {
  return value === plugin ? undefined : value;
}

async function openStore(o: AgentOptions, clock: Clock, record: ClusterRecord | undefined, notice: (message: string) => void): Promise<Store> {
  if (o.store === 'sqlite') return new SqliteStore({ path: o.database, synchronous: o.synchronous, clock, busyTimeoutMs: o.dbBusyTimeoutSeconds * 1000 });
  const { EtcdStore } = await import('../store/etcd-store.ts');
  const tls = { ...(o.etcdCa === undefined ? {} : { ca: o.etcdCa }), ...(o.etcdCert === undefined ? {} : { cert: o.etcdCert }), ...(o.etcdKey === undefined ? {} : { key: o.etcdKey }) };
  return EtcdStore.open({
    endpoints: o.etcdEndpoints,
    prefix: o.etcdPrefix,
    leaseSeconds: Math.ceil(o.nodeLeaseSeconds),
    notice,
    ...(record?.identity === undefined ? {} : { identity: record.identity }),
    ...(Object.keys(tls).length === 0 ? {} : { tls }),
  });
}

/** Creates the socket's directory; refuses when a live agent answers there; clears a stale socket. */
async function prepareSocket(path: string): Promise<void> {
  const dir = dirname(path);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!existsSync(path)) return;
  if (!statSync(path).isSocket()) throw new WarrenError('IO_FAILURE', `${path} exists and is not a socket; refusing to replace it`);
  const live = await new Promise<boolean>((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
  if (live) throw new WarrenError('ALREADY_RUNNING', `an agent already answers on ${path}`);
  unlinkSync(path);
}

function listen(server: Server, path: string): Promise<void> {
  // The socket is created 0600 (umask) so there is no instant at which others could connect.
  const previous = process.umask(0o177);
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  }).finally(() => {
    process.umask(previous);
    if (existsSync(path)) chmodSync(path, 0o600);
  });
}
