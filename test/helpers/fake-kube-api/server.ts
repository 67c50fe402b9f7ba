/**
 * The fake API server itself: one HTTPS listener, bearer-token auth, RBAC refusals a test injects
 * (checked before anything else, so a missing object is a 403 too), unavailability, request
 * records and counts, a per-write latency, and the dispatch of each verb to the core resources
 * (core.ts), to custom resources and Leases (writes.ts, lists.ts) and to watches (watch.ts).
 * The per-write latency delays each create, update, patch and delete before it is applied, without
 * holding up other requests (a real apiserver's ~10 ms per write). A test may hold the answer to a
 * create after it is applied (`holds`): the write is made whether or not its client lives to read it,
 * as on a real API server, whose commit to etcd does not wait for the client.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CORE, CORE_PATCH_TYPES, type CoreResources } from './core.ts';
import { cutAnswer, mediaType, readJson, readObject, replyJson, replyNotFoundText } from './http.ts';
import { list } from './lists.ts';
import type { ObjectStore } from './objects.ts';
import { CRDS, type CrdRegistry } from './registry.ts';
import { type Route, routeOf, servedVerbs, verbOf } from './routes.ts';
import { selection } from './selectors.ts';
import { KubeError, failure, forbidden, notFound, unsupportedByFake } from './status.ts';
import type { Served } from './served.ts';
import type { ExpiredAs, KubeObject, RequestRecord, Unavailability, Verb } from './types.ts';
import type { WatchHub } from './watch.ts';
import { type WriteTarget, create, patch, remove, unsupportedPatch, update } from './writes.ts';

/** Query parameters whose meaning the fake does not implement: refused rather than ignored. */
const UNSUPPORTED_CORE = ['continue', 'resourceVersionMatch', 'sendInitialEvents', 'dryRun'];
const UNSUPPORTED_SERVED = ['sendInitialEvents', 'dryRun', 'force'];
const METHOD_NOT_ALLOWED = 'the server does not allow this method on the requested resource';

type ServedRoute = Extract<Route, { family: 'served' }>;

export interface Dispatcher {
  readonly store: ObjectStore;
  readonly core: CoreResources;
  readonly crds: CrdRegistry;
  readonly hub: WatchHub;
}

export class RequestHandler {
  readonly #d: Dispatcher;
  readonly #base: string;
  readonly #token: string;
  readonly #user: string;
  readonly #now: () => Date;
  readonly expiredAs: ExpiredAs;
  readonly forbidden = new Set<string>();
  readonly records: RequestRecord[] = [];
  /** Bearer tokens of named clients (FakeKubeApi.clientKubeconfig), accepted as the server's own. */
  readonly clients = new Map<string, string>();
  counts = new Map<string, number>();
  writeLatencyMs: number;
  down: Unavailability | undefined;
  /**
   * Answers held after their write was applied, by `create <plural>`: a client that dies before the
   * answer is sent has made the write without learning it (FakeKubeApi.holdNextAnswer).
   */
  readonly holds = new Map<string, { readonly applied: () => void; readonly release: Promise<void> }>();

