/**
 * The release pipeline: every release intent (a source's item as its consumer turned it, or what
 * the reconcile pass found) goes the same way —
 *
 *   intent → ordered retry queue (keyed by owner, container or pod) → release rule → allocator
 *
 * It keeps the queue and nothing else; the parts composed with it (core.ts) do the rest:
 * one attempt of an intent, judged and applied (applier.ts), containers waiting for their
 * namespace (exited-containers.ts), what runtime adapters answer for (netns-scopes.ts), what it
 * did (counts.ts), what it logs (log.ts).
 *
 * Guarantees:
 * - never processes one key twice at once, and handles a key's intents in the order they came;
 *   a key backing off holds back only its own later intents; other keys go on;
 * - nothing dropped: an intent stays queued until its action is applied or it is given up (the
 *   retry rule below); its `ack` (the journal removing its file) is called only once it is
 *   applied, so a crash at any instant leaves the intent to be read again;
 * - what to do is decided when the intent's turn comes, from what its holder holds then
 *   (applier.ts), never from what a source believed when it queued it;
 * - a look-again intent (namespace sweep, exited-container recheck) that is already queued for a
 *   key is not queued twice: the one queued looks at the state when it runs;
 * - an intent never releases what was allocated after it was observed (the rule's limit, applied
 *   again inside the release's commit round), however long it backed off; and an ADD first
 *   applies what is queued under every key that holds an intent about it — its owner's, its
 *   container's, its pod's — so it never gets back an address a queued intent is about to release.
 *
 * Entry points: `push` queues (the sources; nobody waits); `resync` and `recheckExited` push the
 * intents of a runtime's listing and of the waiting containers; `applyPending` (before an ADD) runs the
 * attachment's keys now and throws TRY_AGAIN when one fails; `releaseNow` (audit --fix) queues and
 * runs its key now, telling the caller the first attempt's error; `attempt` (Kubernetes) queues
 * one try and runs its key now, telling the caller how it came out.
 *
 * The retry rule, one for every entry point: a failed attempt is counted, and the intent stays at
 * the head of its key (its later intents wait behind it) while the key backs off on its policy —
 * owner and pod keys on `ownerBackoff`, container keys on `containerBackoff` (core.ts:
 * 1 s doubling to 5 min; --event-retry doubling to --event-retry-max) — until the backoff ends or
 * `applyPending`, `releaseNow` or `attempt` on that key cuts it short; a success resets the key's count.
 * Once an intent has failed as many times as it was queued to be tried, it is given up instead:
 * taken out of the queue without its ack, and whoever waits on it told the error. Only `attempt`
 * bounds the tries, at one, because its caller retries on its own schedule and gives up on its own
 * count (the Kubernetes work queue); every other intent is tried until it is applied.
 *
 * The queue's keys are release/keys.ts.
 */
import type { Logger } from 'pino';
import type { ContainerdStatus } from '../../api/status.ts';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { momentOf, shifted } from '../../core/moment.ts';
import { type FlushOutcome, OrderedRetryQueue } from '../../core/ordered-retry-queue.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { Store } from '../../store/store.ts';
import type { ReleaseSource } from '../../api/dashboard.ts';
import { type ReleaseIntent, type RuntimeAdapterScope, sourceOf } from './intent.ts';
import { containerOfKey, containerQueueKey, isLookAgain, keyOf, ownerQueueKey, podQueueKey } from './keys.ts';
import { ReleaseLog } from './log.ts';
import type { Outcome, ReleaseApplier } from './applier.ts';
import type { ExitedContainers } from './exited-containers.ts';
import type { NetnsScopes } from './netns-scopes.ts';
import type { PipelineCounts, ReleaseCounts } from './counts.ts';
import { NO_TELEMETRY, type Telemetry } from '../metrics/telemetry.ts';

export type { PipelineCounts } from './counts.ts';
export type { Outcome } from './applier.ts';

