/**
 * The agent: wires the store, the allocator, the CNI handler and the API server, and owns their
 * lifecycle. start() is ready to serve when it resolves; stop() stops accepting, lets in-flight
 * calls finish (bounded), closes the store and removes the socket. Nothing here decides anything:
 * the layers below do.
 */
import { chmodSync, existsSync, mkdirSync, unlinkSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import type { Server } from 'node:http';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { CniHandler } from '../cni/handler.ts';
import { Allocator } from '../store/allocator.ts';
import { SqliteStore } from '../store/sqlite-store.ts';
import type { Membership, Store } from '../store/store.ts';
import { ExponentialBackoff } from '../core/backoff.ts';
import { MissedDeleteJournal } from '../sources/missed-delete-journal.ts';
import { NetnsObserver } from '../sources/netns.ts';
import { ContainerdEventSource } from '../sources/containerd/event-source.ts';
import { DirectoryWatcher } from '../core/dir-watcher.ts';
import { ContainerReleases } from './container-releases.ts';
import { createApiServer } from './api-server.ts';
import { ReleaseReconciler } from './release-reconciler.ts';
import { InstanceLock } from './instance-lock.ts';
import type { AgentOptions } from './options.ts';
import { AgentService } from './service.ts';

export const WARREN_VERSION = '0.1.0';

export interface AgentDeps {
  readonly clock?: Clock;
  readonly logger: Logger;
  /** A store to use instead of opening the SQLite database (tests, other backends). */
  readonly store?: Store;
}

type Upkeep = { readonly name: string; readonly run: () => Promise<void> };
type ContainerdParts = { readonly source: ContainerdEventSource; readonly releases: ContainerReleases };

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
  #reconciler: ReleaseReconciler | undefined;
  /** Stops the reconciler and the journal watch. */
  #abort = new AbortController();
  #consuming: Promise<void> | undefined;
  #announced = false;
  #containerd: ContainerdParts | undefined;
  /** Loops that run until the abort signal: the containerd source, netns directory watches. */
  #background: Array<Promise<void>> = [];

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
      const store = this.#injectedStore ?? (await openStore(o, this.#clock));
      this.#store = store;
      const clustered = store.membership !== undefined;
      const allocator = new Allocator({ store, clock: this.#clock, node: o.nodeName, blocks: clustered && o.blocks });
      const upkeep = store.membership === undefined ? [] : this.#clusterUpkeep(store.membership, allocator);
      const journal = new MissedDeleteJournal({ dir: o.journalDir, clock: this.#clock });
      const observer = new NetnsObserver(o.netnsDirs);
      journal.prepare();
      const reconciler = new ReleaseReconciler({
        allocator,
        store,
        journal,
        observer,
        clock: this.#clock,
        backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
        logger: this.#logger,
        intervalMs: o.reconcileIntervalSeconds * 1000,
        netnsGraceMs: o.netnsGraceSeconds * 1000,
        releaseGoneNetns: o.netnsDirs.length > 0,
        ...(clustered ? { onlyNode: o.nodeName } : {}),
        upkeep,
      });
      this.#reconciler = reconciler;
      const containerd = o.containerd ? this.#startContainerd(store, allocator, observer, upkeep) : undefined;
      const service = new AgentService({
        store,
        allocator,
        clock: this.#clock,
        socket: o.socket,
        version: WARREN_VERSION,
        reconciler,
        ...(containerd === undefined ? {} : { containerd: () => ({ ...containerd.source.status(), releases: containerd.releases.status() }) }),
      });
      const cni = new CniHandler({
        allocator,
        readiness: () => service.readiness(),
        storeKind: clustered ? 'etcd' : 'sqlite',
        clock: this.#clock,
        gcGraceMs: o.gcGraceSeconds * 1000,
        beforeAdd: (owner) => reconciler.settle(owner),
        onIgnoredKeys: (network, keys) =>
          this.#logger.warn({ network, keys }, `network ${network}: ignoring whereabouts keys that configure whereabouts itself (Warren keeps addresses in its agent's store)`),
      });
      this.#consuming = reconciler.start(this.#abort.signal);
      this.#server = createApiServer({
        cni,
        service,
        onError: (error, route) => this.#logger.error({ err: error, route }, 'request failed'),
      });
      await prepareSocket(o.socket);
      await listen(this.#server, o.socket);
      this.#socketIno = statSync(o.socket).ino;
      this.#logger.info({ socket: o.socket, store: store.description }, 'agent ready');
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Cluster store: announce this node (without holding up serving) and give back empty blocks. */
  #clusterUpkeep(membership: Membership, allocator: Allocator): Upkeep[] {
    const o = this.options;
    let announcing: Promise<void> | undefined;
    const announce = (): Promise<void> =>
      (announcing ??= membership
        .announce(o.nodeName, { since: this.#clock.now(), version: WARREN_VERSION })
        .then(() => {
          this.#announced = true;
        })
        .finally(() => {
          announcing = undefined;
        }));
    // An etcd without a leader answers lease calls late: serve at once, and if the announcement
    // fails, upkeep makes it on a later tick.
    void announce().catch((error: unknown) => this.#logger.warn({ err: error }, 'could not announce this node yet; will retry'));
    return [
      {
        name: 'node announcement',
        run: async () => {
          if (announcing !== undefined) return; // the first announcement is still under way
          if (!this.#announced) await announce();
          else await membership.renew();
        },
      },
      {
        name: 'giving back empty blocks',
        run: async () => {
          const outcome = await allocator.returnEmptyBlocks(o.blockGraceSeconds * 1000);
          if (outcome.returned.length > 0) this.#logger.info({ blocks: outcome.returned }, 'gave back empty blocks');
          if (outcome.errors.length > 0) throw new Error(outcome.errors.join('; '));
        },
      },
    ];
  }

  /** containerd's events, through the per-container queue; exited containers checked on each tick. */
  #startContainerd(store: Store, allocator: Allocator, observer: NetnsObserver, upkeep: Upkeep[]): ContainerdParts {
    const o = this.options;
    const logger = this.#logger.child({ source: 'containerd' });
    const releases = new ContainerReleases({
      allocator,
      store,
      observer,
      clock: this.#clock,
      backoff: new ExponentialBackoff({ initialMs: o.eventRetrySeconds * 1000, maxMs: o.eventRetryMaxSeconds * 1000 }),
      logger,
      node: o.nodeName,
      resyncGraceMs: o.containerdGraceSeconds * 1000,
    });
    const source = new ContainerdEventSource({
      socket: o.containerdSocket,
      namespaces: o.containerdNamespaces,
      clock: this.#clock,
      backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 }),
      logger,
      onEvent: (event) => releases.onEvent(event),
      onSubscribed: (live) => releases.resync(live),
    });
    this.#containerd = { source, releases };
    upkeep.push({ name: 'exited containers', run: async () => releases.checkExited() });
    this.#background.push(source.run(this.#abort.signal));
    // A namespace file disappearing is the moment an exited container's address becomes free.
    for (const dir of o.netnsDirs) {
      this.#background.push(watchRemovals(dir, this.#abort.signal, this.#clock, () => releases.hasExited && releases.checkExited()));
    }
    return this.#containerd;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
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
    await this.#consuming;
    this.#consuming = undefined;
    this.#containerd?.releases.stop();
    await Promise.allSettled(this.#background);
    this.#background = [];
    await this.#store?.close();
    this.#store = undefined;
    await this.#lock?.release();
    this.#lock = undefined;
  }
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

/** Calls `onRemoved` whenever an entry disappears from `dir`, until `signal` aborts. */
async function watchRemovals(dir: string, signal: AbortSignal, clock: Clock, onRemoved: () => void): Promise<void> {
  for await (const event of new DirectoryWatcher({ dir, signal, clock, include: () => true })) {
    if (event.kind === 'removed') onRemoved();
  }
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
