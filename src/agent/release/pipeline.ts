/**
 * The release pipeline: every release intent, from every source, goes the same way —
 *
 *   source → ordered retry queue (keyed by owner or container) → release rule → allocator
 *
 * Guarantees:
 * - never processes one key twice at once, and handles a key's intents in the order they came;
 *   a failing intent backs its key off (owner and container keys each with their own policy, on
 *   the injected clock) and later intents for that key wait behind it; other keys go on;
 * - nothing dropped: an intent stays queued until its action is applied; an intent's `ack` (the
 *   journal removing its file) is called only after that, so a crash at any instant leaves the
 *   intent to be read again;
 * - what to do is decided by `decide` (release/rule.ts) from what the key holds now and what can
 *   be observed now, never from what a source believed when it queued the intent; releasing what
 *   is no longer held is a no-op;
 * - a look-again intent (namespace sweep, exited-container recheck) that is already queued for a
 *   key is not queued twice: the one queued looks at the state when it runs;
 * - an intent never releases what was allocated after it was observed (the rule's limit, applied
 *   again inside the release's commit round), however long it backed off; and an ADD first
 *   settles every key that holds an intent about it — its owner's, its container's, its pod's —
 *   so it never gets back an address a queued intent is about to release.
 *
 * The queue's keys are release/keys.ts; what is logged of each release and failure, release/log.ts.
 */
import type { Logger } from 'pino';
import type { ContainerdStatus } from '../../api/status.ts';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { type Moment, atOrBefore, momentOf, shifted } from '../../core/moment.ts';
import { OrderedRetryQueue } from '../../core/ordered-retry-queue.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import type { NetnsObservation, NetnsObserver } from '../../sources/netns.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Store } from '../../store/store.ts';
import type { ReleaseSource } from '../../api/dashboard.ts';
import { type Holder, type OwnerRelease, type ReleaseAction, type ReleaseIntent, type RuntimeAdapterScope, answersFor, decide, holderOf, needsNamespaces, sourceOf } from './rule.ts';
import { containerOfKey, containerQueueKey, isLookAgain, keyOf, ownerQueueKey, podQueueKey } from './keys.ts';
import { ReleaseLog } from './log.ts';
import { NO_TELEMETRY, type Telemetry } from '../metrics/telemetry.ts';

export interface ReleasePipelineOptions {
  readonly allocator: Allocator;
  readonly store: Store;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly logger: Logger;
  /** This node: container intents judge only what this node's agent allocated. */
  readonly node: string;
  /** Backoff of owner intents (journaled DELs, the namespace sweep). */
  readonly ownerBackoff: BackoffPolicy;
  /** Backoff of container intents (runtime events, --event-retry and --event-retry-max). */
  readonly containerBackoff: BackoffPolicy;
  /** Allocations younger than this are never released because a resync did not list their container. */
  readonly resyncGraceMs: number;
  /** Intents recorded durably for an owner that may not have arrived yet (the journal, read now). */
  readonly recordedFor?: (owner: Owner) => readonly ReleaseIntent[];
  /** Told of every release the pipeline committed (Kubernetes reports them as Events on the pod). */
  readonly onReleased?: (intent: ReleaseIntent, released: readonly Allocation[], why: string) => void;
  /** Told of releases by source and of failed attempts (metrics, the last-releases list). */
  readonly telemetry?: Telemetry;
}

/** What one attempt of an intent came to: what it released and the action the rule chose. */
export interface Outcome {
  readonly released: readonly Allocation[];
  readonly action: ReleaseAction;
}

/** What container intents released, which containers wait for their namespace, and their queue. */
export type ContainerReleasesStatus = ContainerdStatus['releases'];

/** One intent's attempts so far, for status. */
export interface Attempts {
  readonly failures: number;
  readonly lastError?: string;
  /** When the next attempt is due (ms since epoch), while its key backs off. */
  readonly retryAt?: number;
}

