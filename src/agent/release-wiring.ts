/**
 * Wires the release side of the agent: every source (the missed-delete journal, containerd,
 * netns directories, the reconcile pass) feeds the one release pipeline. Nothing here decides
 * anything: the rule decides, the pipeline applies, the sources only report.
 *
 * `start` begins consuming and the periodic pass; after the signal aborts, `stopped` resolves once
 * every loop has ended and the pipeline has stopped (no release is started after that).
 */
import type { Logger } from 'pino';
import type { ContainerdStatus } from '../api/protocol.ts';
import type { Allocator } from '../allocator/allocator.ts';
import { ExponentialBackoff } from '../core/backoff.ts';
import type { Clock } from '../core/clock.ts';
import { ContainerdEventSource } from '../sources/containerd/event-source.ts';
import { MissedDeleteJournal } from '../sources/missed-delete-journal.ts';
import { NetnsObserver } from '../sources/netns.ts';
import { netnsRemovals } from '../sources/netns-removals.ts';
import type { Store } from '../store/store.ts';
import type { AgentOptions } from './options.ts';
import type { RecentErrors } from './recent-errors.ts';
import { JournalIntake } from './release-journal.ts';
import { ReleasePipeline } from './release-pipeline.ts';
import { ReleaseReconciler } from './release-reconciler.ts';
import { consumeContainerd, consumeNetnsRemovals } from './release-sources.ts';

export interface ReleaseWiringDeps {
  readonly store: Store;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly errors: RecentErrors;
}

export class ReleaseWiring {
  readonly pipeline: ReleasePipeline;
  readonly reconciler: ReleaseReconciler;
  /** containerd's state and what its events released, when the source is on. */
  readonly containerd: (() => ContainerdStatus) | undefined;
  readonly #o: AgentOptions;
  readonly #clock: Clock;
  readonly #journal: JournalIntake;
  readonly #source: ContainerdEventSource | undefined;
  /** Loops that run until the abort signal: the journal, containerd, netns directory watches. */
  #loops: Array<Promise<void>> = [];

  /** Throws (IO_FAILURE, naming it) for a journal directory the plugin would refuse to write into. */
  constructor(o: AgentOptions, deps: ReleaseWiringDeps) {
    this.#o = o;
    this.#clock = deps.clock;
    const clustered = deps.store.membership !== undefined;
    const journal = new MissedDeleteJournal({ dir: o.journalDir, clock: deps.clock });
    journal.prepare();
    this.#journal = new JournalIntake({ journal, logger: deps.logger, errors: deps.errors });
    const observer = new NetnsObserver(o.netnsDirs);
    this.pipeline = new ReleasePipeline({
      allocator: deps.allocator,
      store: deps.store,
      observer,
      clock: deps.clock,
      logger: deps.logger,
      node: o.nodeName,
      ownerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
      containerBackoff: new ExponentialBackoff({ initialMs: o.eventRetrySeconds * 1000, maxMs: o.eventRetryMaxSeconds * 1000 }),
      resyncGraceMs: o.containerdGraceSeconds * 1000,
      recordedFor: (owner) => this.#journal.readNow(owner),
    });
    this.reconciler = new ReleaseReconciler({
      pipeline: this.pipeline,
      journal: this.#journal,
      store: deps.store,
      observer,
      clock: deps.clock,
      logger: deps.logger,
      errors: deps.errors,
      intervalMs: o.reconcileIntervalSeconds * 1000,
      netnsGraceMs: o.netnsGraceSeconds * 1000,
      releaseGoneNetns: o.netnsDirs.length > 0,
      ...(clustered ? { onlyNode: o.nodeName } : {}),
    });
    const source = o.containerd
      ? new ContainerdEventSource({
          socket: o.containerdSocket,
          namespaces: o.containerdNamespaces,
          clock: deps.clock,
          backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 }),
          logger: deps.logger.child({ source: 'containerd' }),
        })
      : undefined;
    this.#source = source;
    this.containerd = source === undefined ? undefined : () => ({ ...source.status(), releases: this.pipeline.containerStatus() });
  }

  start(signal: AbortSignal): void {
    const push = this.pipeline.push.bind(this.pipeline);
    this.#loops.push(this.#journal.consume(signal, push));
    this.reconciler.start(signal);
    if (this.#source === undefined) return;
    this.#loops.push(consumeContainerd(this.#source.events(signal), this.pipeline));
    // A namespace file disappearing is the moment an exited container's address becomes free.
    for (const dir of this.#o.netnsDirs) this.#loops.push(consumeNetnsRemovals(netnsRemovals(dir, signal, this.#clock), this.pipeline));
  }

  async stopped(): Promise<void> {
    await Promise.allSettled(this.#loops);
    this.#loops = [];
    this.pipeline.stop();
  }
}
