/**
 * The agent: wires the store, the allocator, the release pipeline and its sources, the cluster
 * chores, the CNI service and the API server, and owns their lifecycle. start() is ready to serve
 * when it resolves; stop() stops accepting, lets in-flight calls finish (bounded), closes the
 * store and removes the socket. Nothing here decides anything: the layers below do.
 */
import { chmodSync, existsSync, mkdirSync, unlinkSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import type { Server } from 'node:http';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { CniService } from './cni-service.ts';
import { LiveTraffic, ROUNDS_BEFORE_SERVING, warmUp } from './warm-up.ts';
import { CniConfigManager, readinessProblem } from './cni-config-manager.ts';
import { DEFAULT_SOCKET } from '../api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../cni/journal-dir.ts';
import { Allocator } from '../allocator/allocator.ts';
import { SqliteStore } from '../store/sqlite-store.ts';
import type { Store } from '../store/store.ts';
import { createApiServer } from './api-server.ts';
import { ClusterUpkeep } from './cluster-upkeep.ts';
import { InstanceLock } from './instance-lock.ts';
import { RecentErrors } from './recent-errors.ts';
import { ReleaseWiring } from './release-wiring.ts';
import type { AgentOptions } from './options.ts';
import { AgentService } from './service.ts';
import { CommitHealth } from './commit-health.ts';
import { WARREN_VERSION } from './version.ts';
import { doctorFacts } from './doctor-facts.ts';
import { NetnsObserver } from '../sources/netns.ts';
import type { DashboardData } from '../api/dashboard.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import { renderDashboardBody, renderDashboardPage } from './dashboard/page.ts';
import { createMetricsServer, listenMetrics } from './metrics/http-server.ts';
import { MeasuredStore } from './metrics/measured-store.ts';
import { AgentMetrics } from './metrics/prometheus.ts';
import { poolFigures, setAsideCount } from './metrics/readings.ts';
import { ReleaseHistory } from './metrics/release-history.ts';
import { NO_TELEMETRY, fanOut } from './metrics/telemetry.ts';
import { type ListenAddress, formatListenAddress } from './listen-address.ts';

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
  /** Stops the sources, the reconcile pass, the cluster chores and the config manager. */
  #abort = new AbortController();
  /** Metrics and the dashboard, on their TCP address; undefined when off. */
  #metricsServer: Server | undefined;
  #metricsStatus: MetricsEndpointStatus | undefined;
  /** The warm-up running beside serving; stop() waits for it (it stops at the abort). */
  #warmingUp: Promise<void> | undefined;

  constructor(options: AgentOptions, deps: AgentDeps) {
    this.options = options;
    this.#logger = deps.logger;
    this.#clock = deps.clock ?? systemClock;
    this.#injectedStore = deps.store;
  }

  async start(): Promise<void> {
    const o = this.options;
    // Allocation state is the node's business alone: files and directories are owner-only.
    process.umask(0o077);
    mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
    // Everything that must have a single agent is locked before anything is touched: a refused
    // second agent leaves the first one's socket, database and journal alone.
    this.#lock = await InstanceLock.acquire([
      { what: 'state directory', path: o.stateDir },
      ...(this.#injectedStore === undefined && o.store === 'sqlite' ? [{ what: 'database', path: o.database }] : []),
      { what: 'socket', path: o.socket },
      // Two agents draining one journal would each remove intents the other is applying.
      { what: 'journal', path: o.journalDir },
    ]);
    try {
      const opened = this.#injectedStore ?? (await openStore(o, this.#clock));
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
      const telemetry = fanOut(history, metrics ?? NO_TELEMETRY);
      // Counting commits costs a clock read per commit: only when someone can read the figures.
      // Readiness follows the commits the allocator makes, not only the ping (commit-health.ts).
      const commits = new CommitHealth(this.#clock);
      const store = commits.watch(metrics === undefined ? opened : new MeasuredStore(opened, telemetry));
      this.#store = store;
      const clustered = store.membership !== undefined;
      const allocator = new Allocator({ store, clock: this.#clock, node: o.nodeName, blocks: clustered && o.blocks });
      const errors = new RecentErrors(this.#clock, this.#logger);
      if (store.membership !== undefined) {
        new ClusterUpkeep({
          membership: store.membership,
          allocator,
          clock: this.#clock,
          logger: this.#logger,
          errors,
          node: o.nodeName,
          version: WARREN_VERSION,
          intervalMs: o.upkeepIntervalSeconds * 1000,
          blockGraceMs: o.blockGraceSeconds * 1000,
        }).start(this.#abort.signal);
      }
      const releases = await ReleaseWiring.open(o, { store, allocator, clock: this.#clock, logger: this.#logger, errors, telemetry });
      this.#releases = releases;
      const { reconciler, containerd, kubernetes, plugins } = releases;
      const cniConfig = o.manageCniConfig ? this.#configManager() : undefined;
      this.#cniConfig = cniConfig;
      const notReady = (): string | undefined => readinessProblem(o.readinessIndicatorFile);
      // Set by #serveMetrics before the socket listens, so before anyone can ask.
      const metricsEndpoint = o.metricsAddress === undefined ? {} : { metrics: () => this.#metricsStatus as MetricsEndpointStatus };
      const service = new AgentService({
        store,
        allocator,
        clock: this.#clock,
        socket: o.socket,
        version: WARREN_VERSION,
        reconciler,
        ...(containerd === undefined ? {} : { containerd }),
        ...(kubernetes === undefined ? {} : { kubernetes }),
        notReady,
        commits,
        ...(cniConfig === undefined ? {} : { cniConfig: () => cniConfig.status() }),
        ...(plugins === undefined ? {} : { plugins }),
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
            ...(containerd === undefined ? {} : { containerd }),
            ...metricsEndpoint,
          }),
      });
      const cni = new CniService({
        allocator,
        readiness: () => service.readiness(),
        addGate: notReady,
        storeKind: clustered ? 'etcd' : 'sqlite',
        clock: this.#clock,
        gcGraceMs: o.gcGraceSeconds * 1000,
        beforeAdd: (owner) => releases.pipeline.settle(owner),
        onIgnoredKeys: (network, keys) =>
          this.#logger.warn({ network, keys }, `network ${network}: ignoring whereabouts keys that configure whereabouts itself (Warren keeps addresses in its agent's store)`),
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
        await this.#serveMetrics(o.metricsAddress, metrics, () => service.dashboard());
      }
      // The first few rounds before serving, the rest beside it (warm-up.ts).
      const beforeServing = Math.min(o.warmUpRounds, ROUNDS_BEFORE_SERVING);
      await this.#warmUp(beforeServing, 'warmed up before serving');
      await prepareSocket(o.socket);
      // Counting from the first request on: the warm-up gives way to real calls.
      const traffic = new LiveTraffic(this.#server);
      await listen(this.#server, o.socket);
      this.#socketIno = statSync(o.socket).ino;
      // Only now: a runtime that finds Warren's config calls the plugin, which must find the agent.
      cniConfig?.start(this.#abort.signal);
      // What the start cost, all threads (the bench reads it: issue 24 set a floor on it).
      const cpu = process.cpuUsage();
      this.#logger.info({ socket: o.socket, store: store.description, startCpuSeconds: (cpu.user + cpu.system) / 1e6, startSeconds: process.uptime() }, 'agent ready');
      this.#warmingUp = this.#warmUp(o.warmUpRounds - beforeServing, 'warmed up', traffic);
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Runs the ADD path on a throwaway store (warm-up.ts); a failure only costs speed. */
  async #warmUp(rounds: number, done: string, traffic?: LiveTraffic): Promise<void> {
    try {
      const report = await warmUp({ rounds, clock: this.#clock, node: this.options.nodeName, signal: this.#abort.signal, ...(traffic === undefined ? {} : { busy: () => traffic.busy() }) });
      if (report.calls > 0) this.#logger.info(report, done);
    } catch (error) {
      this.#logger.warn({ err: error }, 'warm-up failed; serving cold');
    }
  }

  /**
   * Metrics and the dashboard on their own TCP address. An address that cannot be bound (taken by
   * another process) is logged and reported in status and by `warren doctor`; the agent serves
   * CNI calls regardless: a node must not lose its IPAM over its metrics port.
   */
  async #serveMetrics(address: ListenAddress, metrics: AgentMetrics, dashboard: () => Promise<DashboardData>): Promise<void> {
    const server = createMetricsServer({
      exposition: async () => ({ contentType: metrics.contentType, text: await metrics.exposition() }),
      dashboard,
      page: (data) => renderDashboardPage(data),
      fragment: (data) => renderDashboardBody(data),
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
      this.#logger.error({ err: error, address: wanted }, 'metrics and dashboard not served: cannot listen on --metrics-address (pass another, or an empty one to turn them off)');
    }
  }

  #configManager(): CniConfigManager {
    const o = this.options;
    const socket = unlessDefault(o.socket, DEFAULT_SOCKET);
    const journalDir = unlessDefault(o.journalDir, DEFAULT_JOURNAL_DIR);
    return new CniConfigManager({
      confDir: o.cniConfDir,
      ...(o.primaryConfig === undefined ? {} : { primaryConfig: o.primaryConfig }),
      primaryWaitMs: o.primaryWaitSeconds * 1000,
      ...(o.readinessIndicatorFile === undefined ? {} : { readinessIndicator: o.readinessIndicatorFile }),
      cniVersionMax: o.cniVersionMax,
      cleanupOnExit: o.cleanupConfigOnExit,
      ...(socket === undefined ? {} : { socket }),
      ...(journalDir === undefined ? {} : { journalDir }),
      clock: this.#clock,
      logger: this.#logger,
    });
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#warmingUp;
    // Before the socket goes: with --cleanup-config-on-exit the runtime stops calling Warren first.
    await this.#cniConfig?.stopped();
    this.#cniConfig = undefined;
    const metricsServer = this.#metricsServer;
    this.#metricsServer = undefined;
    if (metricsServer !== undefined) {
      metricsServer.closeAllConnections();
      await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
    }
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), 10_000);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
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
    await this.#releases?.stopped();
    this.#releases = undefined;
    await this.#store?.close();
    this.#store = undefined;
    await this.#lock?.release();
    this.#lock = undefined;
  }
}

/** Plugin defaults need not be written into the config: the plugin finds them by itself. */
function unlessDefault(value: string, plugin: string): string | undefined {
  return value === plugin ? undefined : value;
}

async function openStore(o: AgentOptions, clock: Clock): Promise<Store> {
  if (o.store === 'sqlite') return new SqliteStore({ path: o.database, synchronous: o.synchronous, clock, busyTimeoutMs: o.dbBusyTimeoutSeconds * 1000 });
  const { EtcdStore } = await import('../store/etcd-store.ts');
  const tls = { ...(o.etcdCa === undefined ? {} : { ca: o.etcdCa }), ...(o.etcdCert === undefined ? {} : { cert: o.etcdCert }), ...(o.etcdKey === undefined ? {} : { key: o.etcdKey }) };
  return EtcdStore.open({
    endpoints: o.etcdEndpoints,
    prefix: o.etcdPrefix,
    leaseSeconds: Math.ceil(o.nodeLeaseSeconds),
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
