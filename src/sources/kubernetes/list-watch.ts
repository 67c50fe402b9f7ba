/**
 * List-then-watch over one Kubernetes collection, forever: an `AsyncIterable` that stops on an
 * `AbortSignal`. It lists `path` (with a field and label selector), yields the whole listing as one
 * `listed` item, then watches from the listing's resourceVersion with bookmarks and yields each
 * change. It is the loop @kubernetes/client-node's informer is not: that one stops on any error but
 * 410 and never restarts itself.
 *
 * Guarantees:
 * - items come out in the order the server sent them; a `listed` item is the complete set as of
 *   its resourceVersion and marks the end of that listing, and every change after it follows it;
 *   BOOKMARK and ERROR events never reach the consumer;
 * - the last resourceVersion seen (of an object or a BOOKMARK) is where the next watch starts: a
 *   watch the server ends (its timeout) is re-opened from there at once, a watch cut mid-stream or
 *   refused is re-opened from there after a backoff — neither lists again;
 * - 410 Gone (the HTTP status, or an ERROR event carrying a Status with code 410) lists again at
 *   once, and the consumer gets a new `listed` item with the truth; only if the expired version
 *   came straight from a listing (the server contradicts itself) is there a backoff first;
 * - any other failure (no connection, 5xx, 401, 403, a timeout) is retried after the backoff
 *   policy's delay on the injected clock, forever; the count of failures in a row resets when a
 *   listing succeeds or a watch is accepted. A 403 names the missing permission in `status()`;
 * - an abort ends the iterable promptly: the backoff timer is cancelled, a listing in flight is
 *   aborted, the watch stream is closed;
 * - the client's `relist` (OnDemandClient: the operator accepted an API server that lost its data)
 *   ends the listing, watch or backoff under way and lists again at once: the version reached is
 *   the old data's, and a watch from a version the server has not reached yet stays silent until
 *   it does, so every change up to there would be missed.
 *
 * The requests themselves, each made once, are collection-requests.ts's; this module is the loop
 * and its policy around them. The objects are the JSON the server sent (no client-side model
 * classes: timestamps stay strings), the same for listed and watched objects; `T` describes them,
 * and the consumer validates what it uses.
 */
import type { Logger } from 'pino';
import { AsyncChannel } from '../../core/async-channel.ts';
import { type BackoffPolicy, ExponentialBackoff } from '../../core/backoff.ts';
import { type Clock, sleepOn } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';
import { type ApiFailure, describeFailure, missingPermission } from './api-failure.ts';
import { CollectionRequests, type WatchEnd } from './collection-requests.ts';
import type { OnDemandClient, RequestAccounting } from './on-demand-client.ts';

/** What any watched object carries: where the collection stands after it. */
export interface KubeObjectMeta {
  readonly metadata?: { readonly resourceVersion?: string };
}

export type ListWatchItem<T> =
  /** The complete collection as listed; marks the end of the listing (first, and after each relist). */
  | { readonly kind: 'listed'; readonly objects: readonly T[] }
  | { readonly kind: 'added' | 'modified' | 'deleted'; readonly object: T };

/**
 * `listing` from the start of a listing until the watch after it is accepted; `watching` while an
 * accepted watch is open (and while one the server ended is re-opened); `backing-off` from a
 * failure until a listing starts or a watch is accepted; `stopped` once the iteration ended.
 */
export type ListWatchState = 'listing' | 'watching' | 'backing-off' | 'stopped';

export interface ListWatchStatus {
  readonly state: ListWatchState;
  /** When the state last changed (ISO 8601). */
  readonly since: string;
  /** Listings after the first (each after a 410 Gone). */
  readonly relists: number;
  /** Watches re-opened from a kept resourceVersion (server timeout, cut stream, refused watch). */
  readonly reconnects: number;
  /** The last resourceVersion seen, of a listing, an object or a bookmark. */
  readonly resourceVersion?: string;
  readonly lastListedAt?: string;
  readonly lastError?: string;
  /** While waiting out a backoff: when the next attempt is due (gone once the attempt is under way). */
  readonly retryAt?: string;
  /** The permission a 403 said is missing ("list pods"), until a listing or watch is accepted. */
  readonly forbidden?: string;
}