  constructor(
    d: Dispatcher,
    o: { base: string; token: string; user: string; now: () => Date; expiredAs: ExpiredAs; latency: number },
  ) {
    this.#d = d;
    this.#base = o.base;
    this.#token = o.token;
    this.#user = o.user;
    this.#now = o.now;
    this.expiredAs = o.expiredAs;
    this.writeLatencyMs = o.latency;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.#base);
    const method = req.method ?? 'GET';
    const route = routeOf(url.pathname, this.#d.crds);
    const named = route === undefined || route.family === 'unknown' || route.family === 'discovery' ? undefined : route;
    const verb = named === undefined ? undefined : verbOf(method, named.name, url.searchParams);
    const resource =
      named === undefined
        ? undefined
        : named.family === 'core'
          ? named.resource
          : `${named.served.plural}${named.subresource === undefined ? '' : `/${named.subresource}`}`;
    const token = /^Bearer (.*)$/.exec(req.headers.authorization ?? '')?.[1];
    const client = token === undefined ? undefined : this.clients.get(token);
    const record: RequestRecord = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      verb,
      resource,
      contentType: req.headers['content-type'],
      userAgent: req.headers['user-agent'],
      client,
      status: 0,
    };
    this.records.push(record);
    const countKey = verb === undefined || resource === undefined ? 'other' : `${verb} ${resource}`;
    this.counts.set(countKey, (this.counts.get(countKey) ?? 0) + 1);
    try {
      if (this.down === '503')
        throw failure(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
      if (token !== this.#token && client === undefined) throw failure(401, 'Unauthorized', 'Unauthorized');
      if (route === undefined) throw failure(404, 'NotFound', 'the server could not find the requested resource', {});
      if (route.family === 'unknown') {
        record.status = 404;
        req.resume();
        return replyNotFoundText(res);
      }
      if (route.family === 'discovery') {
        record.status = 200;
        req.resume();
        return replyJson(res, 200, discoveryList(route.groupVersion, route.served));
      }
      const allowed = route.family === 'core' ? CORE[route.resource].verbs : servedVerbs(route);
      if (verb === undefined || !allowed.has(verb)) throw failure(405, 'MethodNotAllowed', METHOD_NOT_ALLOWED, {});
      if (this.forbidden.has(`${verb} ${resource}`)) {
        const naming = route.family === 'core' ? CORE[route.resource] : route.served;
        throw forbidden(naming, this.#user, verb, resource as string, route.namespace, route.name);
      }
      const refused = route.family === 'core' ? UNSUPPORTED_CORE : UNSUPPORTED_SERVED;
      for (const param of refused)
        if (url.searchParams.has(param)) throw unsupportedByFake(`the query parameter ${param}`);
      if (route.family === 'core') return await this.#core(route, verb, req, res, record, url.searchParams);
      return await this.#served(route, verb, req, res, record, url.searchParams);
    } catch (error) {
      const status =
        error instanceof KubeError
          ? error.status
          : failure(500, 'InternalError', `Internal error occurred: ${String(error)}`).status;
      if (res.headersSent) {
        cutAnswer(res);
        return;
      }
      record.status = status.code;
      replyJson(res, status.code, status, status.code === 413 ? { Connection: 'close' } : {});
      if (status.code === 413 || !req.readableEnded) req.resume();
    }
  }

  #reply(res: ServerResponse, record: RequestRecord, code: number, body: unknown): void {
    record.status = code;
    replyJson(res, code, body);
  }

  async #core(
    route: Extract<Route, { family: 'core' }>,
    verb: Verb,
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
    query: URLSearchParams,
  ): Promise<void> {
    const core = this.#d.core;
    switch (verb) {
      case 'get':
        return this.#reply(res, record, 200, core.stored(route));
      case 'list':
        return this.#reply(res, record, 200, core.list(route, query));
      case 'watch': {
        const info = CORE[route.resource];
        const request = {
          resource: route.resource,
          kind: info.kind,
          apiVersion: 'v1',
          matches: core.selection(route, query).matches,
          encode: (object: KubeObject) => object,
          since: 0,
          autoBookmarks: false,
          client: record.client,
          badRv: (text: string) => failure(400, 'BadRequest', `invalid resource version: ${JSON.stringify(text)}`),
        };
        return this.#d.hub.open(request, query, res, this.expiredAs, () => (record.status = 200));
      }
      case 'create': {
        const body = await this.#coreBody(req, ['application/json']);
        await this.#latency();
        return this.#reply(res, record, 201, core.createFromWire(route, body));
      }
      case 'patch': {
        const body = await this.#coreBody(req, CORE_PATCH_TYPES);
        await this.#latency();
        return this.#reply(res, record, 200, core.patch(route, req.headers['content-type'], body));
      }
      default:
        throw failure(405, 'MethodNotAllowed', METHOD_NOT_ALLOWED, {});
    }
  }

  async #coreBody(req: IncomingMessage, accepted: readonly string[]): Promise<unknown> {
    if (!accepted.includes(mediaType(req))) {
      req.resume();
      throw failure(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
      );
    }
    return readJson(req);
  }

