/**
 * The agent: opens the store and the allocator, builds the release, Kubernetes and serving sides
 * beside each other on them (release-wiring.ts, kubernetes-wiring.ts, serving-wiring.ts: none
 * builds another), and owns their lifecycle. start() is ready to serve when it resolves; when it
 * rejects, everything it started is stopped (never a socket answering with the rest gone). stop()
 * stops accepting, lets in-flight calls finish (bounded), closes the store and removes the socket,
 * every step even if one fails. A part that fails after start (a source's loop) resolves `failed`,
 * for the runner to stop and exit non-zero; a part that can fail alone (the CNI config manager)
 * reports it in status instead. Nothing here decides anything: the layers below do. What it knows
 * of its store (its kind, whether nodes share it, whether its file is the agent's own) comes from
 * the options, never from the store object (settings/store-kind.ts).
 * start() runs four steps: lock the state, open the store (the upkeep included), build the sides,
 * serve. stop() undoes them from the socket inwards.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { LiveTraffic, ROUNDS_BEFORE_SERVING, warmUp } from './server/warm-up.ts';
import type { CniConfigManager } from './node/cni-config-manager.ts';
import { managedCniConfig, managedTakeover } from './node/managed-config.ts';
import type { HostLocalTakeover } from './node/host-local-takeover.ts';
import { NodeHandBack } from './node/hand-back.ts';
import { Allocator } from '../allocator/allocator.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import type { Membership, Store } from '../store/store.ts';
import { type ClusterUpkeep, startUpkeep } from './cluster/upkeep.ts';
import { ClusterRecord } from './cluster/record.ts';
import { InstanceLock } from './settings/instance-lock.ts';
import {
  type OpenedStore,
  type StatedStore,
  type StoreFacts,
  clusterRecordKey,
  membershipOf,
  openStore,
  storeFacts,
} from './settings/store-kind.ts';
import { RecentErrors } from './metrics/recent-errors.ts';
import { ReleaseWiring } from './release-wiring.ts';
import type { KubernetesParts } from './kubernetes-parts.ts';
import { scrapeReadings, serveMetricsEndpoint, servingSide } from './serving-wiring.ts';
import type { AgentOptions } from './settings/options.ts';
import { CommitHealth } from './server/commit-health.ts';
import type { AgentService } from './server/operator-service.ts';
import { type OwnSocket, closeServer, listenOnSocket } from './server/socket.ts';
import { WARREN_VERSION } from './server/version.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import { MeasuredStore } from './metrics/measured-store.ts';
import { AgentMetrics } from './metrics/prometheus.ts';
import { ReleaseHistory } from './metrics/release-history.ts';
import { NO_TELEMETRY, type Telemetry, fanOut } from './metrics/telemetry.ts';
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
      const base = await this.#openStore(facts);
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
    this.#lock = InstanceLock.acquire([
      { what: 'state directory', path: o.stateDir },
      ...(database === undefined ? [] : [{ what: 'database' as const, path: database }]),
      { what: 'socket', path: o.socket },
      // Two agents draining one journal would each remove intents the other is applying.
      { what: 'journal', path: o.journalDir },
    ]);
  }

  /**
   * Step 2: the store (measured when metrics are on, watched for commit health), the allocator on
   * it and, on a cluster store, the upkeep: a second agent with this node's name is refused here
   * (ALREADY_RUNNING), before anything serves.
   */
  async #openStore(facts: StoreFacts): Promise<Base> {
    const o = this.options;
    const clock = this.#clock;
    const logger = this.#logger;
    const warn = (message: string): void => logger.warn(message);
    // On a cluster store: which start of this agent last announced the node, and the store's identity then.
    const recordKey = clusterRecordKey({ ...o, store: facts.kind });
    const record = recordKey === undefined ? undefined : new ClusterRecord(o.stateDir, recordKey, warn);
    const identity = record?.identity;
    const { store: opened, published } =
      this.#stated ?? (await openStore(o, { clock, notice: warn, ...(identity === undefined ? {} : { identity }) }));
    const history = new ReleaseHistory(clock);
    // Readings are taken from the parts the next step builds, when a scrape asks.
    const metrics =
      o.metricsAddress === undefined
        ? undefined
        : new AgentMetrics({
            version: WARREN_VERSION,
            readings: scrapeReadings(o, facts, opened, () => this.#parts()),
          });
    const handBack = new NodeHandBack(o.stateDir, clock);
    this.#handBack = handBack;
    const telemetry = fanOut(history, metrics ?? NO_TELEMETRY, this.#releasedTelemetry());
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
    const upkeep =
      membership === undefined ? undefined : await startUpkeep(o, { ...clusterDeps, membership }, this.#abort.signal);
    const base = { facts, store, published, membership, allocator, reserved, errors, telemetry, commits, history };
    return { ...base, metrics, handBack, upkeep };
  }

  /**
   * Step 3: the release, Kubernetes and serving sides, side by side on the base (the Kubernetes
   * side fed into the release pipeline), and the node's takeover and CNI config manager; the
   * takeover runs from here on, the rest is started by the next step.
   */
  async #buildSides(base: Base): Promise<Built> {
    const o = this.options;
    const { store, membership, allocator, reserved, telemetry, handBack } = base;
    const clock = this.#clock;
    const logger = this.#logger;
    const onFailure = (error: Error): void => this.#fail(error);
    // @kubernetes/client-node costs an agent start more CPU than all the rest: loaded only when on.
    const [releases, kubernetesWiring] = await Promise.all([
      ReleaseWiring.open(o, { store, membership, allocator, clock, logger, errors: base.errors, telemetry, onFailure }),
      o.kubernetes ? import('./kubernetes-wiring.ts') : undefined,
    ]);
    const kubernetesDeps = { store, membership, allocator, clock, logger, telemetry, reserved };
    const kubernetes = kubernetesWiring?.kubernetesParts(o, kubernetesDeps, releases.pipeline);
    if (kubernetes !== undefined) releases.feedFrom(kubernetes);
    this.#releases = releases;
    const takeover = managedTakeover(o, handBack, { allocator, store, clock, logger }, this.#abort.signal);
    const configDeps = { store, takeover, handedBack: handBack.reason(), clock, logger };
    const cniConfig = o.manageCniConfig ? managedCniConfig(o, configDeps) : undefined;
    this.#cniConfig = cniConfig;
    const sides = { releases, kubernetes, takeover, cniConfig };
    // Set before the socket listens, so before anyone can ask.
    const metricsStatus =
      o.metricsAddress === undefined ? undefined : () => this.#metricsStatus as MetricsEndpointStatus;
    const serving = { ...base, ...sides, options: o, clock, logger, metricsStatus };
    const { service, server } = servingSide(serving);
    this.#server = server;
    this.#built = { ...base, ...sides, service, server };
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

/** What step 2 opens: the store and what stands on it. */
interface Base {
  readonly facts: StoreFacts;
  readonly store: Store;
  readonly published: OpenedStore['published'];
  readonly membership: Membership | undefined;
  readonly allocator: Allocator;
  readonly reserved: ReservedAddresses;
  readonly errors: RecentErrors;
  readonly telemetry: Telemetry;
  readonly commits: CommitHealth;
  readonly history: ReleaseHistory;
  readonly metrics: AgentMetrics | undefined;
  readonly handBack: NodeHandBack;
  readonly upkeep: ClusterUpkeep | undefined;
}

/** What step 3 builds on the base: the sides, side by side. */
interface Built extends Base {
  readonly releases: ReleaseWiring;
  readonly kubernetes: KubernetesParts | undefined;
  readonly takeover: HostLocalTakeover | undefined;
  readonly cniConfig: CniConfigManager | undefined;
  readonly service: AgentService;
  readonly server: Server;
}