export interface ListWatchOptions {
  readonly kubeConfig: KubeAccess;
  /** The client to ask through (the agent's one); none: one opened here, closed when the iteration ends. */
  readonly client?: OnDemandClient | undefined;
  /** The collection, e.g. `/api/v1/pods`. */
  readonly path: string;
  readonly fieldSelector?: string;
  readonly labelSelector?: string;
  readonly clock: Clock;
  /** Between failed attempts. Default 1 s doubling to 30 s. */
  readonly backoff?: BackoffPolicy | undefined;
  readonly logger: Logger;
  /**
   * How long the server keeps one watch open (its `timeoutSeconds`); the client's inactivity timeout
   * is a minute beyond it, so a quiet but healthy watch is ended by the server, cleanly, and
   * only a dead connection by the timeout. Default and most: 240 (collection-requests.ts
   * WATCH_TIMEOUT_SECONDS, a minute inside the client's limit on a silent watch).
   */
  readonly watchTimeoutSeconds?: number | undefined;
  /** Where each request is counted, and the User-Agent it carries (on-demand-client.ts). */
  readonly accounting?: RequestAccounting | undefined;
}

/**
 * A watch shorter than this that delivered nothing and ended cleanly counts as a failure, so a
 * server that ends every watch at once is not hammered.
 */
const MIN_WATCH_MS = 1_000;

export class ListWatch<T extends KubeObjectMeta> {
  readonly #o: ListWatchOptions;
  readonly #backoff: BackoffPolicy;
  readonly #resource: string;
  readonly #requests: CollectionRequests<T>;
  #state: ListWatchState = 'listing';
  #since: number;
  /** Failed attempts in a row; the backoff grows with it. */
  #failures = 0;
  #listings = 0;
  #reconnects = 0;
  /** Where the next watch starts; undefined: list first. */
  #resourceVersion: string | undefined;
  /**
   * The resourceVersion is a listing's own (no event moved it yet): a 410 for it is the server
   * contradicting itself.
   */
  #versionFromListing = false;
  #lastListedAt: number | undefined;
  #lastError: string | undefined;
  #retryAt: number | undefined;
  #forbidden: string | undefined;
  #iterated = false;
  /** A watch was opened since the last listing: the next one is a reconnect. */
  #watchedSinceListing = false;
  /** The client asked for a listing again (`relist`): the next attempt lists. */
  #relistDue = false;

  constructor(options: ListWatchOptions) {
    this.#o = options;
    this.#backoff = options.backoff ?? new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 });
    this.#resource =
      options.path
        .split('/')
        .filter((part) => part !== '')
        .at(-1) ?? options.path;
    this.#since = options.clock.now();
    this.#requests = new CollectionRequests<T>(options);
  }

  get state(): ListWatchState {
    return this.#state;
  }