  /** Waits, once applied, while a test holds the answer to this kind of write (`holds`). */
  async #held(what: string): Promise<void> {
    const hold = this.holds.get(what);
    if (hold === undefined) return;
    this.holds.delete(what);
    hold.applied();
    await hold.release;
  }

  async #latency(): Promise<void> {
    if (this.writeLatencyMs > 0) await delay(this.writeLatencyMs);
  }

  #manager(req: IncomingMessage, query: URLSearchParams): string {
    return query.get('fieldManager') ?? (req.headers['user-agent'] ?? '').split('/')[0] ?? '';
  }

  async #served(
    route: ServedRoute,
    verb: Verb,
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
    query: URLSearchParams,
  ): Promise<void> {
    const s = route.served;
    const d = this.#d;
    const target: WriteTarget = {
      served: s,
      namespace: route.namespace,
      name: route.name,
      subresource: route.subresource,
      manager: this.#manager(req, query),
    };
    const ctx = { store: d.store, now: this.#now };
    switch (verb) {
      case 'get': {
        const key = s.namespaced ? `${route.namespace}/${route.name}` : (route.name as string);
        const object = d.store.get(s.plural, key);
        if (object === undefined) throw notFound(s, route.name as string);
        return this.#reply(res, record, 200, s.encode(object));
      }
      case 'list':
        return this.#reply(
          res,
          record,
          200,
          list(d.store, s, route.namespace, query, selection(query, s.fields, route.namespace)),
        );
      case 'watch': {
        const request = {
          resource: s.plural,
          kind: s.kind,
          apiVersion: s.apiVersion,
          matches: selection(query, s.fields, route.namespace).matches,
          encode: (object: KubeObject) => s.encode(object),
          since: s.since,
          autoBookmarks: true,
          client: record.client,
          badRv: (text: string) =>
            failure(
              500,
              '',
              `resourceVersion: Invalid value: ${JSON.stringify(text)}: strconv.ParseUint: parsing ${JSON.stringify(text)}: invalid syntax`,
            ),
        };
        return d.hub.open(request, query, res, this.expiredAs, () => (record.status = 200));
      }
      case 'create': {
        const body = await this.#servedBody(req, s.kind, ['application/json', 'application/yaml']);
        await this.#latency();
        if (s === CRDS) return this.#reply(res, record, 201, d.crds.createFromApi(body, target.manager));
        const created = s.encode(create(ctx, target, body).object);
        await this.#held(`create ${s.plural}`);
        return this.#reply(res, record, 201, created);
      }
      case 'update': {
        const body = await this.#servedBody(req, s.kind, ['application/json', 'application/yaml']);
        await this.#latency();
        return this.#reply(res, record, 200, s.encode(update(ctx, target, body)));
      }
      case 'patch': {
        const type = mediaType(req);
        if (type !== 'application/merge-patch+json' && type !== 'application/json-patch+json') {
          req.resume();
          throw unsupportedPatch(type);
        }
        const body = await readObject(req, s.kind);
        await this.#latency();
        return this.#reply(res, record, 200, s.encode(patch(ctx, target, type, body)));
      }
      case 'delete': {
        const body = await readObject(req, 'DeleteOptions');
        await this.#latency();
        return this.#reply(res, record, 200, remove(ctx, target, body));
      }
      case 'deletecollection': {
        await readObject(req, 'DeleteOptions');
        await this.#latency();
        const sel = selection(query, s.fields, route.namespace);
        const rv = String(d.store.rv);
        const doomed = d.store
          .keys(s.plural)
          .map((key) => d.store.get(s.plural, key) as KubeObject)
          .filter(sel.matches);
        for (const object of doomed)
          remove(ctx, { ...target, namespace: object.metadata.namespace, name: object.metadata.name }, undefined);
        return this.#reply(res, record, 200, s.encodeList(doomed, { resourceVersion: rv, continue: '' }));
      }
      default: {
        const never: never = verb;
        throw new Error(`unhandled verb ${String(never)}`);
      }
    }
  }

  async #servedBody(req: IncomingMessage, kind: string, accepted: readonly string[]): Promise<unknown> {
    const type = mediaType(req);
    if (!accepted.includes(type) && type !== 'application/vnd.kubernetes.protobuf') {
      req.resume();
      throw failure(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`,
      );
    }
    return readObject(req, kind);
  }
}

const CR_VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];

/** The APIResourceList of a group version: each resource, and its status subresource. */
function discoveryList(groupVersion: string, served: readonly Served[]): unknown {
  const resources = served.flatMap((s) => [
    { name: s.plural, singularName: s.kind.toLowerCase(), namespaced: s.namespaced, kind: s.kind, verbs: CR_VERBS },
    ...(s.statusSubresource
      ? [
          {
            name: `${s.plural}/status`,
            singularName: '',
            namespaced: s.namespaced,
            kind: s.kind,
            verbs: ['get', 'patch', 'update'],
          },
        ]
      : []),
  ]);
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion, resources };
}
