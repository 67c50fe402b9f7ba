/**
 * The two requests list-then-watch is made of, over one Kubernetes collection: one listing and one
 * watch, each made once, through the store's API client (store/kubernetes/api-client.ts: its
 * keep-alive connections, TLS and credentials), shared or opened at first use (on-demand-client.ts).
 * No retry, no backoff, no state between requests: list-watch.ts decides what follows what.
 *
 * Guarantees:
 * - neither request throws: a listing answers the objects and the listing's resourceVersion, or a
 *   failure; it is read in pages of LIST_PAGE objects (`limit`, then `continue` while the server
 *   gives one), so no answer outgrows the client's cap; a continue token that expired is a failure
 *   (the loop lists again after its backoff); a watch answers how it ended (the server ended it,
 *   410 Gone, another failure, or the abort), once;
 * - a watch hands on ADDED, MODIFIED and DELETED events and BOOKMARKs in the order the server sent
 *   them, and nothing after it ended; an ERROR event ends it (410 in its Status: `expired`);
 * - `accepted` is told once the server accepted the watch (200, the stream open), and never after
 *   the watch ended;
 * - an ended watch's stream is closed at once; a listing the caller aborted answers at once (the
 *   request ends on its own deadline, or with the client);
 * - a watch silent for a minute beyond the server's own watch timeout is a dead connection: it is
 *   closed and ends as a failure (`Timeout`), so the loop backs off and watches again.
 *
 * Each request is counted and carries the agent's User-Agent (`accounting`, on-demand-client.ts),
 * by the client, once, by how it ended (its status, or unreachable).
 *
 * The objects are the JSON the server sent (no client-side model classes: timestamps stay strings).
 */
import type { KubeApiClient } from '../../store/kubernetes/api-client.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';
import { defined } from '../../core/defined.ts';
import { OnDemandClient, type RequestAccounting } from './on-demand-client.ts';
import { type ApiFailure, failureOfError, failureOfStatus, isExpired } from './api-failure.ts';

/** How long a watch may stay silent beyond the server's own watch timeout before it counts as dead. */
const INACTIVITY_MARGIN_MS = 60_000;

/**
 * The most a watch's answer may stay silent: the longest watch timeout asked of the server plus
 * INACTIVITY_MARGIN_MS. (The name is the limit undici's fetch put on a silent body, 300 s, when the
 * sources went through @kubernetes/client-node; the watch timeout is still kept a minute inside it.)
 */
export const FETCH_BODY_TIMEOUT_SECONDS = 300;

/**
 * The server's `timeoutSeconds` for a watch unless told otherwise, and the most it is asked for: a
 * minute inside FETCH_BODY_TIMEOUT_SECONDS, so the server ends a watch with nothing to say cleanly
 * (and the loop re-opens it from its resourceVersion, quietly) before the client would cut it as a
 * failure. At 300 s the two raced, and an idle watch was cut and logged at warn every 5 minutes.
 */
export const WATCH_TIMEOUT_SECONDS = 240;

/** The watch timeout asked of the server: `configured` (default WATCH_TIMEOUT_SECONDS), at most that. */
export function watchTimeoutSeconds(configured: number | undefined): number {
  return Math.min(configured ?? WATCH_TIMEOUT_SECONDS, WATCH_TIMEOUT_SECONDS);
}

/**
 * Objects asked for per page of a listing, as client-go's reflector asks: each answer stays far
 * below the client's cap on an answer (16 MiB) however large the collection (a cluster's Nodes).
 * A server may ignore it and answer whole.
 */
const LIST_PAGE = 500;

/** A page of a listing, as far as it is read here. */
interface ListBody {
  readonly items?: unknown;
  readonly metadata?: { readonly resourceVersion?: unknown; readonly continue?: unknown };
}

export interface CollectionOptions {
  readonly kubeConfig: KubeAccess;
  /** The client to ask through (the agent's one); none: one of the kubeconfig's, opened at first use. */
  readonly client?: OnDemandClient | undefined;
  /** The collection, e.g. `/api/v1/pods`. */
  readonly path: string;
  readonly fieldSelector?: string | undefined;
  readonly labelSelector?: string | undefined;
  /** How long the server keeps one watch open (its `timeoutSeconds`); see watchTimeoutSeconds. */
  readonly watchTimeoutSeconds?: number | undefined;
  /** How long a watch may stay silent before it counts as dead, ms (tests). Default the watch timeout + 60 s. */
  readonly watchSilenceMs?: number | undefined;
  /** Where each request is counted, and what it says it is (for a client opened here). */
  readonly accounting?: RequestAccounting | undefined;
}

export type Listing<T> =
  | { readonly kind: 'listed'; readonly objects: T[]; readonly resourceVersion: string }
  | { readonly kind: 'failed'; readonly failure: ApiFailure };

export type WatchEnd =
  /** The server ended the stream cleanly; `delivered`: an object or a bookmark came first. */
  | { readonly kind: 'ended'; readonly delivered: boolean }
  /** 410 Gone: the resourceVersion is too old. */
  | { readonly kind: 'expired'; readonly failure: ApiFailure }
  | { readonly kind: 'failed'; readonly failure: ApiFailure }
  | { readonly kind: 'aborted' };

/** What one watch tells its caller while it is open. */
export interface WatchHandlers<T> {
  change(kind: 'added' | 'modified' | 'deleted', object: T): void;
  /** A BOOKMARK: the collection stands at its resourceVersion, nothing changed. */
  bookmark(object: unknown): void;
  /** The server accepted the watch. */
  accepted(): void;
  /** An event of a type this client does not know; skipped. */
  unknown(type: string): void;
}

