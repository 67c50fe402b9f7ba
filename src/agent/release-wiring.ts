/**
 * Wires the release side of the agent: every source (the missed-delete journal, containerd, a feed
 * built beside it (Kubernetes), runtime adapters registered as plugins, netns directories, the
 * reconcile pass) feeds the one release pipeline. Nothing here decides anything: the rule decides,
 * the pipeline's applier applies, the sources only report. The pipeline, the journal intake and
 * the reconcile pass are composed by release/core.ts, which tests call with their own parts.
 *
 * The Kubernetes side is built beside this wiring, on its pipeline (kubernetes-wiring.ts), and fed
 * in as a `ReleaseFeed`: this file never imports it, so neither wiring is nested in the other.
 *
 * `start` begins consuming and the periodic pass; after the signal aborts, `stopped` resolves once
 * every loop has ended, a feed's too, and the pipeline has stopped (no release is started after
 * that). A loop (or the plugin watcher) that fails or ends before the signal aborts is told to
 * `onFailure`.
 *
 * A source that is off costs nothing: its client library (@grpc/grpc-js, protobufjs) is imported by
 * `open` only when its option is on (sides-wiring.ts does the same for the Kubernetes side). Loading
 * them all cost an agent start more than a second of CPU before it could serve.
 */
import type { Logger } from 'pino';
import type { ContainerdStatus, PluginsStatus } from '../api/status.ts';
import type { Allocator } from '../allocator/allocator.ts';
import { ExponentialBackoff } from '../core/backoff.ts';
import type { Clock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import type { ContainerdEventSource } from '../sources/containerd/event-source.ts';
import { MissedDeleteJournal } from '../sources/missed-delete-journal.ts';
import { NetnsObserver } from '../sources/netns.ts';
import { netnsRemovals } from '../sources/netns-removals.ts';
import type { Membership, Store } from '../store/store.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { AgentOptions } from './settings/options.ts';
import type { RecentErrors } from './metrics/recent-errors.ts';
import type { JournalIntake } from './release/journal.ts';
import type { ReleasePipeline } from './release/pipeline.ts';
import type { ReleaseReconciler } from './release/reconciler.ts';
import type { ReleaseIntent } from './release/intent.ts';
import { releaseCore, releaseSettings } from './release/core.ts';
import { consumeContainerd, consumeNetnsRemovals } from './release/consumers.ts';
import type { PluginRegistry } from './registry/registry.ts';
import type { NetnsScopes } from './release/netns-scopes.ts';
import type { ReleaseSource, Telemetry } from './metrics/telemetry.ts';
import type { CniServiceOptions } from './server/cni-service.ts';

/** What an option that is on needs loaded, and nothing an option that is off would. */
interface OptionalModules {
  /** containerd's client: @grpc/grpc-js and protobufjs. */
  readonly containerd?: typeof import('../sources/containerd/event-source.ts') | undefined;
  /** The registry and the runtime adapters' client: @grpc/grpc-js and protobufjs. */
  readonly plugins?: {
    readonly registry: typeof import('./registry/registry.ts');
    readonly handler: typeof import('./registry/event-source-handler.ts');
  };
}

/** Imports what the options that are on need, at once. */
async function optionalModules(o: AgentOptions): Promise<OptionalModules> {
  const [containerd, registry, handler] = await Promise.all([
    o.containerd ? import('../sources/containerd/event-source.ts') : undefined,
    o.pluginsDir === undefined ? undefined : import('./registry/registry.ts'),
    o.pluginsDir === undefined ? undefined : import('./registry/event-source-handler.ts'),
  ]);
  return {
    containerd,
    ...(registry === undefined || handler === undefined ? {} : { plugins: { registry, handler } }),
  };
}

export interface ReleaseWiringDeps {
  readonly store: Store;
  /** The store's membership: present exactly when the options say nodes share it (settings/store-kind.ts). */
  readonly membership: Membership | undefined;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly errors: RecentErrors;
  readonly telemetry: Telemetry;
  /**
   * Told when a source's loop fails or ends before the signal aborts: a release path is gone and
   * the agent must not go on as if it were there. Unset: logged only (tests of parts).
   */
  readonly onFailure?: (error: Error) => void;
}

/**
 * Sources built beside the release wiring on its pipeline (the Kubernetes side): their loops run
 * under its supervision, so `stopped` still means nothing pushes into the pipeline any more.
 */
export interface ReleaseFeed {
  /** Told of every release committed (Kubernetes reports them as Events on the pod). */
  released(intent: ReleaseIntent, released: readonly Allocation[], why: string): void;
  /** A namespace file disappeared: a gone pod's address may be free now. */
  namespaceRemoved(): void;
  /** Starts every loop, each handed to `supervise`: it runs until the signal aborts. */
  start(signal: AbortSignal, supervise: (what: string, loop: Promise<void>) => void): void;
  /** Closes what the feed holds open (its API client), once every loop of it has stopped. */
  close(): void;
}

export class ReleaseWiring {
  readonly pipeline: ReleasePipeline;
  readonly reconciler: ReleaseReconciler;
  /** What runtime adapters answer for: the CNI service's GC asks it whose an allocation is. */
  readonly scopes: NetnsScopes;
  /** containerd's state and what its events released, when the source is on. */
  readonly containerd: (() => ContainerdStatus) | undefined;
  /** The plugin registry's sockets and what registered adapters released, when on. */
  readonly plugins: (() => PluginsStatus) | undefined;
  readonly #o: AgentOptions;
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #journal: JournalIntake;
  readonly #source: ContainerdEventSource | undefined;
  /** Fed in before start (`feedFrom`): the Kubernetes side, when on. */
  readonly #feeds: ReleaseFeed[] = [];
  readonly #registry: PluginRegistry | undefined;
  readonly #logger: Logger;
  readonly #onFailure: ((error: Error) => void) | undefined;
  /** The reconcile pass sweeps gone namespaces (release/core.ts releaseSettings). */
  readonly #sweepsNetns: boolean;
  /** Loops that run until the abort signal: the journal, containerd, a feed's, netns directory watches. */
  #loops: Array<Promise<void>> = [];

  /**
   * Loads only the client libraries the options use, then wires. Throws (IO_FAILURE, naming it)
   * for a journal directory the plugin would refuse to write into.
   */
  static async open(o: AgentOptions, deps: ReleaseWiringDeps): Promise<ReleaseWiring> {
    return new ReleaseWiring(o, deps, await optionalModules(o));
  }

  private constructor(o: AgentOptions, deps: ReleaseWiringDeps, modules: OptionalModules) {
    this.#o = o;
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#onFailure = deps.onFailure;
    const journal = new MissedDeleteJournal({ dir: o.journalDir, clock: deps.clock });
    journal.prepare();
    const settings = releaseSettings(o, deps.membership !== undefined);
    this.#sweepsNetns = settings.releaseGoneNetns;
    const core = releaseCore(settings, {
      ...deps,
      journal,
      observer: new NetnsObserver(o.netnsDirs),
      // Where containerd is followed; read when a pass runs (its source is made below, after the core).
      ...(modules.containerd === undefined
        ? {}
        : { sandboxes: async () => (await this.#source?.podSandboxes()) ?? [] }),
      onReleased: (intent, released, why) => {
        for (const feed of this.#feeds) feed.released(intent, released, why);
      },
    });
    this.#journal = core.intake;
    this.pipeline = core.pipeline;
    this.reconciler = core.reconciler;
    this.scopes = core.scopes;
    const containerd = modules.containerd;
    const source = containerd
      ? new containerd.ContainerdEventSource({
          socket: o.containerdSocket,
          namespaces: o.containerdNamespaces,
          clock: deps.clock,
          backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 }),
          logger: deps.logger.child({ source: 'containerd' }),
        })
      : undefined;
    this.#source = source;
    this.containerd =
      source === undefined ? undefined : () => ({ ...source.status(), releases: this.pipeline.containerStatus() });
    const plugins = modules.plugins;
    const registry =
      o.pluginsDir === undefined || plugins === undefined
        ? undefined
        : new plugins.registry.PluginRegistry({
            dir: o.pluginsDir,
            handlers: [
              new plugins.handler.EventSourceHandler({
                pipeline: this.pipeline,
                clock: deps.clock,
                logger: deps.logger,
                scopes: core.scopes,
              }),
            ],
            clock: deps.clock,
            logger: deps.logger.child({ source: 'plugins' }),
            onFailure: (error) => this.#failed(error),
          });
    this.#registry = registry;
    this.plugins = registry === undefined ? undefined : () => registry.status();
  }

  /** Sources built beside this wiring on its pipeline; before `start`, which starts their loops. */
  feedFrom(feed: ReleaseFeed): void {
    this.#feeds.push(feed);
  }

  /** Before an ADD: what is pending for its attachment is applied first (the CNI service's beforeAdd). */
  readonly beforeAdd: NonNullable<CniServiceOptions['beforeAdd']> = (owner, podUID) =>
    this.pipeline.applyPending(owner, podUID);

  /** Which runtime adapter answers for an allocation (the CNI service's runtimeOf). */
  readonly runtimeOf: NonNullable<CniServiceOptions['runtimeOf']> = (a) => this.scopes.adapterOf(a);

  /** Journal files not yet released (a metric). */
  pendingJournal(): number {
    return this.reconciler.status().pending.length;
  }

  /** Intents queued (or backing off) in the pipeline, by source (a metric). */
  queueDepth(): Partial<Record<ReleaseSource, number>> {
    return this.pipeline.queueDepth();
  }

  /** A release path is gone: told to the agent, which must not serve as if it were there. */
  #failed(error: Error): void {
    this.#logger.error({ err: error }, error.message);
    this.#onFailure?.(error);
  }

  start(signal: AbortSignal): void {
    const push = this.pipeline.push.bind(this.pipeline);
    // Every loop runs until the signal aborts; one that fails or ends before is a failure of the
    // agent, never a source silently gone while the agent says it is ready.
    const supervised = (what: string, loop: Promise<void>): Promise<void> =>
      loop.then(
        () => {
          if (!signal.aborted) this.#failed(new WarrenError('IO_FAILURE', `${what} ended on its own`));
        },
        (error: unknown) => {
          if (!signal.aborted)
            this.#failed(new WarrenError('IO_FAILURE', `${what} failed: ${messageOf(error)}`, { cause: error }));
        },
      );
    this.#loops.push(supervised('the missed-delete journal watch', this.#journal.consume(signal, push)));
    this.reconciler.start(signal);
    // Records the file check wrote back from the cluster (a file put back or lost) were in no pass
    // yet, and their containers may be gone already, their namespaces with them: a pass looks now,
    // not at the next interval (found by the soak, etcd: a release 10 s after it was provable).
    const unwatch = this.#store.cluster?.whenRestored?.(() => this.reconciler.soon());
    if (unwatch !== undefined) signal.addEventListener('abort', unwatch, { once: true });
    this.#registry?.start(signal);
    if (this.#source !== undefined)
      this.#loops.push(
        supervised(
          'the containerd event source',
          consumeContainerd(this.#source.events(signal), this.pipeline, this.#clock),
        ),
      );
    for (const feed of this.#feeds) feed.start(signal, (what, loop) => this.#loops.push(supervised(what, loop)));
    if (!this.#sweepsNetns && this.#source === undefined && this.#feeds.length === 0 && this.#registry === undefined)
      return;
    // A namespace file disappearing is the moment its allocations (and an exited container's, or a
    // gone pod's) become provably free: the sweep looks at once, not at the next interval.
    const removed = (): void => {
      if (this.#sweepsNetns) this.reconciler.soon();
      if (this.pipeline.hasExited) this.pipeline.recheckExited();
      for (const feed of this.#feeds) feed.namespaceRemoved();
    };
    for (const dir of this.#o.netnsDirs)
      this.#loops.push(
        supervised(`the watch of ${dir}`, consumeNetnsRemovals(netnsRemovals(dir, signal, this.#clock), removed)),
      );
  }

  async stopped(): Promise<void> {
    // Adapters first: their streams stop queueing before the pipeline stops.
    await this.#registry?.stopped();
    await Promise.allSettled(this.#loops);
    this.#loops = [];
    for (const feed of this.#feeds) feed.close();
    this.pipeline.stop();
  }
}
