/**
 * The two requests list-then-watch is made of, over one Kubernetes collection: one listing and one
 * watch, each made once, through @kubernetes/client-node's HTTP layer (its TLS and credentials).
 * No retry, no backoff, no state between requests: list-watch.ts decides what follows what.
 *
 * Guarantees:
 * - neither request throws: a listing answers the objects and the listing's resourceVersion, or a
 *   failure; a watch answers how it ended (the server ended it, 410 Gone, another failure, or the
 *   abort), once;
 * - a watch hands on ADDED, MODIFIED and DELETED events and BOOKMARKs in the order the server sent
 *   them, and nothing after it ended; an ERROR event ends it (410 in its Status: `expired`);
 * - `accepted` is told once the server accepted the watch (200, the stream open), and never after
 *   the watch ended;
 * - an ended watch's stream is closed: at once, or when its response head arrives (the library's
 *   Watch gives no handle before that; its timeout bounds the wait). The Watch's inactivity timeout
 *   is set a minute beyond the server's own watch timeout, so only a dead connection hits it.
 *
 * Each request is counted and carries the agent's User-Agent (`accounting`, counted-http.ts): the
 * listing by its HTTP layer, the watch here, once, by how it opened (200, refused, or no answer).
 *
 * The objects are the JSON the server sent (no client-side model classes: timestamps stay strings).
 */
import { type HttpLibrary, type KubeConfig, HttpMethod, RequestContext, Watch } from '@kubernetes/client-node';
import { defined } from '../../core/defined.ts';
import { type RequestAccounting, countedHttpLibrary, identifiedConfig } from './counted-http.ts';
import { type ApiFailure, failureOfError, failureOfResponse, failureOfStatus, isExpired } from './api-failure.ts';

/** The Watch's inactivity timeout beyond the server's own watch timeout. */
const INACTIVITY_MARGIN_MS = 60_000;

/**
 * How long the body of a response may stay silent before undici's fetch, under the library's
 * Watch, cuts it (UND_ERR_BODY_TIMEOUT; undici's default `bodyTimeout`, which the kubeconfig's
 * dispatcher keeps).
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

export interface CollectionOptions {
  readonly kubeConfig: KubeConfig;
  /** The collection, e.g. `/api/v1/pods`. */
  readonly path: string;
  readonly fieldSelector?: string | undefined;
  readonly labelSelector?: string | undefined;
  /** How long the server keeps one watch open (its `timeoutSeconds`); see watchTimeoutSeconds. */
  readonly watchTimeoutSeconds?: number | undefined;
  /** Where each request is counted, and what it says it is (counted-http.ts). */
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
  readonly #watch: Watch;
  readonly #http: HttpLibrary;

  constructor(options: CollectionOptions) {
    this.#o = options;
    const accounting = options.accounting ?? {};
    this.#http = countedHttpLibrary(accounting);
    this.#watch = new Watch(identifiedConfig(options.kubeConfig, accounting.userAgent));
    // 2.0.1 keeps the inactivity timeout in a field its typings call private (default 30 s, re-armed
    // on every chunk); left at 30 s, every quiet half-minute would cut the watch.
    const timeoutMs = watchTimeoutSeconds(options.watchTimeoutSeconds) * 1000 + INACTIVITY_MARGIN_MS;
    if (typeof Reflect.get(this.#watch, 'requestTimeoutMs') === 'number')
      Reflect.set(this.#watch, 'requestTimeoutMs', timeoutMs);
  }

  #url(): URL {
    const cluster = this.#o.kubeConfig.getCurrentCluster();
    if (cluster === null) throw new Error('the kubeconfig names no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + this.#o.path);
    if (this.#o.fieldSelector !== undefined) url.searchParams.set('fieldSelector', this.#o.fieldSelector);
    if (this.#o.labelSelector !== undefined) url.searchParams.set('labelSelector', this.#o.labelSelector);
    return url;
  }

  /** One listing, as the server sent it. */
  async list(signal: AbortSignal): Promise<Listing<T>> {
    try {
      const context = new RequestContext(this.#url().toString(), HttpMethod.GET);
      await this.#o.kubeConfig.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', 'application/json');
      context.setSignal(signal);
      const response = await this.#http.send(context).toPromise();
      const text = await response.body.text();
      if (response.httpStatusCode !== 200)
        return { kind: 'failed', failure: failureOfResponse(response.httpStatusCode, text) };
      const list: unknown = JSON.parse(text);
      const items = (list as { items?: unknown }).items;
      const version = (list as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;
      if (!(Array.isArray(items) || items === null) || typeof version !== 'string' || version === '') {
        return { kind: 'failed', failure: { message: 'the listing has no items or no metadata.resourceVersion' } };
      }
      return { kind: 'listed', objects: (items ?? []) as T[], resourceVersion: version };
    } catch (error) {
      return { kind: 'failed', failure: failureOfError(error) };
    }
  }

  /** One watch from `resourceVersion` (with bookmarks), until it ends, fails, expires or `signal` aborts. */
  watch(resourceVersion: string, handlers: WatchHandlers<T>, signal: AbortSignal): Promise<WatchEnd> {
    let delivered = false;
    // Counted once, by how it opened: accepted (200), refused (its status) or no answer.
    let counted = false;
    const countOnce = (status: number | undefined): void => {
      if (counted) return;
      counted = true;
      this.#o.accounting?.requests?.countRequest('GET', this.#o.path, true, status);
    };
    return new Promise<WatchEnd>((resolve) => {
      let settled = false;
      let controller: AbortController | undefined;
      const finish = (end: WatchEnd): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        controller?.abort();
        resolve(end);
      };
      const onAbort = (): void => finish({ kind: 'aborted' });
      signal.addEventListener('abort', onAbort, { once: true });

      const onEvent = (type: string, object: unknown): void => {
        if (settled) return;
        switch (type) {
          case 'ADDED':
          case 'MODIFIED':
          case 'DELETED': {
            delivered = true;
            const kind = type === 'ADDED' ? 'added' : type === 'MODIFIED' ? 'modified' : 'deleted';
            handlers.change(kind, object as T);
            return;
          }
          case 'BOOKMARK':
            delivered = true;
            handlers.bookmark(object);
            return;
          case 'ERROR': {
            const failure = failureOfStatus(object);
            finish(isExpired(failure) ? { kind: 'expired', failure } : { kind: 'failed', failure });
            return;
          }
          default:
            handlers.unknown(type);
        }
      };
      const onDone = (error: unknown): void => {
        if (error === null || error === undefined) {
          countOnce(200);
          finish({ kind: 'ended', delivered });
        } else {
          const failure = failureOfError(error);
          countOnce(failure.code);
          finish(isExpired(failure) ? { kind: 'expired', failure } : { kind: 'failed', failure });
        }
      };
      const query = {
        resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: watchTimeoutSeconds(this.#o.watchTimeoutSeconds),
        ...defined({ fieldSelector: this.#o.fieldSelector, labelSelector: this.#o.labelSelector }),
      };
      this.#watch.watch(this.#o.path, query, onEvent, onDone).then(
        (opened) => {
          countOnce(200);
          controller = opened;
          if (settled) {
            opened.abort();
            return;
          }
          handlers.accepted();
        },
        (error: unknown) => finish({ kind: 'failed', failure: failureOfError(error) }),
      );
    });
  }
}