export class CollectionRequests<T> {
  readonly #o: CollectionOptions;
  readonly #client: OnDemandClient;
  /** Whether the client was opened here, and is closed with these requests. */
  readonly #ownClient: boolean;

  constructor(options: CollectionOptions) {
    this.#o = options;
    this.#ownClient = options.client === undefined;
    this.#client = options.client ?? OnDemandClient.of(options.kubeConfig, defined(options.accounting ?? {}));
  }

  #selectors(): Record<string, string | undefined> {
    return { fieldSelector: this.#o.fieldSelector, labelSelector: this.#o.labelSelector };
  }

  /** One listing, as the server sent it. */
  async list(signal: AbortSignal): Promise<Listing<T>> {
    let onAbort = (): void => undefined;
    const aborted = new Promise<Listing<T>>((resolve) => {
      onAbort = () => resolve({ kind: 'failed', failure: { message: 'the listing was aborted' } });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([this.#list(), aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  async #list(): Promise<Listing<T>> {
    try {
      const client = await this.#client.get();
      const objects: T[] = [];
      let from: string | undefined;
      let version: unknown;
      do {
        const answer = await client.send(`list ${this.#o.path}`, {
          method: 'GET',
          path: this.#o.path,
          query: { ...this.#selectors(), limit: LIST_PAGE, continue: from },
        });
        if (answer.status !== 200) return { kind: 'failed', failure: answer.failure };
        const page = answer.body as ListBody | undefined;
        const items = page?.items;
        if (!(Array.isArray(items) || items === null))
          return { kind: 'failed', failure: { message: 'the listing has no items' } };
        objects.push(...((items ?? []) as T[]));
        // Every page is served at the first page's resourceVersion (the listing's snapshot).
        version ??= page?.metadata?.resourceVersion;
        const next = page?.metadata?.continue;
        from = typeof next === 'string' && next !== '' ? next : undefined;
      } while (from !== undefined);
      if (typeof version !== 'string' || version === '')
        return { kind: 'failed', failure: { message: 'the listing has no metadata.resourceVersion' } };
      return { kind: 'listed', objects, resourceVersion: version };
    } catch (error) {
      return { kind: 'failed', failure: failureOfError(error) };
    }
  }

  /** One watch from `resourceVersion` (with bookmarks), until it ends, fails, expires or `signal` aborts. */
  async watch(resourceVersion: string, handlers: WatchHandlers<T>, signal: AbortSignal): Promise<WatchEnd> {
    if (signal.aborted) return { kind: 'aborted' };
    let client: KubeApiClient;
    try {
      client = await this.#client.get();
    } catch (error) {
      return signal.aborted ? { kind: 'aborted' } : { kind: 'failed', failure: failureOfError(error) };
    }
    let delivered = false;
    let ended: WatchEnd | undefined;
    const closing = new AbortController();
    const stop = (end: WatchEnd): void => {
      ended ??= end;
      closing.abort();
    };
    const silentMs =
      this.#o.watchSilenceMs ?? watchTimeoutSeconds(this.#o.watchTimeoutSeconds) * 1000 + INACTIVITY_MARGIN_MS;
    let silence: NodeJS.Timeout | undefined;
    const heard = (): void => {
      clearTimeout(silence);
      silence = setTimeout(() => {
        const message = `no data from the API server within the watch inactivity timeout (${silentMs} ms)`;
        stop({ kind: 'failed', failure: { reason: 'Timeout', message } });
      }, silentMs);
      silence.unref();
    };
    const onAbort = (): void => stop({ kind: 'aborted' });
    signal.addEventListener('abort', onAbort, { once: true });
    const onLine = (line: unknown): void => {
      if (ended !== undefined) return;
      heard();
      const event = line as { type?: unknown; object?: unknown } | null;
      const type = typeof event?.type === 'string' ? event.type : String(event?.type);
      switch (type) {
        case 'ADDED':
        case 'MODIFIED':
        case 'DELETED': {
          delivered = true;
          const kind = type === 'ADDED' ? 'added' : type === 'MODIFIED' ? 'modified' : 'deleted';
          handlers.change(kind, event?.object as T);
          return;
        }
        case 'BOOKMARK':
          delivered = true;
          handlers.bookmark(event?.object);
          return;
        case 'ERROR': {
          const failure = failureOfStatus(event?.object);
          stop(isExpired(failure) ? { kind: 'expired', failure } : { kind: 'failed', failure });
          return;
        }
        default:
          handlers.unknown(type);
      }
    };
    const query = {
      watch: 'true',
      resourceVersion,
      allowWatchBookmarks: 'true',
      timeoutSeconds: watchTimeoutSeconds(this.#o.watchTimeoutSeconds),
      ...this.#selectors(),
    };
    heard();
    try {
      const answer = await client.stream(
        `watch ${this.#o.path}`,
        { path: this.#o.path, query },
        onLine,
        closing.signal,
        (status) => {
          if (status === 200 && ended === undefined) handlers.accepted();
        },
      );
      if (ended !== undefined) return ended;
      if (answer.status === 200) return { kind: 'ended', delivered };
      const failure = answer.failure;
      return isExpired(failure) ? { kind: 'expired', failure } : { kind: 'failed', failure };
    } catch (error) {
      if (ended !== undefined) return ended;
      return { kind: 'failed', failure: failureOfError(error) };
    } finally {
      clearTimeout(silence);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Closes the client, when it was opened here (a shared one is its owner's to close). */
  close(): void {
    if (this.#ownClient) this.#client.close();
  }
}
