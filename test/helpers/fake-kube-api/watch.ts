/**
 * Watch streams: HTTP 200, chunked, one compact `{"type","object"}` JSON line per event.
 *
 * Guarantees, as the watch cache gives them:
 * - a watch from RV N delivers every later change of its resource once, in RV order, projected
 *   through its selectors: an object entering the selector arrives as ADDED, one leaving it as
 *   DELETED (its last matching state, at the new RV); a watch without RV (or "0") first gets an
 *   ADDED for each object present;
 * - a watch from an RV older than the history (or than the resource's first RV) gets 410 Expired,
 *   as an ERROR event carrying a Status inside a 200 stream, or as the HTTP status (`expiredAs`);
 * - BOOKMARKs only to watches that asked (`allowWatchBookmarks=true`): on `bookmark()`, and for
 *   custom resources and Leases also every `bookmarkEveryMs` and 1.5 s before `timeoutSeconds` ends
 *   the stream cleanly.
 * Every event written to a stream is counted by resource, watching client and type
 * (`delivered`), so a harness measures the fan-out of a change: how many watchers it reached.
 */
import type { ServerResponse } from 'node:http';
import { answerGone, cutAnswer, writeHead } from './http.ts';
import type { Change, ObjectStore } from './objects.ts';
import { KubeError, badRequest, failure } from './status.ts';
import type { DeliveredEvents, ExpiredAs, KubeObject, KubeStatus, WatchEventType } from './types.ts';

export interface WireEvent {
  readonly type: WatchEventType;
  readonly object: KubeObject | KubeStatus;
}

export interface Watcher {
  readonly resource: string;
  /** The client watching (RequestRecord.client), to whom its events are counted. */
  readonly client: string | undefined;
  readonly matches: (object: KubeObject) => boolean;
  readonly bookmarks: boolean;
  /** The kind and apiVersion a BOOKMARK names. */
  readonly kind: string;
  readonly apiVersion: string;
  /** How an object goes on the wire (key order). */
  readonly encode: (object: KubeObject) => unknown;
  readonly res: ServerResponse;
  readonly timers: NodeJS.Timeout[];
  /** Changes at or before this RV are not sent (a watch from a future RV waits for the store). */
  readonly after: number;
}

/** What a watcher sees of a change: the watch cache's rule for objects entering and leaving a selector. */
export function project(change: Change, matches: (object: KubeObject) => boolean): WireEvent | undefined {
  const now = change.type !== 'DELETED' && matches(change.object);
  const before = change.previous !== undefined && matches(change.previous);
  if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: change.object };
  if (!before || change.previous === undefined) return undefined;
  const last = change.type === 'DELETED' ? change.object : structuredClone(change.previous);
  last.metadata.resourceVersion = String(change.rv);
  return { type: 'DELETED', object: last };
}

/** strconv.ParseBool's true spellings, which the apiserver accepts for `watch` and friends. */
export function isTrue(value: string | null): boolean {
  return value !== null && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value);
}

export interface WatchRequest {
  readonly resource: string;
  readonly kind: string;
  readonly apiVersion: string;
  readonly matches: (object: KubeObject) => boolean;
  readonly encode: (object: KubeObject) => unknown;
  /** The oldest RV a watch may start from besides the history (a CR: its CRD's establishment). */
  readonly since: number;
  /** Automatic bookmarks (custom resources and Leases). */
  readonly autoBookmarks: boolean;
  /** Invalid RV text: the core resources answer 400, custom resources 500 with strconv's text. */
  readonly badRv: (text: string) => KubeError;
  /** The client asking (RequestRecord.client). */
  readonly client: string | undefined;
}

export class WatchHub {
  readonly #store: ObjectStore;
  readonly #watchers = new Set<Watcher>();
  /** Refusals queued by `expireNextWatch`, consumed one per watch request. */
  readonly pendingExpiries: ExpiredAs[] = [];
  bookmarkEveryMs = 60_000;
  /** Events written to streams, by `resource client type` (FakeKubeApi.watchEvents). */
  readonly delivered = new Map<string, DeliveredEvents>();

  constructor(store: ObjectStore) {
    this.#store = store;
    store.onChange((change) => {
      for (const watcher of this.#watchers) {
        if (watcher.resource !== change.resource || change.rv <= watcher.after) continue;
        const event = project(change, watcher.matches);
        if (event !== undefined) this.#send(watcher, event);
      }
    });
  }

  get watchers(): ReadonlySet<Watcher> {
    return this.#watchers;
  }

