/**
 * Kubernetes' share of the release side: pods this node no longer runs (deleted, finished, or
 * absent from a listing) become `pod-gone` intents on the one release pipeline, by pod UID — never
 * by namespace and name, which a StatefulSet's replacement pod reuses.
 *
 *   pod source → rate-limited work queue (pod UIDs) → pipeline.attempt(pod-gone) → rule → allocator
 *
 * Guarantees:
 * - a pod UID is never processed twice at once and is coalesced while it waits (the queue);
 * - a failed attempt is retried with the queue's backoff (per key, and a token bucket over all) up
 *   to `maxRetries` times; then a Warning Event says so and the UID is let go: the resync after the
 *   next listing finds what it still holds;
 * - a pod whose namespace cannot be proven gone waits until its grace ends, or less when a watched
 *   netns directory loses an entry (`namespaceRemoved`);
 * - after each listing, allocations of this node whose pod UID is not listed (deletions missed
 *   while the agent was down or the watch was away) go the same way; a static pod counts as listed
 *   through its mirror pod's `kubernetes.io/config.mirror` annotation. Nothing is judged from what
 *   could not be seen: without a listing there is no resync;
 * - every release the pipeline commits for an allocation recorded with a pod is reported as a
 *   Normal Event on that pod, whichever source caused it (pod gone, sandbox deleted, namespace gone).
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { type Moment, momentOf, msBetween, shifted } from '../../core/moment.ts';
import {
  DEFAULT_MAX_RETRIES,
  RateLimitedQueue,
  type RateLimitedQueueStats,
  defaultRateLimiter,
} from '../../core/rate-limited-queue.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { PodFact, PodItem } from '../../sources/kubernetes/pod-source.ts';
import type { Store } from '../../store/store.ts';
import { type ClusterEvents, podInvolved } from './events.ts';
import type { ReleasePipeline } from '../release/pipeline.ts';
import type { PodGoneBecause, PodRef, ReleaseIntent } from '../release/intent.ts';

export const REASON_RELEASED = 'IPAddressGarbageCollected';
export const REASON_FAILED = 'IPAddressGarbageCollectionFailed';

export interface KubernetesReleasesOptions {
  readonly pipeline: ReleasePipeline;
  readonly store: Store;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly node: string;
  /** How long a pod gone whose namespace cannot be proven gone keeps its addresses. */
  readonly graceMs: number;
  /** Attempts after the first before giving up on a pod. Default 5. */
  readonly maxRetries?: number;
  /** Events on the pod; undefined: none sent. */
  readonly events?: ClusterEvents;
  /**
   * Asks the API server for one pod: true when a pod with this UID still exists. A pod missing from
   * a listing is confirmed gone this way before it is judged (a listing is a snapshot). Undefined:
   * the listing is believed.
   */
  readonly podExists?: (pod: PodRef) => Promise<boolean>;
}

interface Tracked {
  readonly pod: PodRef;
  readonly because: PodGoneBecause;
  /** When the pod was seen gone: allocations made later are someone's ADD in flight. */
  readonly goneAt: Moment;
  /** While waiting for the grace or a namespace: when it is looked at again. */
  waitingUntil?: Moment;
}

export interface KubernetesReleasesStatus {
  readonly tracked: number;
  readonly waiting: ReadonlyArray<{ pod: string; uid: string; because: PodGoneBecause; until: string }>;
  readonly released: number;
  readonly gaveUp: number;
  /** Resyncs completed (every allocation of the listing's node judged). */
  readonly resyncs: number;
  readonly queue: RateLimitedQueueStats;
}

export class KubernetesReleases {
  readonly #o: KubernetesReleasesOptions;
  readonly #queue: RateLimitedQueue;
  readonly #maxRetries: number;
  /** Pods gone whose release is not done with, by UID. */
  readonly #tracked = new Map<string, Tracked>();
  #released = 0;
  #gaveUp = 0;
  #resyncs = 0;

