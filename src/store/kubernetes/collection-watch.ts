/**
 * What the cluster tier keeps in step with instead of polling: one collection of Warren's objects
 * (narrowed by a label or field selector to what this node needs: its own blocks, the requests
 * addressed to ranges it holds, one named object), listed once and then watched, held in memory.
 * Readers ask the copy (`get`, `values`) and are told of each change (`listen`); nobody lists again
 * to find out what changed. Written here, not taken from @kubernetes/client-node's informer: the
 * tier speaks to the API server through its own client (api-client.ts: one per agent, the
 * revisions it sees checked by continuity.ts, its requests counted), which the informer cannot use,
 * and the informer stops on any error but 410.
 *
 * Guarantees:
 * - requests: one listing (its pages) at start; then one watch at a time, from the resourceVersion
 *   reached (of an object or a bookmark), each ended by the server after `timeoutSeconds` and
 *   opened again from there; a listing again only when the server answers 410 Gone (the version is
 *   older than it keeps) or the operator accepts a store that lost its data (Resource.whenAccepted:
 *   the version reached is the old store's, and a watch from a version the API server has not
 *   reached yet stays silent until it does, so changes up to there would be missed: the watch in
 *   flight is ended and the collection listed again at once), never on a timer. A watch the
 *   server ends at once is not opened again sooner than 1 s after, and a failure (no connection,
 *   5xx, 403) is retried from the version reached after a backoff on the clock (1 s doubling to
 *   30 s), or as soon as the API server answers another request after it was away
 *   (KubeApiClient.whenBack: once each time it comes back), so the copy is not left up to 30 s
 *   behind an API server that came back: the traffic is bounded whatever the server does;
 * - the copy is the collection as of the last event applied: after a listing (the first, or one
 *   after 410 or an accept), objects the listing lacks are told as deleted, new or changed ones as
 *   added or modified, so a listener misses no change across a relisting, and is told none twice;
 * - `synced()` resolves once the first listing is in the copy; before that `get` and `values`
 *   answer from nothing and `isSynced` is false, so a caller that must not act on an empty copy
 *   can tell;
 * - an object `decode` refuses (malformed: another writer, another version) is left out of the
 *   copy as if absent, and counted (`status().refused`);
 * - a listener that throws is its own failure: the others are still told, and so is it next time;
 * - `close` ends the watch and every timer; nothing is requested after it.
 */
import { ExponentialBackoff } from '../../core/backoff.ts';
import { type Clock, sleepOn } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { Resource, Selectors } from './resources.ts';

/** Between failed attempts: 1 s doubling to 30 s. */
const BACKOFF = new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 });
/** A watch that ended sooner than this is not opened again before it has lasted as long. */
const MIN_WATCH_MS = 1_000;
/** How long the server keeps one watch open: inside the HTTP client's limit on a silent body. */
const WATCH_TIMEOUT_SECONDS = 240;

export interface CollectionWatchOptions<T> {
  readonly resource: Resource;
  /** What is watched, in messages: `the blocks of node n1` ("watch …", "list …"). */
  readonly what: string;
  readonly selectors?: Selectors;
  /** The object as the reader uses it; undefined for one it cannot use (left out of the copy). */
  readonly decode: (object: unknown) => T | undefined;
  readonly clock: Clock;
  readonly timeoutSeconds?: number;
}

export type CollectionChange<T> =
  | { readonly type: 'added'; readonly name: string; readonly value: T }
  | { readonly type: 'modified'; readonly name: string; readonly value: T; readonly previous: T }
  | { readonly type: 'deleted'; readonly name: string; readonly previous: T };

export interface CollectionWatchStatus {
  /**
   * `listing` until a listing is in the copy; `opening` while a watch is asked for and the server
   * has not answered it yet (after a listing, and each time one ended and is opened again);
   * `watching` once the server answered 200 to the watch, until it ends; `backing-off` after a
   * failure. Only `watching` says the API server answered this watch just now.
   */
  readonly state: 'listing' | 'opening' | 'watching' | 'backing-off' | 'closed';
  readonly synced: boolean;
  /** Listings after the first (each after a 410 Gone). */
  readonly relists: number;
  /** Watches opened again from a kept resourceVersion. */
  readonly reconnects: number;
  readonly objects: number;
  /** Objects decode refused, over the copy's life. */
  readonly refused: number;
  readonly resourceVersion?: string;
  readonly lastError?: string;
}

interface Held<T> {
  readonly value: T;
  readonly version: string | undefined;
}

function metaOf(object: unknown): { name?: string; version?: string } {
  const m = (object as { metadata?: { name?: unknown; resourceVersion?: unknown } } | undefined)?.metadata;
  return {
    ...(typeof m?.name === 'string' ? { name: m.name } : {}),
    ...(typeof m?.resourceVersion === 'string' ? { version: m.resourceVersion } : {}),
  };
}