export interface ReleasePipelineOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** One attempt of an intent: judged and applied when its key has its turn. */
  readonly applier: ReleaseApplier;
  /** Backoff of owner and pod keys (journaled DELs, the namespace sweep, audit --fix). */
  readonly ownerBackoff: BackoffPolicy;
  /** Backoff of container keys (runtime events, --event-retry and --event-retry-max). */
  readonly containerBackoff: BackoffPolicy;
  /** Where a resync reads this node's allocations from. */
  readonly store: Store;
  /** This node: a resync judges only what this node's agent allocated. */
  readonly node: string;
  /** Allocations younger than this are never released because a resync did not list their container. */
  readonly resyncGraceMs: number;
  /** Containers waiting for their namespace, which `recheckExited` looks at again. */
  readonly exited: ExitedContainers;
  /** What runtime adapters answer for: a resync judges only what its runtime answers for. */
  readonly scopes: NetnsScopes;
  /** Told of every intent done with and every failed attempt. */
  readonly counts: ReleaseCounts;
  /** Intents recorded durably for an owner that may not have arrived yet (the journal, read now). */
  readonly recordedFor?: (owner: Owner) => readonly ReleaseIntent[];
  /** Told of failed attempts (metrics). */
  readonly telemetry?: Telemetry;
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

/** Tried until applied: every entry point but `attempt`. */
const UNTIL_APPLIED = Number.POSITIVE_INFINITY;

interface Pending {
  readonly intent: ReleaseIntent;
  /** Who asked, when not the intent's own source (`warren audit --fix` releasing a gone namespace). */
  readonly source?: ReleaseSource;
  /** Attempts before it is given up (the retry rule in the header). */
  readonly tries: number;
  failures: number;
  lastError?: string;
  /** How it ended, for whoever waits on it: applied, or given up with the error. */
  end?: { readonly applied: Outcome } | { readonly gaveUp: unknown };
}