  constructor(options: KubernetesReleasesOptions) {
    this.#o = options;
    this.#queue = new RateLimitedQueue({ clock: options.clock, rateLimiter: defaultRateLimiter(options.clock) });
    this.#maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  }

  /** Consumes the pod source and works the queue until the signal aborts. */
  async run(items: AsyncIterable<PodItem>, signal: AbortSignal): Promise<void> {
    const worker = this.#queue.run((uid) => this.#process(uid), {
      signal,
      workers: 2,
      onError: (uid, error) =>
        this.#o.logger.error(
          { source: 'kubernetes', podUID: uid, err: messageOf(error) },
          'pod release handler failed',
        ),
    });
    try {
      for await (const item of items) await this.#take(item);
    } finally {
      this.#queue.shutDown();
      await worker;
    }
  }

  /** A watched netns directory lost an entry: every waiting pod is looked at again now. */
  namespaceRemoved(): void {
    for (const [uid, t] of this.#tracked) if (t.waitingUntil !== undefined) this.#queue.add(uid);
  }

  /** The pipeline committed a release: an allocation recorded with a pod gets an Event on it. */
  released(intent: ReleaseIntent, released: readonly Allocation[], why: string): void {
    const events = this.#o.events;
    if (events === undefined) return;
    const byPod = new Map<string, { pod: PodRef; addresses: string[] }>();
    for (const a of released) {
      if (a.podUID === undefined || a.podNamespace === undefined || a.podName === undefined) continue;
      const entry = byPod.get(a.podUID) ?? {
        pod: { uid: a.podUID, namespace: a.podNamespace, name: a.podName },
        addresses: [],
      };
      entry.addresses.push(a.address);
      byPod.set(a.podUID, entry);
    }
    for (const { pod, addresses } of byPod.values()) {
      void events.record(
        podInvolved(pod),
        'Normal',
        REASON_RELEASED,
        `released ${addresses.join(', ')}: ${describe(intent, why)}`,
      );
    }
  }

  status(): KubernetesReleasesStatus {
    return {
      tracked: this.#tracked.size,
      waiting: [...this.#tracked]
        .filter(([, t]) => t.waitingUntil !== undefined)
        .map(([uid, t]) => ({
          pod: `${t.pod.namespace}/${t.pod.name}`,
          uid,
          because: t.because,
          until: this.#wallTime(t.waitingUntil),
        })),
      released: this.#released,
      gaveUp: this.#gaveUp,
      resyncs: this.#resyncs,
      queue: this.#queue.stats(),
    };
  }

  async #take(item: PodItem): Promise<void> {
    switch (item.kind) {
      case 'gone':
        this.#track(item.pod, item.because);
        return;
      case 'pod':
        // A pod the source reports alive again (a listing raced a deletion) is not gone.
        if (!item.pod.terminal) this.#untrack(item.pod.uid);
        return;
      case 'listed':
        await this.#resync(item.pods);
        return;
      default: {
        const never: never = item;
        throw new Error(`unhandled pod item ${JSON.stringify(never)}`);
      }
    }
  }

  #track(pod: PodRef, because: PodGoneBecause): void {
    if (!this.#tracked.has(pod.uid))
      this.#tracked.set(pod.uid, {
        pod: { uid: pod.uid, namespace: pod.namespace, name: pod.name },
        because,
        goneAt: momentOf(this.#o.clock),
      });
    this.#queue.add(pod.uid);
  }

  /** A moment as the wall-clock time it is due at, as status shows it. */
  #wallTime(m: Moment | undefined): string {
    if (m === undefined) return new Date(0).toISOString();
    const now = momentOf(this.#o.clock);
    return new Date(now.wall + msBetween(now, m)).toISOString();
  }

  #untrack(uid: string): void {
    this.#tracked.delete(uid);
    this.#queue.forget(uid);
  }

  /** After a listing: this node's allocations whose pod is not running, by UID. */
  async #resync(pods: ReadonlyMap<string, PodFact>): Promise<void> {
    const running = new Set<string>();
    for (const pod of pods.values()) {
      if (pod.terminal) continue;
      running.add(pod.uid);
      if (pod.mirrorOf !== undefined) running.add(pod.mirrorOf);
    }
    for (const pod of pods.values())
      if (pod.terminal) this.#track(pod, pod.phase === 'Succeeded' ? 'succeeded' : 'failed');
    let allocations: Allocation[];
    try {
      allocations = await this.#o.store.list({ node: this.#o.node });
    } catch (error) {
      this.#o.logger.warn(
        { source: 'kubernetes', err: messageOf(error) },
        'resync after listing could not read the store; the next listing tries again',
      );
      return;
    }
    const absent = new Map<string, PodRef>();
    for (const a of allocations) {
      // A bookkeeping record is no pod's, whatever it names (ipam/bookkeeping.ts).
      if (isBookkeeping(a) || a.podUID === undefined || running.has(a.podUID) || this.#tracked.has(a.podUID)) continue;
      absent.set(a.podUID, { uid: a.podUID, namespace: a.podNamespace ?? '', name: a.podName ?? '' });
    }
    for (const pod of absent.values()) {
      if (await this.#stillExists(pod)) continue;
      this.#track(pod, 'absent-from-listing');
    }
    this.#resyncs += 1;
  }

  /** Whether the API server still has the pod; an error counts as "it may": nothing is judged unseen. */
  async #stillExists(pod: PodRef): Promise<boolean> {
    if (this.#o.podExists === undefined || pod.namespace === '' || pod.name === '') return false;
    try {
      return await this.#o.podExists(pod);
    } catch (error) {
      this.#o.logger.warn(
        { source: 'kubernetes', pod: `${pod.namespace}/${pod.name}`, podUID: pod.uid, err: messageOf(error) },
        'could not confirm that a pod missing from the listing is gone; the next listing looks again',
      );
      return true;
    }
  }

  async #process(uid: string): Promise<void> {
    const tracked = this.#tracked.get(uid);
    if (tracked === undefined) return;
    const intent: ReleaseIntent = {
      kind: 'pod-gone',
      pod: tracked.pod,
      because: tracked.because,
      goneAt: tracked.goneAt,
      releaseAfter: shifted(tracked.goneAt, this.#o.graceMs),
    };
    try {
      const { released, action } = await this.#o.pipeline.attempt(intent);
      this.#released += released.length;
      if (action.kind === 'wait-until') {
        tracked.waitingUntil = action.until;
        this.#queue.forget(uid);
        // The grace is measured on the monotonic clock: a wall clock stepped meanwhile neither cuts nor stretches it.
        this.#queue.addAfter(uid, Math.max(0, msBetween(momentOf(this.#o.clock), action.until)));
        return;
      }
      this.#untrack(uid);
    } catch (error) {
      if (this.#queue.retries(uid) < this.#maxRetries) {
        this.#queue.addRateLimited(uid);
        return;
      }
      this.#gaveUp += 1;
      const { pod } = tracked;
      this.#o.logger.warn(
        {
          source: 'kubernetes',
          pod: `${pod.namespace}/${pod.name}`,
          podUID: uid,
          err: messageOf(error),
          attempts: this.#maxRetries + 1,
        },
        'gave up releasing a gone pod; the next listing looks again',
      );
      this.#untrack(uid);
      if (pod.namespace !== '' && pod.name !== '') {
        await this.#o.events?.record(
          podInvolved(pod),
          'Warning',
          REASON_FAILED,
          `could not release its addresses after ${this.#maxRetries + 1} attempts: ${messageOf(error)}`,
        );
      }
    }
  }
}

/** Why, in an Event's words. */
function describe(intent: ReleaseIntent, why: string): string {
  switch (intent.kind) {
    case 'pod-gone':
      return `pod ${intent.because === 'absent-from-listing' ? 'no longer listed' : intent.because}; ${why}`;
    case 'container-deleted':
    case 'absent-at-resync':
      return 'sandbox deleted';
    case 'task-exited':
    case 'namespace-recheck':
    case 'netns-gone':
      return 'network namespace gone';
    case 'journal-del':
      return 'missed CNI DEL';
    default: {
      const never: never = intent;
      throw new Error(`unhandled intent ${JSON.stringify(never)}`);
    }
  }
}
