/**
 * The verbs the cluster tier uses on one kind of object (create, get, replace, delete with
 * preconditions, list a page), each one request, each answer read by status code and
 * Status structure into an outcome value: what the tier expects (AlreadyExists, NotFound, Conflict
 * on a stale resourceVersion or a failed precondition) is a value, anything else the WarrenError
 * the client says it means (api-client.ts).
 *
 * Guarantees: one request per call; a list never asks for more than `limit` objects; nothing here
 * retries (the tier decides what a conflict means). Given a RevisionObserver (kubernetes/continuity.ts),
 * every write is asked about first (refused while the store must not be written), and the revision
 * of every write's answer and of every listing's first page is checked against what was seen
 * before the request left, so a store gone backwards is noticed by any call that can tell (an
 * answer to a request sent before the operator accepted the store judges nothing: the check the
 * observer handed out when it left drops it).
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { StoreCheck } from '../tiered/continuity.ts';
import type { ApiAnswer, ApiRequest, KubeApiClient } from './api-client.ts';
import { GROUP, VERSION } from './names.ts';
import type { KubeObject } from './objects.ts';

/**
 * What a Resource tells of the revisions its answers carry, and asks before it writes
 * (kubernetes/continuity.ts): the revision seen before a request left, each answer's, and whether writes
 * may go out (throws when not).
 */
export interface RevisionObserver {
  /**
   * The check begun when a request left, handed back with its answer (opaque to the Resource): the
   * highest revision seen then, and dropped when the store was accepted since (tiered/continuity.ts).
   */
  floor(): StoreCheck;
  observe(resourceVersion: unknown, floor: StoreCheck, what: string): void;
  beforeWrite(what: string): void;
  /** Calls `listener` each time the operator accepts the store as it is (tiered/continuity.ts). */
  whenAccepted(listener: () => void): () => void;
}

export interface ResourceKind {
  /** `warrenblocks`. */
  readonly plural: string;
  /** `warren.dev`; `coordination.k8s.io` for Leases. */
  readonly group: string;
  readonly version: string;
  /** For namespaced resources: the namespace. */
  readonly namespace?: string;
}

export function warrenKind(plural: string): ResourceKind {
  return { plural, group: GROUP, version: VERSION };
}

export function leaseKind(namespace: string): ResourceKind {
  return { plural: 'leases', group: 'coordination.k8s.io', version: 'v1', namespace };
}

/** A kind of the core group (`/api/v1`): `nodes`. */
export function coreKind(plural: string): ResourceKind {
  return { plural, group: '', version: 'v1' };
}

export type Created = { readonly kind: 'created'; readonly object: unknown } | { readonly kind: 'exists' };
export type Replaced =
  | { readonly kind: 'replaced'; readonly object: unknown }
  | { readonly kind: 'conflict' }
  | { readonly kind: 'missing' };
export type Deleted = 'deleted' | 'conflict' | 'missing';

export interface ListPage {
  readonly items: readonly unknown[];
  readonly continue?: string;
  /** The collection's resourceVersion the page was read at (every page of a listing has the first's). */
  readonly resourceVersion?: string;
}

/** What a listing or a watch is narrowed to: a label selector, a field selector (`metadata.name=x`). */
export interface Selectors {
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
}

/** The query parameters of `selectors`, the empty ones left out. */
function selectorQuery(selectors: Selectors): { labelSelector?: string; fieldSelector?: string } {
  const { labelSelector, fieldSelector } = selectors;
  return {
    ...(labelSelector === undefined || labelSelector === '' ? {} : { labelSelector }),
    ...(fieldSelector === undefined || fieldSelector === '' ? {} : { fieldSelector }),
  };
}

/** Where the core group (group '') is served. */
const CORE_ROOT = '/api';

/** Largest page asked for when a listing reads every page. */
export const FULL_LIST_PAGE = 500;