export class ReleasePipeline {
  readonly #o: ReleasePipelineOptions;
  readonly #queue: OrderedRetryQueue<Pending>;
  /** Intents queued and not yet done with, by key, in arrival order. */
  readonly #pending = new Map<string, Set<Pending>>();
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
      // Counted when it failed (#handle); logged here, where the delay is known.
      onFailure: (_key, { intent, failures, lastError }, _error, retryInMs) =>
        this.#log.failed(intent, failures, lastError ?? '', retryInMs),
    });
  }

  /** Queues an intent; false when an equal look-again intent is queued already. */
  push(intent: ReleaseIntent): boolean {
    const key = keyOf(intent);
    if (isLookAgain(intent) && [...(this.#pending.get(key) ?? [])].some((p) => p.intent.kind === intent.kind))
      return false;
    this.#enqueue(key, { intent, tries: UNTIL_APPLIED, failures: 0 });
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

  /** Queues an intent behind its key's others and handles that key now. */
  async #now(
    intent: ReleaseIntent,
    tries: number,
    source?: ReleaseSource,
  ): Promise<{ pending: Pending; flushed: FlushOutcome }> {
    const key = keyOf(intent);
    const pending: Pending = { intent, tries, failures: 0, ...defined({ source }) };
    this.#enqueue(key, pending);
    return { pending, flushed: await this.#queue.flush(key) };
  }

  /**
   * Before an ADD: applies every release queued (or journaled, not yet read) for this attachment —
   * under its owner's key, its container's (runtime events) and its pod's (`podUID`, when the ADD
   * names one) — so the ADD never gets back an address a queued intent is about to release (a
   * retried ADD returns what the owner holds). Its new address is safe from them anyway: each
   * releases only what was allocated before it was observed. Throws TRY_AGAIN when such a release
   * cannot be applied yet.
   */
  async applyPending(owner: Owner, podUID?: string): Promise<void> {
    // The plugin may have journaled this attachment's DEL a moment ago, before the watch says so.
    for (const intent of this.#o.recordedFor?.(owner) ?? []) this.push(intent);
    const keys = [
      ownerQueueKey(owner),
      containerQueueKey(owner.containerID),
      ...(podUID === undefined ? [] : [podQueueKey(podUID)]),
    ];
    for (const key of keys) {
      if (!this.#queue.has(key)) continue;
      const outcome = await this.#queue.flush(key);
      const left = [...(this.#pending.get(key) ?? [])];
      if (outcome.ok || left.length === 0) continue;
      const what = left.some((p) => p.intent.kind === 'journal-del')
        ? 'a DEL of container %s is pending in the missed-delete journal'
        : 'a release of container %s is pending';
      throw new WarrenError(
        'TRY_AGAIN',
        `${what.replace('%s', `${owner.containerID} (${owner.ifname})`)} and could not be applied yet: ` +
          `${outcome.error}`,
      );
    }
  }

  /**
   * Queues an intent behind its key's others, handles that key now, and says what it released;
   * `source` names who asked when it is not the intent's own source (the audit). When it cannot
   * be applied yet, throws the attempt's error and the intent stays queued.
   */
  async releaseNow(intent: ReleaseIntent, source?: ReleaseSource): Promise<readonly Allocation[]> {
    const { pending, flushed } = await this.#now(intent, UNTIL_APPLIED, source);
    if (pending.end !== undefined && 'applied' in pending.end) return pending.end.applied.released;
    throw new Error(flushed.ok ? 'the release was not applied' : flushed.error);
  }

  /**
   * One try of an intent whose caller retries it (or not) itself: queued behind its key's
   * others, handled now; resolves with what it came to, rejects with the attempt's error (and the
   * intent is no longer queued).
   */
  async attempt(intent: ReleaseIntent): Promise<Outcome> {
    const { end } = (await this.#now(intent, 1)).pending;
    if (end === undefined) throw new Error('the release was not attempted: the pipeline stopped');
    if ('gaveUp' in end) throw end.gaveUp;
    return end.applied;
  }

  /**
   * After a runtime (re)subscription: every container of this node it did not list is looked at —
   * with `via`, only the allocations that adapter answers for; without (containerd), none that an
   * adapter has said are its own.
   */
  async resync(live: ReadonlySet<string>, via?: RuntimeAdapterScope): Promise<void> {
    if (via !== undefined) this.#o.scopes.declare(via);
    const observedAt = momentOf(this.#o.clock);
    const cutoff = shifted(observedAt, -this.#o.resyncGraceMs);
    const absent = new Set<string>();
    for (const a of await this.#o.store.list({ node: this.#o.node })) {
      // A bookkeeping record names no container (ipam/bookkeeping.ts): no runtime's listing speaks for it.
      if (isBookkeeping(a)) continue;
      if (!live.has(a.containerID) && this.#o.scopes.judgedBy(a, via)) absent.add(a.containerID);
    }
    for (const containerID of absent)
      this.push({ kind: 'absent-at-resync', containerID, observedAt, cutoff, ...defined({ via }) });
  }

  /** Looks again at every exited container's namespace; how many are waiting for theirs. */
  recheckExited(): number {
    for (const intent of this.#o.exited.rechecks()) this.push(intent);
    return this.#o.exited.size;
  }

  get hasExited(): boolean {
    return this.#o.exited.size > 0;
  }

  async #handle(key: string, pending: Pending): Promise<void> {
    const { intent } = pending;
    let outcome: Outcome;
    try {
      outcome = await this.#o.applier.apply(intent, pending.source);
    } catch (error) {
      pending.failures += 1;
      pending.lastError = messageOf(error);
      this.#o.counts.failed(intent);
      this.#telemetry.retried(pending.source ?? sourceOf(intent));
      // The key backs off with the intent at its head (the queue), unless its tries are spent.
      if (pending.failures < pending.tries) throw error;
      this.#forget(key, pending);
      pending.end = { gaveUp: error };
      return;
    }
    intent.ack?.();
    this.#forget(key, pending);
    this.#o.counts.done(intent, outcome.released);
    pending.end = { applied: outcome };
  }

  #forget(key: string, pending: Pending): void {
    this.#pending.get(key)?.delete(pending);
    if (this.#pending.get(key)?.size === 0) this.#pending.delete(key);
  }

  /** An intent's attempts so far; undefined once it is done with (or was never queued). */
  attempts(intent: ReleaseIntent): Attempts | undefined {
    const key = keyOf(intent);
    const pending = [...(this.#pending.get(key) ?? [])].find((p) => p.intent === intent);
    if (pending === undefined) return undefined;
    const retryAt = pending.failures > 0 ? this.#queue.state(key)?.retryAt : undefined;
    return {
      failures: pending.failures,
      ...defined({ lastError: pending.lastError, retryAt }),
    };
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

  /** What the pipeline did since start, per intent kind (a copy; release/counts.ts). */
  counts(): PipelineCounts {
    return this.#o.counts.snapshot();
  }

  /** What containerd's events released (no `adapter`), or the named adapter's; who waits for a namespace; the queue. */
  containerStatus(adapter?: string): ContainerReleasesStatus {
    return {
      released: this.#o.counts.releasedBy(adapter),
      exited: this.#o.exited.status(adapter),
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