  /** Serves one watch request; `onOpen` is told when the 200 goes out. */
  open(
    request: WatchRequest,
    query: URLSearchParams,
    res: ServerResponse,
    expiredAs: ExpiredAs,
    onOpen: () => void,
  ): void {
    const rvText = query.get('resourceVersion') ?? '';
    if (rvText !== '' && !/^\d+$/.test(rvText)) throw request.badRv(rvText);
    const since = rvText === '' || rvText === '0' ? undefined : Number(rvText);
    const timeoutText = query.get('timeoutSeconds');
    if (timeoutText !== null && !/^\d+$/.test(timeoutText))
      throw badRequest(`invalid timeoutSeconds: ${JSON.stringify(timeoutText)}`);

    const forced = this.pendingExpiries.shift();
    const oldest = Math.max(this.#store.compactedThrough, request.since);
    const tooOld = since !== undefined && since < oldest;
    const as = forced ?? (tooOld ? expiredAs : undefined);
    const expired = failure(
      410,
      'Expired',
      `too old resource version: ${since ?? 0} (${forced === undefined ? oldest : this.#store.rv})`,
    ).status;
    if (as === 'status') throw new KubeError(expired);

    onOpen();
    writeHead(res, 200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    res.flushHeaders();
    if (as === 'event') {
      res.end(`${JSON.stringify({ type: 'ERROR', object: expired })}\n`);
      return;
    }
    const watcher: Watcher = {
      resource: request.resource,
      client: request.client,
      matches: request.matches,
      bookmarks: isTrue(query.get('allowWatchBookmarks')),
      kind: request.kind,
      apiVersion: request.apiVersion,
      encode: request.encode,
      res,
      timers: [],
      after: since ?? 0,
    };
    this.#watchers.add(watcher);
    res.on('close', () => this.forget(watcher));
    const timeoutMs = timeoutText === null ? 0 : Number(timeoutText) * 1000;
    if (timeoutMs > 0)
      watcher.timers.push(
        setTimeout(() => {
          this.forget(watcher);
          res.end();
        }, timeoutMs),
      );
    if (request.autoBookmarks && watcher.bookmarks) {
      watcher.timers.push(setInterval(() => this.#bookmark(watcher), this.bookmarkEveryMs));
      if (timeoutMs > 1500) watcher.timers.push(setTimeout(() => this.#bookmark(watcher), timeoutMs - 1500));
    }
    if (since === undefined) {
      const map = this.#store.map(request.resource);
      for (const key of this.#store.keys(request.resource)) {
        const object = map.get(key) as KubeObject;
        if (request.matches(object)) this.#send(watcher, { type: 'ADDED', object });
      }
      return;
    }
    for (const change of this.#store.history) {
      if (change.rv <= since || change.resource !== request.resource) continue;
      const event = project(change, request.matches);
      if (event !== undefined) this.#send(watcher, event);
    }
  }

  /** Sends a BOOKMARK at the current RV to every watch that allowed bookmarks. */
  bookmarkAll(): void {
    for (const watcher of this.#watchers) this.#bookmark(watcher);
  }

  #bookmark(watcher: Watcher): void {
    if (!watcher.bookmarks) return;
    const object = {
      kind: watcher.kind,
      apiVersion: watcher.apiVersion,
      metadata: { resourceVersion: String(this.#store.rv) },
    };
    this.#send(watcher, { type: 'BOOKMARK', object });
  }

  /** Ends (cleanly) or cuts every watch, optionally only those of one resource. */
  close(how: 'end' | 'destroy', resource?: string): void {
    for (const watcher of this.#watchers) {
      if (resource !== undefined && watcher.resource !== resource) continue;
      this.forget(watcher);
      if (how === 'end') watcher.res.end();
      else cutAnswer(watcher.res);
    }
  }

  forget(watcher: Watcher): void {
    for (const timer of watcher.timers) clearTimeout(timer);
    watcher.timers.length = 0;
    this.#watchers.delete(watcher);
  }

  #send(watcher: Watcher, event: WireEvent): void {
    if (answerGone(watcher.res)) return;
    const object = event.type === 'ERROR' ? event.object : watcher.encode(event.object as KubeObject);
    watcher.res.write(`${JSON.stringify({ type: event.type, object })}\n`);
    const key = `${watcher.resource} ${watcher.client ?? ''} ${event.type}`;
    const counted = this.delivered.get(key);
    if (counted !== undefined) counted.count++;
    else this.delivered.set(key, { resource: watcher.resource, client: watcher.client, type: event.type, count: 1 });
  }
}