export class KubeCollectionWatch<T> {
  readonly #o: CollectionWatchOptions<T>;
  readonly #copy = new Map<string, Held<T>>();
  readonly #listeners = new Set<(change: CollectionChange<T>) => void>();
  readonly #abort = new AbortController();
  #state: CollectionWatchStatus['state'] = 'listing';
  #synced = false;
  #markSynced!: () => void;
  readonly #syncedPromise = new Promise<void>((resolve) => {
    this.#markSynced = resolve;
  });
  #relists = 0;
  #reconnects = 0;
  #refused = 0;
  #version: string | undefined;
  #lastError: string | undefined;
  #started = false;

  constructor(options: CollectionWatchOptions<T>) {
    this.#o = options;
  }

  /** Lists, then watches, until `close`. Idempotent. */
  start(): void {
    if (this.#started || this.#abort.signal.aborted) return;
    this.#started = true;
    void this.#run(this.#abort.signal);
  }

  /** Resolves once the first listing is in the copy (never, if closed before). */
  synced(): Promise<void> {
    return this.#syncedPromise;
  }

  get isSynced(): boolean {
    return this.#synced;
  }

  get(name: string): T | undefined {
    return this.#copy.get(name)?.value;
  }

  values(): T[] {
    return [...this.#copy.values()].map((h) => h.value);
  }

  /** Tells `listener` of every change from now on, until the function returned is called. */
  listen(listener: (change: CollectionChange<T>) => void): () => void {
    const own = (change: CollectionChange<T>) => listener(change);
    this.#listeners.add(own);
    return () => this.#listeners.delete(own);
  }

  status(): CollectionWatchStatus {
    return {
      state: this.#state,
      synced: this.#synced,
      relists: this.#relists,
      reconnects: this.#reconnects,
      objects: this.#copy.size,
      refused: this.#refused,
      ...defined({ resourceVersion: this.#version, lastError: this.#lastError }),
    };
  }

  close(): void {
    this.#state = 'closed';
    this.#listeners.clear();
    this.#abort.abort();
  }

  async #run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    // A listing is due: the first, after 410 Gone, and after the operator accepted a store that
    // lost its data (the version reached is the old store's, maybe ahead of all the API server holds
    // now, where a watch stays silent until it passes it: ../KUBERNETES-API.md §7, future RV). An
    // accept ends whatever the attempt is doing.
    let due = true;
    let attempt = new AbortController();
    const stopAccepts = this.#o.resource.whenAccepted(() => {
      due = true;
      attempt.abort();
    });
    while (!signal.aborted) {
      attempt = new AbortController();
      const step = AbortSignal.any([signal, attempt.signal]);
      const started = this.#clock.monotonic();
      try {
        if (due) {
          due = false;
          this.#state = 'listing';
          await this.#list();
          if (due) continue; // accepted while listing: what it read may be the old store's
        }
        this.#state = 'opening';
        const reached = await this.#o.resource.watch(
          `watch ${this.#o.what}`,
          this.#version,
          (type, object) => this.#apply(type, object),
          step,
          this.#o.timeoutSeconds ?? WATCH_TIMEOUT_SECONDS,
          this.#o.selectors ?? {},
          () => {
            if (!step.aborted) this.#state = 'watching';
          },
        );
        if (!signal.aborted) this.#state = 'opening'; // ended: open again (after a pause, or a listing)
        failures = 0;
        this.#lastError = undefined;
        if (reached === 'gone') {
          due = true; // the version is older than the server keeps: list again, now
          this.#relists += 1;
          continue;
        }
        if (reached !== undefined) this.#version = reached;
        if (attempt.signal.aborted) continue; // accepted: list again, now
        this.#reconnects += 1;
        const lasted = this.#clock.monotonic() - started;
        if (lasted < MIN_WATCH_MS) await sleepOn(this.#clock, MIN_WATCH_MS - lasted, step);
      } catch (error) {
        if (signal.aborted) break;
        if (attempt.signal.aborted) continue; // accepted mid-request: list again, now
        failures += 1;
        this.#lastError = messageOf(error);
        this.#state = 'backing-off';
        // The API server answering another request again ends the wait: the watch comes back with it.
        const back = new AbortController();
        const stop = this.#o.resource.whenBack(() => back.abort());
        await sleepOn(this.#clock, BACKOFF.delay(failures), AbortSignal.any([step, back.signal]));
        stop();
      }
    }
    stopAccepts();
    this.#state = 'closed';
  }

  get #clock(): Clock {
    return this.#o.clock;
  }

  /** Lists every page and makes the copy what the listing says, telling each difference. */
  async #list(): Promise<void> {
    const listing = await this.#o.resource.listAt(`list ${this.#o.what}`, this.#o.selectors ?? {});
    const seen = new Set<string>();
    for (const object of listing.items) {
      const { name } = metaOf(object);
      if (name === undefined) continue;
      seen.add(name);
      this.#apply('ADDED', object, true);
    }
    for (const [name, held] of [...this.#copy]) {
      if (seen.has(name)) continue;
      this.#copy.delete(name);
      this.#tell({ type: 'deleted', name, previous: held.value });
    }
    if (listing.resourceVersion !== undefined) this.#version = listing.resourceVersion;
    if (!this.#synced) {
      this.#synced = true;
      this.#markSynced();
    }
  }

  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown, fromListing = false): void {
    const { name, version } = metaOf(object);
    if (!fromListing && version !== undefined) this.#version = version;
    if (name === undefined) return;
    const before = this.#copy.get(name);
    if (type === 'DELETED') {
      if (before === undefined) return;
      this.#copy.delete(name);
      this.#tell({ type: 'deleted', name, previous: before.value });
      return;
    }
    // A listing repeats what the copy already has: an object at the same version is no change.
    if (before !== undefined && version !== undefined && before.version === version) return;
    const value = this.#o.decode(object);
    if (value === undefined) {
      this.#refused += 1;
      if (before === undefined) return;
      this.#copy.delete(name); // what it became cannot be used: as if gone
      this.#tell({ type: 'deleted', name, previous: before.value });
      return;
    }
    this.#copy.set(name, { value, version });
    this.#tell(
      before === undefined ? { type: 'added', name, value } : { type: 'modified', name, value, previous: before.value },
    );
  }

  #tell(change: CollectionChange<T>): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch {
        // A listener's failure is its own: the others are still told.
      }
    }
  }
}