/** Per intent kind: intents done with, attempts failed, addresses released. */
export type PipelineCounts = Record<ReleaseIntent['kind'], { done: number; failed: number; addresses: number }>;

interface Pending {
  readonly intent: ReleaseIntent;
  /** Who asked, when not the intent's own source (`warren audit --fix` releasing a gone namespace). */
  readonly source?: ReleaseSource;
  failures: number;
  lastError?: string;
  /** Told what was released once the intent is done with (audit --fix waits on it). */
  readonly onDone?: (released: readonly Allocation[], action: ReleaseAction) => void;
  /**
   * Present for an intent whose caller bounds its retries (Kubernetes' work queue): a failed attempt
   * is handed to it and the intent leaves the pipeline instead of backing off here.
   */
  readonly onFailed?: (error: unknown) => void;
}

export class ReleasePipeline {
  readonly #o: ReleasePipelineOptions;
  readonly #queue: OrderedRetryQueue<Pending>;
  /** Intents queued and not yet done with, by key, in arrival order. */
  readonly #pending = new Map<string, Set<Pending>>();
  /**
   * Containers whose task exited while their namespace was still there, when that exit was seen
   * (a recheck releases nothing allocated later), and the adapter that said so (none: containerd).
   */
  readonly #exited = new Map<string, { since: number; observedAt: Moment; waitingFor: string; via?: RuntimeAdapterScope }>();
  /**
   * What each runtime adapter said it answers for, from its latest listing; kept after it goes
   * away, so a resync of containerd never takes another runtime's containers for its own gone ones.
   */
  readonly #adapters = new Map<string, RuntimeAdapterScope>();
  /** Addresses released by container intents, by where they came from: containerd (`''`) or an adapter's name. */
  readonly #releasedBy = new Map<string, number>();
  readonly #counts: PipelineCounts = {
    'journal-del': { done: 0, failed: 0, addresses: 0 },
    'container-deleted': { done: 0, failed: 0, addresses: 0 },
    'task-exited': { done: 0, failed: 0, addresses: 0 },
    'namespace-recheck': { done: 0, failed: 0, addresses: 0 },
    'absent-at-resync': { done: 0, failed: 0, addresses: 0 },
    'netns-gone': { done: 0, failed: 0, addresses: 0 },
    'pod-gone': { done: 0, failed: 0, addresses: 0 },
  };
  readonly #log: ReleaseLog;
  readonly #telemetry: Telemetry;

  constructor(options: ReleasePipelineOptions) {
    this.#o = options;
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
    this.#log = new ReleaseLog(options.logger);
    this.#queue = new OrderedRetryQueue<Pending>({
      clock: options.clock,
      backoff: (key) => (containerOfKey(key) === undefined ? options.ownerBackoff : options.containerBackoff),
      handle: (key, pending) => this.#handle(key, pending),
      onFailure: (_key, pending, error, retryInMs) => this.#failed(pending, error, retryInMs),
    });
  }

  /** Queues an intent; false when an equal look-again intent is queued already. */
  push(intent: ReleaseIntent): boolean {
    const key = keyOf(intent);
    if (isLookAgain(intent) && [...(this.#pending.get(key) ?? [])].some((p) => p.intent.kind === intent.kind)) return false;
    this.#enqueue(key, { intent, failures: 0 });
    return true;
  }

  #enqueue(key: string, pending: Pending): void {
    let set = this.#pending.get(key);
    if (set === undefined) {
      set = new Set();
      this.#pending.set(key, set);
    }
    set.add(pending);
    this.#queue.push(key, pending);
  }

  /**
   * Before an ADD: applies every release queued (or journaled, not yet read) for this attachment —
   * under its owner's key, its container's (runtime events) and its pod's (`podUID`, when the ADD
   * names one) — so the ADD never gets back an address a queued intent is about to release (a
   * retried ADD returns what the owner holds). Its new address is safe from them anyway: each
   * releases only what was allocated before it was observed. Throws TRY_AGAIN when such a release
   * cannot be applied yet.
   */
  async settle(owner: Owner, podUID?: string): Promise<void> {
    // The plugin may have journaled this attachment's DEL a moment ago, before the watch says so.
    for (const intent of this.#o.recordedFor?.(owner) ?? []) this.push(intent);
    const keys = [ownerQueueKey(owner), containerQueueKey(owner.containerID), ...(podUID === undefined ? [] : [podQueueKey(podUID)])];
    for (const key of keys) {
      if (!this.#queue.has(key)) continue;
      const outcome = await this.#queue.flush(key);
      const left = [...(this.#pending.get(key) ?? [])];
      if (outcome.ok || left.length === 0) continue;
      const what = left.some((p) => p.intent.kind === 'journal-del') ? 'a DEL of container %s is pending in the missed-delete journal' : 'a release of container %s is pending';
      throw new WarrenError('TRY_AGAIN', `${what.replace('%s', `${owner.containerID} (${owner.ifname})`)} and could not be applied yet: ` + `${outcome.error}`);
    }
  }

  /**
   * Queues an intent behind its key's others, handles that key now, and says what it released;
   * `source` names who asked when it is not the intent's own source (the audit).
   */
  async releaseNow(intent: ReleaseIntent, source?: ReleaseSource): Promise<readonly Allocation[]> {
    let released: readonly Allocation[] | undefined;
    const key = keyOf(intent);
    this.#enqueue(key, { intent, failures: 0, ...(source === undefined ? {} : { source }), onDone: (r) => (released = r) });
    const outcome = await this.#queue.flush(key);
    if (released !== undefined) return released;
    throw new Error(outcome.ok ? 'the release was not applied' : outcome.error);
  }

  /**
   * One attempt of an intent whose caller retries it (or not) itself: queued behind its key's
   * others, handled now; resolves with what it came to, rejects with the attempt's error (and the
   * intent is no longer queued).
   */
  async attempt(intent: ReleaseIntent): Promise<Outcome> {
    let outcome: Outcome | undefined;
    let failure: { error: unknown } | undefined;
    const key = keyOf(intent);
    this.#enqueue(key, { intent, failures: 0, onDone: (released, action) => (outcome = { released, action }), onFailed: (error) => (failure = { error }) });
    await this.#queue.flush(key);
    if (outcome !== undefined) return outcome;
    throw failure === undefined ? new Error('the release was not attempted: the pipeline stopped') : failure.error;
  }

  /**
   * After a runtime (re)subscription: every container of this node it did not list is looked at —
   * with `via`, only the allocations that adapter answers for; without (containerd), none that an
   * adapter has said are its own.
   */
  async resync(live: ReadonlySet<string>, via?: RuntimeAdapterScope): Promise<void> {
    if (via !== undefined) this.#adapters.set(via.adapter, via);
    const observedAt = momentOf(this.#o.clock);
    const cutoff = shifted(observedAt, -this.#o.resyncGraceMs);
    const absent = new Set<string>();
    const judged = (a: Allocation): boolean => (via === undefined ? ![...this.#adapters.values()].some((scope) => answersFor(scope, a)) : answersFor(via, a));
    for (const a of await this.#o.store.list({ node: this.#o.node })) {
      if (!live.has(a.containerID) && judged(a)) absent.add(a.containerID);
    }
    for (const containerID of absent) this.push({ kind: 'absent-at-resync', containerID, observedAt, cutoff, ...(via === undefined ? {} : { via }) });
  }

  /** Which runtime adapter answers for an allocation, by what adapters have declared (undefined: none). */
  adapterOf(a: Allocation): string | undefined {
    for (const scope of this.#adapters.values()) if (answersFor(scope, a)) return scope.adapter;
    return undefined;
  }

  /** Looks again at every exited container's namespace; how many are waiting for theirs. */
  recheckExited(): number {
    for (const [containerID, { via, observedAt }] of this.#exited) this.push({ kind: 'namespace-recheck', containerID, observedAt, ...(via === undefined ? {} : { via }) });
    return this.#exited.size;
  }

  get hasExited(): boolean {
    return this.#exited.size > 0;
  }

  async #handle(key: string, pending: Pending): Promise<void> {
    const { intent } = pending;
    let released: Allocation[];
    let action: ReleaseAction;
    try {
      const held = await this.#held(holderOf(intent));
      const exited = 'containerID' in intent && this.#exited.has(intent.containerID);
      action = decide(intent, held, {
        exited,
        namespaces: needsNamespaces(intent) ? this.#observe(held) : new Map(),
        now: momentOf(this.#o.clock),
        boot: this.#o.clock.boot,
        // Where nodes share the store, another node's stamps are another host's (createdMoment).
        ...(this.#o.store.membership === undefined ? {} : { node: this.#o.node }),
      });
      released = await this.#apply(pending, action);
    } catch (error) {
      if (pending.onFailed === undefined) throw error;
      // The caller retries this intent itself: it leaves the pipeline with its error.
      this.#forget(key, pending);
      this.#counts[intent.kind].failed += 1;
      this.#telemetry.retried(pending.source ?? sourceOf(intent));
      pending.onFailed(error);
      return;
    }
    intent.ack?.();
    this.#forget(key, pending);
    const count = this.#counts[intent.kind];
    count.done += 1;
    count.addresses += released.length;
    if ('containerID' in intent && released.length > 0) {
      const by = intent.via?.adapter ?? '';
      this.#releasedBy.set(by, (this.#releasedBy.get(by) ?? 0) + released.length);
    }
    pending.onDone?.(released, action);
  }

  #forget(key: string, pending: Pending): void {
    this.#pending.get(key)?.delete(pending);
    if (this.#pending.get(key)?.size === 0) this.#pending.delete(key);
  }

  /** What the intent's holder holds now: an owner anywhere; a container or pod on this node. */
  #held(holder: Holder): Promise<Allocation[]> {
    switch (holder.kind) {
      case 'owner':
        return this.#o.store.findByOwner(holder.owner);
      case 'container':
        return this.#o.store.list({ containerID: holder.containerID, node: this.#o.node });
      case 'pod':
        return this.#o.store.list({ podUID: holder.podUID, node: this.#o.node });
      default: {
        const never: never = holder;
        throw new Error(`unhandled holder ${JSON.stringify(never)}`);
      }
    }
  }

  #observe(held: readonly Allocation[]): Map<string, NetnsObservation> {
    const cache = new Map<string, { observable: boolean; reason?: string }>();
    const seen = new Map<string, NetnsObservation>();
    for (const a of held) if (a.netns !== undefined && !seen.has(a.netns)) seen.set(a.netns, this.#o.observer.observe(a.netns, cache));
    return seen;
  }

  async #apply(pending: Pending, action: ReleaseAction): Promise<Allocation[]> {
    const { intent } = pending;
    const containerID = 'containerID' in intent ? intent.containerID : undefined;
    switch (action.kind) {
      case 'release': {
        const released = await this.#release(action.owners);
        if (containerID !== undefined) this.#exited.delete(containerID);
        this.#logReleased(pending, released, action.why);
        return released;
      }
      case 'wait-until': {
        const released = await this.#release(action.owners);
        this.#logReleased(pending, released, action.why);
        return released;
      }
      case 'wait-for-namespace': {
        const released = await this.#release(action.owners);
        this.#logReleased(pending, released, action.why);
        const marked = containerID === undefined ? undefined : this.#exited.get(containerID);
        if (containerID !== undefined && 'observedAt' in intent) {
          const via = 'via' in intent ? intent.via : undefined;
          // The latest exit seen is the one a recheck speaks for (the container ID may have been
          // ADDed again since the first).
          const observedAt = marked !== undefined && atOrBefore(intent.observedAt, marked.observedAt, this.#o.clock.boot) ? marked.observedAt : intent.observedAt;
          this.#exited.set(containerID, { since: marked?.since ?? this.#o.clock.now(), observedAt, waitingFor: action.waitingFor, ...(via === undefined ? {} : { via }) });
          if (marked === undefined && 'containerID' in intent) this.#log.exited(intent, action.waitingFor);
        }
        return released;
      }
      case 'drop':
        if (containerID !== undefined && action.forgetExited) this.#exited.delete(containerID);
        this.#log.dropped(intent, action.reason);
        return [];
      default: {
        const never: never = action;
        throw new Error(`unhandled action ${JSON.stringify(never)}`);
      }
    }
  }

  async #release(owners: readonly OwnerRelease[]): Promise<Allocation[]> {
    const released: Allocation[] = [];
    for (const { owner, createdAtOrBefore, netns } of owners) {
      const limits = { ...(createdAtOrBefore === undefined ? {} : { createdAtOrBefore }), ...(netns === undefined ? {} : { netns }) };
      released.push(...(await this.#o.allocator.release(owner, undefined, limits)));
    }
    return released;
  }

  #logReleased(pending: Pending, released: readonly Allocation[], why: string): void {
    const { intent } = pending;
    if (released.length > 0) {
      this.#o.onReleased?.(intent, released, why);
      this.#telemetry.released(pending.source ?? sourceOf(intent), released, why, 'via' in intent ? intent.via?.adapter : undefined);
    }
    this.#log.released(intent, released, why);
  }

  #failed(pending: Pending, error: unknown, retryInMs: number): void {
    const { intent } = pending;
    pending.failures += 1;
    this.#telemetry.retried(pending.source ?? sourceOf(intent));
    pending.lastError = messageOf(error);
    this.#counts[intent.kind].failed += 1;
    this.#log.failed(intent, pending.failures, pending.lastError, retryInMs);
  }

  /** An intent's attempts so far; undefined once it is done with (or was never queued). */
  attempts(intent: ReleaseIntent): Attempts | undefined {
    const key = keyOf(intent);
    const pending = [...(this.#pending.get(key) ?? [])].find((p) => p.intent === intent);
    if (pending === undefined) return undefined;
    const retryAt = pending.failures > 0 ? this.#queue.state(key)?.retryAt : undefined;
    return { failures: pending.failures, ...(pending.lastError === undefined ? {} : { lastError: pending.lastError }), ...(retryAt === undefined ? {} : { retryAt }) };
  }

  /** Intents queued and not yet done with (waiting, running or backing off), by source. */
  queueDepth(): Partial<Record<ReleaseSource, number>> {
    const depth: Partial<Record<ReleaseSource, number>> = {};
    for (const set of this.#pending.values()) {
      for (const p of set) {
        const source = p.source ?? sourceOf(p.intent);
        depth[source] = (depth[source] ?? 0) + 1;
      }
    }
    return depth;
  }

  /** What the pipeline did since start, per intent kind (a copy). */
  counts(): PipelineCounts {
    return structuredClone(this.#counts);
  }

  /** What containerd's events released (no `adapter`), or the named adapter's; who waits for a namespace; the queue. */
  containerStatus(adapter?: string): ContainerReleasesStatus {
    return {
      released: this.#releasedBy.get(adapter ?? '') ?? 0,
      exited: [...this.#exited]
        .filter(([, e]) => e.via?.adapter === adapter)
        .map(([containerID, e]) => ({ containerID, since: new Date(e.since).toISOString(), waitingFor: e.waitingFor })),
      queue: this.#queue.keys().flatMap((k) => {
        const containerID = containerOfKey(k.key);
        return containerID === undefined ? [] : [{ ...k, key: containerID }];
      }),
    };
  }

  /** Resolves once none of the keys running now is running (each emptied or backing off). */
  settled(): Promise<void> {
    return this.#queue.settled();
  }

  /** Resolves when nothing is queued. */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  stop(): void {
    this.#queue.stop();
  }
}