/** The resourceVersion of an object or a list answered; undefined when it names none. */
function versionOf(body: unknown): unknown {
  return (body as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata?.resourceVersion;
}

export class Resource {
  readonly #api: KubeApiClient;
  readonly #kind: ResourceKind;
  /** Told the revision of every write's and every list's answer; asked before each write. */
  readonly #revisions: RevisionObserver | undefined;

  constructor(api: KubeApiClient, kind: ResourceKind, revisions?: RevisionObserver) {
    this.#api = api;
    this.#kind = kind;
    this.#revisions = revisions;
  }

  /** Calls `listener` each time the API server answers again after it was away (KubeApiClient.whenBack). */
  whenBack(listener: () => void): () => void {
    return this.#api.whenBack(listener);
  }

  /**
   * Calls `listener` each time the operator accepts the store as it is, after it lost its data
   * (never for a Resource given no RevisionObserver): a watch's version may then be ahead of
   * everything the API server holds, where it would stay silent (collection-watch.ts lists again).
   */
  whenAccepted(listener: () => void): () => void {
    return this.#revisions?.whenAccepted(listener) ?? (() => undefined);
  }

  /** `plural.group`, as RBAC names it (`warrenblocks.warren.dev`; `nodes` in the core group). */
  get resource(): string {
    return this.#kind.group === '' ? this.#kind.plural : `${this.#kind.plural}.${this.#kind.group}`;
  }

  #path(name?: string): string {
    const k = this.#kind;
    const ns = k.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(k.namespace)}`;
    const one = name === undefined ? '' : `/${encodeURIComponent(name)}`;
    // The core group is served under /api, every other under /apis/<group>.
    if (k.group === '') return `${CORE_ROOT}/${k.version}${ns}/${k.plural}${one}`;
    return `/apis/${k.group}/${k.version}${ns}/${k.plural}${one}`;
  }

  async #send(what: string, verb: string, req: ApiRequest): Promise<ApiAnswer> {
    return this.#api.send(what, req).then((answer) => {
      // Not registered (the CRDs missing) answers a text 404 to every verb: never an expected outcome.
      if (answer.status === 404 && !answer.json) throw this.#api.refusal(what, answer, verb, this.resource);
      return answer;
    });
  }

  #refuse(what: string, answer: ApiAnswer, verb: string): WarrenError {
    return this.#api.refusal(what, answer, verb, this.resource);
  }

  /** Sends a write, refused first while the store must not be written; the answer's revision checked. */
  async #write(what: string, verb: string, req: ApiRequest): Promise<ApiAnswer> {
    this.#revisions?.beforeWrite(what);
    const floor = this.#revisions?.floor();
    const answer = await this.#send(what, verb, req);
    // A PUT of the object as it is stands for no write: its answer carries the resourceVersion it was
    // sent with (the object's last change), not the revision now (../KUBERNETES-API.md: "RV unchanged").
    const unchanged = req.method === 'PUT' && versionOf(answer.body) === versionOf(req.body);
    if (floor !== undefined && !unchanged && (answer.status === 200 || answer.status === 201))
      this.#revisions?.observe(versionOf(answer.body), floor, what);
    return answer;
  }

  async create(what: string, object: KubeObject): Promise<Created> {
    const answer = await this.#write(what, 'create', { method: 'POST', path: this.#path(), body: object });
    if (answer.status === 201 || answer.status === 200) return { kind: 'created', object: answer.body };
    if (answer.status === 409 && answer.failure.reason === 'AlreadyExists') return { kind: 'exists' };
    throw this.#refuse(what, answer, 'create');
  }

  /** The object, or undefined when there is none. */
  async get(what: string, name: string): Promise<unknown> {
    const answer = await this.#send(what, 'get', { method: 'GET', path: this.#path(name) });
    if (answer.status === 200) return answer.body;
    if (answer.status === 404) return undefined;
    throw this.#refuse(what, answer, 'get');
  }

  /** PUT of the object (its metadata.resourceVersion guards it), or of its status subresource. */
  async replace(what: string, object: KubeObject, subresource?: 'status'): Promise<Replaced> {
    const verb = 'update';
    const path = `${this.#path(object.metadata.name)}${subresource === undefined ? '' : `/${subresource}`}`;
    const answer = await this.#write(what, verb, { method: 'PUT', path, body: object });
    if (answer.status === 200 || answer.status === 201) return { kind: 'replaced', object: answer.body };
    if (answer.status === 409) return { kind: 'conflict' };
    if (answer.status === 404) return { kind: 'missing' };
    throw this.#refuse(what, answer, verb);
  }

  /** DELETE, only while the object is exactly `uid` (at `resourceVersion`, when given) when they are given. */
  async remove(
    what: string,
    name: string,
    preconditions?: { uid: string; resourceVersion?: string },
  ): Promise<Deleted> {
    const body = preconditions === undefined ? undefined : { kind: 'DeleteOptions', apiVersion: 'v1', preconditions };
    this.#revisions?.beforeWrite(what);
    const answer = await this.#send(what, 'delete', {
      method: 'DELETE',
      path: this.#path(name),
      ...defined({ body }),
    });
    if (answer.status === 200 || answer.status === 202) return 'deleted';
    if (answer.status === 409) return 'conflict';
    if (answer.status === 404) return 'missing';
    throw this.#refuse(what, answer, 'delete');
  }

  /**
   * One page of the objects matching `labelSelector`, at most `limit` of them. A continue token the
   * server no longer honours (410 Expired: its snapshot was compacted) is TRY_AGAIN: list from the start.
   */
  async list(what: string, labelSelector: string, limit: number, from?: string): Promise<ListPage> {
    const page = await this.#page(what, { labelSelector }, limit, from);
    if (page === 'expired')
      throw new WarrenError('TRY_AGAIN', `the listing to ${what} went on too long: its continue token expired`);
    return page;
  }

  async #page(what: string, selectors: Selectors, limit: number, from?: string): Promise<ListPage | 'expired'> {
    const query = {
      ...selectorQuery(selectors),
      limit: Math.max(1, Math.floor(limit)),
      ...defined({ continue: from }),
    };
    const floor = this.#revisions?.floor();
    const answer = await this.#send(what, 'list', { method: 'GET', path: this.#path(), query });
    if (answer.status === 410 && from !== undefined) return 'expired';
    if (answer.status !== 200) throw this.#refuse(what, answer, 'list');
    // A first page is read from etcd at its current revision; later pages at the first one's.
    if (from === undefined && floor !== undefined) this.#revisions?.observe(versionOf(answer.body), floor, what);
    const body = answer.body as { items?: unknown; metadata?: { continue?: unknown } } | undefined;
    const items = Array.isArray(body?.items) ? body.items : [];
    const next = body?.metadata?.continue;
    const version = versionOf(answer.body);
    return {
      items,
      ...(typeof next === 'string' && next !== '' ? { continue: next } : {}),
      ...(typeof version === 'string' && version !== '' ? { resourceVersion: version } : {}),
    };
  }

  /**
   * Watches the collection from `from` (a resourceVersion; absent: the objects there now come first
   * as ADDED, then the changes), with bookmarks, until the server ends the watch (after at most
   * `timeoutSeconds`) or `signal` aborts: each ADDED or MODIFIED object and each DELETED one to
   * `onEvent`. Resolves with the resourceVersion reached (of an object or a bookmark), or 'gone'
   * when `from` is too old (410, as a status or an ERROR event): watch again from nothing.
   * `onOpen` is called once the server answered 200 to it, before any event: the watch is open.
   */
  async watch(
    what: string,
    from: string | undefined,
    onEvent: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown) => void,
    signal: AbortSignal,
    timeoutSeconds = 300,
    selectors: Selectors = {},
    onOpen?: () => void,
  ): Promise<string | undefined | 'gone'> {
    let reached = from;
    let gone = false;
    const query = {
      watch: 'true',
      allowWatchBookmarks: 'true',
      timeoutSeconds,
      ...selectorQuery(selectors),
      ...defined({ resourceVersion: from }),
    };
    const answer = await this.#api.stream(
      what,
      { path: this.#path(), query },
      (line) => {
        const event = line as { type?: unknown; object?: { metadata?: { resourceVersion?: unknown }; code?: unknown } };
        if (event.type === 'ERROR') {
          if (event.object?.code === 410) gone = true;
          return;
        }
        const version = event.object?.metadata?.resourceVersion;
        if (typeof version === 'string') reached = version;
        if (event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED')
          onEvent(event.type, event.object);
      },
      signal,
      (status) => {
        if (status === 200) onOpen?.();
      },
    );
    if (answer.status === 410 || gone) return 'gone';
    if (answer.status !== 200) throw this.#refuse(what, answer, 'watch');
    return reached;
  }

  /** Every object matching `labelSelector`, read a page at a time (from the start again if a token expires). */
  async listAll(what: string, labelSelector: string): Promise<unknown[]> {
    return (await this.listAt(what, { labelSelector })).items;
  }

  /**
   * Every object matching `selectors`, read a page at a time (from the start again if a token
   * expires), with the resourceVersion the listing was read at: where a watch of the same objects
   * starts so that it misses nothing the listing did not have.
   */
  async listAt(what: string, selectors: Selectors): Promise<{ items: unknown[]; resourceVersion?: string }> {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const out: unknown[] = [];
      let from: string | undefined;
      let at: string | undefined;
      let expired = false;
      do {
        const page = await this.#page(what, selectors, FULL_LIST_PAGE, from);
        if (page === 'expired') {
          expired = true;
          break;
        }
        out.push(...page.items);
        at ??= page.resourceVersion;
        from = page.continue;
      } while (from !== undefined);
      if (!expired) return { items: out, ...defined({ resourceVersion: at }) };
    }
    throw new WarrenError('TRY_AGAIN', `the listing to ${what} kept outliving its continue tokens`);
  }
}