  /** Listings and changes until `signal` aborts (or the consumer stops iterating). Iterated once. */
  async *events(signal: AbortSignal): AsyncGenerator<ListWatchItem<T>> {
    if (this.#iterated) throw new Error('a ListWatch is iterated once');
    this.#iterated = true;
    const channel = new AsyncChannel<ListWatchItem<T>>();
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) stop.abort();
    const running = this.#run(channel, stop.signal).finally(() => {
      this.#setState('stopped');
      this.#requests.close();
      channel.close();
    });
    try {
      yield* channel;
    } finally {
      stop.abort();
      signal.removeEventListener('abort', onAbort);
      await running;
    }
  }

  status(): ListWatchStatus {
    const iso = (ms: number): string => new Date(ms).toISOString();
    return {
      state: this.#state,
      since: iso(this.#since),
      relists: Math.max(0, this.#listings - 1),
      reconnects: this.#reconnects,
      ...defined({ resourceVersion: this.#resourceVersion }),
      ...(this.#lastListedAt === undefined ? {} : { lastListedAt: iso(this.#lastListedAt) }),
      ...defined({ lastError: this.#lastError }),
      ...(this.#retryAt === undefined ? {} : { retryAt: iso(this.#retryAt) }),
      ...defined({ forbidden: this.#forbidden }),
    };
  }

  async #run(channel: AsyncChannel<ListWatchItem<T>>, signal: AbortSignal): Promise<void> {
    let attempt = new AbortController();
    const stopRelists = this.#o.client?.whenRelist(() => {
      this.#relistDue = true;
      attempt.abort();
    });
    try {
      while (!signal.aborted) {
        attempt = new AbortController();
        await this.#attempt(channel, AbortSignal.any([signal, attempt.signal]));
      }
    } finally {
      stopRelists?.();
    }
  }

  /** A listing when due, then one watch; `step` ends either early (the iteration's abort, or a relist). */
  async #attempt(channel: AsyncChannel<ListWatchItem<T>>, step: AbortSignal): Promise<void> {
    if (this.#relistDue) {
      this.#relistDue = false;
      this.#resourceVersion = undefined;
    }
    if (this.#resourceVersion === undefined) {
      this.#setState('listing');
      const listing = await this.#requests.list(step);
      if (step.aborted) return;
      if (listing.kind === 'failed') return this.#backOff(listing.failure, 'list', step);
      this.#listings += 1;
      this.#failures = 0;
      this.#forbidden = undefined;
      this.#lastListedAt = this.#o.clock.now();
      this.#resourceVersion = listing.resourceVersion;
      this.#versionFromListing = true;
      this.#watchedSinceListing = false;
      channel.push({ kind: 'listed', objects: listing.objects });
      this.#o.logger.info(
        {
          path: this.#o.path,
          objects: listing.objects.length,
          resourceVersion: listing.resourceVersion,
          relists: this.#listings - 1,
        },
        'kubernetes: listed',
      );
    }
    if (this.#watchedSinceListing) this.#reconnects += 1;
    this.#watchedSinceListing = true;
    const startedAt = this.#o.clock.monotonic();
    const end = await this.#watchFrom(this.#resourceVersion, channel, step);
    switch (end.kind) {
      case 'aborted':
        return;
      case 'ended':
        // The server's watch timeout: re-open at once, unless it ended before it began.
        if (!end.delivered && this.#o.clock.monotonic() - startedAt < MIN_WATCH_MS)
          await this.#backOff({ message: 'the API server ended the watch at once' }, 'watch', step);
        return;
      case 'expired':
        this.#o.logger.info(
          { path: this.#o.path, resourceVersion: this.#resourceVersion, err: describeFailure(end.failure) },
          'kubernetes: resourceVersion expired; listing again',
        );
        if (this.#versionFromListing) await this.#backOff(end.failure, 'watch', step);
        this.#resourceVersion = undefined;
        return;
      case 'failed':
        return this.#backOff(end.failure, 'watch', step);
      default: {
        const never: never = end;
        throw new Error(`unhandled watch end ${JSON.stringify(never)}`);
      }
    }
  }

  /** One watch from `resourceVersion`, until it ends, fails, expires or `signal` aborts. */
  #watchFrom(resourceVersion: string, channel: AsyncChannel<ListWatchItem<T>>, signal: AbortSignal): Promise<WatchEnd> {
    return this.#requests.watch(
      resourceVersion,
      {
        change: (kind, object) => {
          this.#advance(object);
          channel.push({ kind, object });
        },
        bookmark: (object) => this.#advance(object),
        accepted: () => {
          // Accepted (200, the stream open): the failures in a row are over.
          this.#failures = 0;
          this.#forbidden = undefined;
          this.#setState('watching');
        },
        unknown: (type) =>
          this.#o.logger.warn({ path: this.#o.path, type }, 'kubernetes: watch event of an unknown type skipped'),
      },
      signal,
    );
  }

  /** The collection stands at the object's (or bookmark's) resourceVersion now. */
  #advance(object: unknown): void {
    const version = (object as KubeObjectMeta | null)?.metadata?.resourceVersion;
    if (typeof version !== 'string' || version === '') return;
    this.#resourceVersion = version;
    this.#versionFromListing = false;
  }

  /** Records the failure and waits out the backoff (or the abort). */
  async #backOff(failure: ApiFailure, verb: 'list' | 'watch', signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    this.#failures += 1;
    const wait = this.#backoff.delay(this.#failures);
    const described = describeFailure(failure);
    this.#lastError = described;
    const forbidden = missingPermission(failure, verb, this.#resource);
    if (forbidden !== undefined) this.#forbidden = forbidden;
    this.#retryAt = this.#o.clock.now() + wait;
    this.#setState('backing-off');
    this.#o.logger.warn(
      {
        path: this.#o.path,
        verb,
        err: described,
        retryInMs: wait,
        ...defined({ missingPermission: forbidden }),
      },
      forbidden === undefined
        ? `kubernetes: ${verb} failed; retrying`
        : `kubernetes: ${verb} refused: the service account may not ${forbidden}; retrying`,
    );
    await sleepOn(this.#o.clock, wait, signal);
    this.#retryAt = undefined;
  }

  #setState(state: ListWatchState): void {
    if (state === this.#state) return;
    this.#state = state;
    this.#since = this.#o.clock.now();
  }
}
