/**
 * A fake Kubernetes API server for tests, in process, speaking the real wire protocol: HTTP/1.1 over
 * TLS on 127.0.0.1 (a fresh CA per run), bearer-token auth, JSON bodies, `Status` errors, and
 * watches as chunked streams of newline-separated `{"type","object"}` events — the protocol a pod
 * watcher meets (as observed from a real API server). It serves pods and
 * nodes (get, list, watch) and core/v1 events (get, list, watch, create, patch); tests drive the
 * cluster through the handle (create and delete pods and nodes) and inject faults: expired
 * resource versions, broken or ended watch streams, RBAC refusals, a namespace being deleted, an
 * unreachable server.
 *
 * Guarantees, as the real server gives them:
 * - One global resourceVersion, a string of an increasing integer; every change gets the next one.
 * - A watch from RV delivers every later change of its resource once, in RV order, projected
 *   through its selectors: an object entering the selector arrives as ADDED, one leaving it as
 *   DELETED (its last matching state at the new RV). A watch without RV (or RV "0") first gets an
 *   ADDED for each object present.
 * - A watch from an RV older than the last `compactHistory()` gets 410 Expired, as the HTTP status
 *   or as an ERROR event carrying a Status (option `expiredAs`; the watch cache of a current
 *   apiserver answers with the event, hence the default).
 * - BOOKMARK events (object: kind, apiVersion, metadata.resourceVersion) only when asked for with
 *   `allowWatchBookmarks=true`, and only when a test calls `bookmark()`.
 *
 * Where it is stricter or smaller than the real server, it says so loudly instead of answering
 * wrongly: verbs it does not serve get 405, query parameters whose meaning it does not implement
 * (`continue`, `resourceVersionMatch`, `sendInitialEvents`, `dryRun`) and set-based label
 * selectors get 400, and it requires of an Event what Warren promises to send (reason, a type of
 * Normal or Warning, involvedObject kind, namespace and name), which core/v1 itself does not all
 * demand. `limit` is ignored: the whole list comes back without a continue token, which a real
 * server may also do.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { removeDir, tempDir } from './processes.ts';
import { issueServerCertificate } from './tls.ts';

export type Resource = 'pods' | 'nodes' | 'events';
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
/** How a too-old resourceVersion is refused: HTTP 410, or 200 and an ERROR event with a 410 Status. */
export type ExpiredAs = 'status' | 'event';
/** How the server is away: the port refuses connections, or every request gets 503. */
export type Unavailability = 'refuse' | '503';

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string | undefined;
  resourceVersion?: string;
  creationTimestamp?: string | undefined;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/** Any object as it travels on the wire (JSON; timestamps are RFC 3339 strings). */
export interface KubeObject {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: Array<{ reason: string; message: string; field: string }>;
  };
  code: number;
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** The Kubernetes verb, when the path names a served resource and the method maps to one. */
  readonly verb: Verb | undefined;
  readonly resource: Resource | undefined;
  readonly contentType: string | undefined;
  /** The HTTP status answered (0 while a request body is still being read). */
  status: number;
}

export interface FakeKubeApiOptions {
  /** The bearer token accepted; default random. */
  readonly token?: string;
  /** The user named in 403 messages; default Warren's service account. */
  readonly user?: string;
  /** How a too-old RV is refused unless a test says otherwise per watch; default 'event'. */
  readonly expiredAs?: ExpiredAs;
  /** Wall clock for timestamps (creation, deletion); default the real one. */
  readonly now?: () => Date;
}

export interface FakeKubeApi {
  /** `https://127.0.0.1:PORT`. */
  readonly url: string;
  /** A kubeconfig (JSON, which is YAML) with the URL, the CA and the token. */
  readonly kubeconfigPath: string;
  readonly token: string;
  readonly caPem: string;
  /** Every request that reached the server, in arrival order. */
  readonly requests: readonly RequestRecord[];
  clearRequests(): void;
  /** Writes another kubeconfig for this server, e.g. with a wrong token; returns its path. */
  writeKubeconfig(options?: { token?: string }): string;
  /** The current global resourceVersion. */
  resourceVersion(): string;
  /** Open watch streams, optionally of one resource. */
  watchCount(resource?: Resource): number;

  createPod(pod: KubeObject): KubeObject;
  getPod(namespace: string, name: string): KubeObject | undefined;
  /** Applies `change` to a copy of the pod and stores it (MODIFIED). */
  updatePod(namespace: string, name: string, change: (pod: KubeObject) => void): KubeObject;
  setPodPhase(namespace: string, name: string, phase: string): KubeObject;
  /**
   * Deletes as the API server does. A pod bound to a node and still running is only marked
   * (deletionTimestamp, MODIFIED) until the kubelet's final delete — the next `deletePod` — removes
   * it (DELETED). An unbound or finished pod, or `force` (grace period 0), is removed at once.
   */
  deletePod(namespace: string, name: string, options?: { force?: boolean }): void;
  createNode(node: KubeObject | string): KubeObject;
  updateNode(name: string, change: (node: KubeObject) => void): KubeObject;
  deleteNode(name: string): void;
  /** Events posted by clients (core/v1), optionally of one namespace. */
  listEvents(namespace?: string): KubeObject[];

  /** Forgets the change history: a watch from any RV before now gets 410 Expired. */
  compactHistory(): void;
  /** The next watch request (whatever its RV) gets 410 Expired, as `as` says. Calls queue up. */
  expireNextWatch(as?: ExpiredAs): void;
  /** Sends a BOOKMARK at the current RV to every watch that allowed bookmarks. */
  bookmark(): void;
  /** Cuts every open watch stream mid-stream (the socket dies without the chunked terminator). */
  breakWatches(): void;
  /** Ends every open watch stream cleanly, as the server does when a watch times out. */
  endWatches(): void;
  /**
   * Marks a namespace as being deleted: every create in it is refused as the API server's
   * NamespaceLifecycle admission refuses it (403 Forbidden with the cause `NamespaceTerminating`).
   */
  terminateNamespace(namespace: string): void;
  /** Refuses `verb` on `resource` with 403 Forbidden, as RBAC would, until `allow`. */
  forbid(verb: Verb, resource: Resource): void;
  allow(verb: Verb, resource: Resource): void;
  /**
   * Takes the server away (open watches are cut) or brings it back. 'refuse' closes the listening
   * socket, so clients see ECONNREFUSED, as while an apiserver restarts; '503' keeps accepting and
   * answers 503 ServiceUnavailable, as a load balancer in front of a down apiserver can.
   */
  setUnavailable(down: boolean, how?: Unavailability): Promise<void>;
  /** Closes every connection and the listener, and removes the certificates and kubeconfig. */
  stop(): Promise<void>;
}

interface ResourceInfo {
  readonly kind: string;
  readonly listKind: string;
  readonly namespaced: boolean;
  readonly verbs: ReadonlySet<Verb>;
  /** Field labels the real server supports in fieldSelector for this resource. */
  readonly fields: ReadonlySet<string>;
}

const RESOURCES: Record<Resource, ResourceInfo> = {
  pods: {
    kind: 'Pod',
    listKind: 'PodList',
    namespaced: true,
    verbs: new Set(['get', 'list', 'watch']),
    fields: new Set([
      'metadata.name',
      'metadata.namespace',
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'status.phase',
      'status.podIP',
    ]),
  },
  nodes: {
    kind: 'Node',
    listKind: 'NodeList',
    namespaced: false,
    verbs: new Set(['get', 'list', 'watch']),
    fields: new Set(['metadata.name', 'spec.unschedulable']),
  },
  events: {
    kind: 'Event',
    listKind: 'EventList',
    namespaced: true,
    verbs: new Set(['get', 'list', 'watch', 'create', 'patch']),
    fields: new Set([
      'metadata.name',
      'metadata.namespace',
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'reason',
      'type',
    ]),
  },
};

const DEFAULT_USER = 'system:serviceaccount:warren:warren';
/** Query parameters whose meaning the fake does not implement: refused rather than ignored. */
const UNSUPPORTED_PARAMS = ['continue', 'resourceVersionMatch', 'sendInitialEvents', 'dryRun'];
const MAX_BODY = 3 * 1024 * 1024;
const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One committed change; `previous` is the state before it (absent for ADDED). */
interface Change {
  readonly rv: number;
  readonly resource: Resource;
  readonly type: ChangeType;
  readonly object: KubeObject;
  readonly previous: KubeObject | undefined;
}

interface WireEvent {
  readonly type: WatchEventType;
  readonly object: KubeObject | KubeStatus;
}

interface Watcher {
  readonly resource: Resource;
  readonly matches: (object: KubeObject) => boolean;
  readonly bookmarks: boolean;
  readonly res: ServerResponse;
  timer: NodeJS.Timeout | undefined;
}

interface Route {
  readonly resource: Resource;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

/** A refusal the handler answers with `status` as the body and `status.code` as the HTTP status. */
class KubeError extends Error {
  readonly status: KubeStatus;
  constructor(status: KubeStatus) {
    super(status.message);
    this.status = status;
  }
}

function failure(code: number, reason: string, message: string, details?: KubeStatus['details']): KubeError {
  return new KubeError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : { details }),
    code,
  });
}

const badRequest = (message: string): KubeError => failure(400, 'BadRequest', message);

const unsupportedByFake = (what: string): KubeError => badRequest(`the fake Kubernetes API does not support ${what}`);

/** NamespaceLifecycle's refusal of an Event created in a namespace being deleted, as the API server gives it. */
function terminatingNamespace(namespace: string, name: string): KubeError {
  const subject = name === '' ? 'events' : `events ${JSON.stringify(name)}`;
  const why = `unable to create new content in namespace ${namespace} because it is being terminated`;
  const cause = {
    reason: 'NamespaceTerminating',
    message: `namespace ${namespace} is being terminated`,
    field: 'metadata.namespace',
  };
  return failure(403, 'Forbidden', `${subject} is forbidden: ${why}`, {
    ...(name === '' ? {} : { name }),
    kind: 'events',
    causes: [cause],
  });
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** strconv.ParseBool's true spellings, which the apiserver accepts for `watch` and friends. */
function isTrue(value: string | null): boolean {
  return value !== null && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value);
}

function fieldValue(object: KubeObject, path: string): string {
  let value: unknown = object;
  for (const part of path.split('.')) value = isRecord(value) ? value[part] : undefined;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : '';
}

type Term = { readonly key: string; readonly op: '=' | '!=' | 'exists' | '!exists'; readonly value: string };

function parseFieldSelector(selector: string, info: ResourceInfo): Term[] {
  if (selector.includes('\\')) throw unsupportedByFake('escaped characters in fieldSelector');
  return selector
    .split(',')
    .filter((term) => term.trim() !== '')
    .map((term) => {
      const match = /^([^!=]+)(==|!=|=)(.*)$/.exec(term.trim());
      if (match === null) throw badRequest(`invalid selector: '${selector}'; can't understand '${term}'`);
      const key = (match[1] as string).trim();
      if (!info.fields.has(key)) throw badRequest(`field label not supported: ${key}`);
      return { key, op: match[2] === '!=' ? '!=' : '=', value: (match[3] as string).trim() };
    });
}

/** Equality and existence label selectors; set-based ones (in, notin) are refused. */
function parseLabelSelector(selector: string): Term[] {
  return selector
    .split(',')
    .filter((term) => term.trim() !== '')
    .map((raw) => {
      const term = raw.trim();
      if (/[()]|\s(in|notin)\s/.test(term)) throw unsupportedByFake(`set-based label selectors ('${term}')`);
      const match = /^([^!=]+)(==|!=|=)(.*)$/.exec(term);
      if (match !== null)
        return {
          key: (match[1] as string).trim(),
          op: match[2] === '!=' ? '!=' : '=',
          value: (match[3] as string).trim(),
        };
      if (/^!\s*[\w./-]+$/.test(term)) return { key: term.slice(1).trim(), op: '!exists', value: '' };
      if (/^[\w./-]+$/.test(term)) return { key: term, op: 'exists', value: '' };
      throw badRequest(`unable to parse requirement: '${term}'`);
    });
}

function selectorMatcher(
  query: URLSearchParams,
  info: ResourceInfo,
  namespace: string | undefined,
): (object: KubeObject) => boolean {
  const fields = parseFieldSelector(query.get('fieldSelector') ?? '', info);
  const labels = parseLabelSelector(query.get('labelSelector') ?? '');
  return (object) => {
    if (namespace !== undefined && object.metadata.namespace !== namespace) return false;
    for (const term of fields) if ((fieldValue(object, term.key) === term.value) !== (term.op === '=')) return false;
    const own = object.metadata.labels ?? {};
    for (const term of labels) {
      const value = own[term.key];
      switch (term.op) {
        case '=':
          if (value !== term.value) return false;
          break;
        case '!=':
          if (value === term.value) return false;
          break;
        case 'exists':
          if (value === undefined) return false;
          break;
        case '!exists':
          if (value !== undefined) return false;
          break;
        default: {
          const never: never = term.op;
          throw new Error(`unknown selector op ${String(never)}`);
        }
      }
    }
    return true;
  };
}

/** What a watcher sees of a change: the watch cache's rule for objects entering and leaving a selector. */
function project(change: Change, matches: (object: KubeObject) => boolean): WireEvent | undefined {
  const now = change.type !== 'DELETED' && matches(change.object);
  const before = change.previous !== undefined && matches(change.previous);
  if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: change.object };
  if (!before || change.previous === undefined) return undefined;
  const last = change.type === 'DELETED' ? change.object : structuredClone(change.previous);
  last.metadata.resourceVersion = String(change.rv);
  return { type: 'DELETED', object: last };
}

function routeOf(pathname: string): Route | undefined {
  const match = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?([a-z]+)(?:\/([^/]+))?\/?$/.exec(pathname);
  if (match === null || !Object.hasOwn(RESOURCES, match[2] as string)) return undefined;
  const resource = match[2] as Resource;
  let namespace: string | undefined;
  let name: string | undefined;
  try {
    namespace = match[1] === undefined ? undefined : decodeURIComponent(match[1]);
    name = match[3] === undefined ? undefined : decodeURIComponent(match[3]);
  } catch {
    return undefined; // a malformed escape names nothing
  }
  // A namespaced object is only addressable inside its namespace; a cluster object never is.
  if (RESOURCES[resource].namespaced ? name !== undefined && namespace === undefined : namespace !== undefined)
    return undefined;
  return { resource, namespace, name };
}

function verbOf(method: string, route: Route, query: URLSearchParams): Verb | undefined {
  switch (method) {
    case 'GET':
      return route.name !== undefined ? 'get' : isTrue(query.get('watch')) ? 'watch' : 'list';
    case 'POST':
      return route.name === undefined ? 'create' : undefined;
    case 'PUT':
      return route.name !== undefined ? 'update' : undefined;
    case 'PATCH':
      return route.name !== undefined ? 'patch' : undefined;
    case 'DELETE':
      return route.name !== undefined ? 'delete' : 'deletecollection';
    default:
      return undefined;
  }
}

function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/** RFC 6902 add, replace, remove and test; move and copy are refused. Failures are 422 like the real server's. */
function jsonPatch(document: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations))
    throw badRequest(
      `json: cannot unmarshal ${isRecord(operations) ? 'object' : typeof operations} into Go value of type jsonpatch.Patch`,
    );
  const root = { value: structuredClone(document) as unknown };
  for (const operation of operations) {
    if (!isRecord(operation) || typeof operation.op !== 'string' || typeof operation.path !== 'string')
      throw badRequest('json patch: an operation needs op and path');
    const tokens =
      operation.path === ''
        ? []
        : operation.path
            .slice(1)
            .split('/')
            .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    let parent: unknown = root;
    let key = 'value';
    for (const token of tokens) {
      const next: unknown = Array.isArray(parent) ? parent[Number(key)] : isRecord(parent) ? parent[key] : undefined;
      if (!isRecord(next) && !Array.isArray(next))
        throw failure(422, 'Invalid', `jsonpatch: missing path ${operation.path}`);
      parent = next;
      key = token;
    }
    const container = parent as Record<string, unknown>;
    const exists = Object.hasOwn(container, key);
    // In an array, add inserts (at an index or at "-", the end) and remove closes the gap.
    const index = Array.isArray(container) ? (key === '-' ? container.length : Number(key)) : undefined;
    switch (operation.op) {
      case 'add':
        if (index === undefined) container[key] = structuredClone(operation.value);
        else (container as unknown as unknown[]).splice(index, 0, structuredClone(operation.value));
        break;
      case 'replace':
        if (!exists)
          throw failure(
            422,
            'Invalid',
            `jsonpatch replace operation does not apply: doc is missing key: ${operation.path}`,
          );
        container[key] = structuredClone(operation.value);
        break;
      case 'remove':
        if (!exists)
          throw failure(
            422,
            'Invalid',
            `jsonpatch remove operation does not apply: doc is missing path: ${operation.path}`,
          );
        if (index === undefined) delete container[key];
        else (container as unknown as unknown[]).splice(index, 1);
        break;
      case 'test':
        if (JSON.stringify(container[key]) !== JSON.stringify(operation.value))
          throw failure(422, 'Invalid', `testing value ${operation.path} failed: test failed`);
        break;
      default:
        throw unsupportedByFake(`the json patch operation '${operation.op}'`);
    }
  }
  return root.value;
}

type FieldError = { readonly reason: string; readonly field: string; readonly message: string };

const required = (field: string, detail = ''): FieldError => ({
  reason: 'FieldValueRequired',
  field,
  message: `Required value${detail === '' ? '' : `: ${detail}`}`,
});

/** core/v1 Event validation, with the fields Warren always sends made required (see the header). */
function eventErrors(event: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  if (!event.metadata.name) errors.push(required('metadata.name', 'name or generateName is required'));
  const involved = event.involvedObject;
  if (!isRecord(involved)) errors.push(required('involvedObject'));
  else {
    for (const field of ['kind', 'namespace', 'name'])
      if (typeof involved[field] !== 'string' || involved[field] === '')
        errors.push(required(`involvedObject.${field}`));
    if (
      typeof involved.namespace === 'string' &&
      involved.namespace !== '' &&
      involved.namespace !== event.metadata.namespace
    )
      errors.push({
        reason: 'FieldValueInvalid',
        field: 'involvedObject.namespace',
        message: `Invalid value: ${JSON.stringify(involved.namespace)}: does not match event.namespace`,
      });
  }
  if (typeof event.reason !== 'string' || event.reason === '') errors.push(required('reason'));
  if (typeof event.type !== 'string' || event.type === '') errors.push(required('type'));
  else if (event.type !== 'Normal' && event.type !== 'Warning')
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'type',
      message: `Unsupported value: ${JSON.stringify(event.type)}: supported values: "Normal", "Warning"`,
    });
  return errors;
}

/** metav1.Time has second precision: the server answers `...:05Z` for `...:05.123Z`. */
function truncateTimes(event: KubeObject): void {
  for (const field of ['firstTimestamp', 'lastTimestamp']) {
    const value = event[field];
    if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) event[field] = rfc3339(new Date(value));
  }
}

function invalid(kind: string, name: string, errors: readonly FieldError[]): KubeError {
  const texts = errors.map((e) => `${e.field}: ${e.message}`);
  const summary = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  return failure(422, 'Invalid', `${kind} ${JSON.stringify(name)} is invalid: ${summary}`, {
    name,
    kind,
    causes: errors.map((e) => ({ reason: e.reason, message: e.message, field: e.field })),
  });
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (size > MAX_BODY) return reject(failure(413, 'RequestEntityTooLarge', 'request entity too large'));
      try {
        resolveBody(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(badRequest(`the body of the request is not valid JSON: ${(error as Error).message}`));
      }
    });
  });
}

class FakeKubeApiServer implements FakeKubeApi {
  readonly url: string;
  readonly kubeconfigPath: string;
  readonly token: string;
  readonly caPem: string;
  readonly #server: Server;
  readonly #port: number;
  /** Holds the certificates and kubeconfigs; removed on stop. */
  readonly #dir: string;
  readonly #user: string;
  readonly #expiredAs: ExpiredAs;
  readonly #now: () => Date;
  readonly #objects: Record<Resource, Map<string, KubeObject>> = {
    pods: new Map(),
    nodes: new Map(),
    events: new Map(),
  };
  /** The last RV handed out; the next change gets one more. */
  #rv = 1;
  /** Changes after `#compactedThrough`, in RV order: what a watch from an older RV replays. */
  #history: Change[] = [];
  /** A watch from an RV below this has lost changes and gets 410. */
  #compactedThrough = 0;
  /** Refusals queued by `expireNextWatch`, consumed one per watch request. */
  readonly #pendingExpiries: ExpiredAs[] = [];
  readonly #watchers = new Set<Watcher>();
  readonly #forbidden = new Set<string>();
  readonly #terminating = new Set<string>();
  readonly #requests: RequestRecord[] = [];
  #down: Unavailability | undefined;
  #listening = true;
  #stopped = false;

  constructor(
    server: Server,
    port: number,
    dir: string,
    caPem: string,
    options: FakeKubeApiOptions & { token: string },
  ) {
    this.#server = server;
    this.#port = port;
    this.#dir = dir;
    this.url = `https://127.0.0.1:${port}`;
    this.caPem = caPem;
    this.token = options.token;
    this.#user = options.user ?? DEFAULT_USER;
    this.#expiredAs = options.expiredAs ?? 'event';
    this.#now = options.now ?? (() => new Date());
    this.kubeconfigPath = this.writeKubeconfig();
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void this.#handle(req, res));
  }

  get requests(): readonly RequestRecord[] {
    return this.#requests;
  }

  clearRequests(): void {
    this.#requests.length = 0;
  }

  writeKubeconfig(options: { token?: string } = {}): string {
    const token = options.token ?? this.token;
    const path = join(this.#dir, token === this.token ? 'kubeconfig' : `kubeconfig-${randomBytes(4).toString('hex')}`);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'fake',
          cluster: { server: this.url, 'certificate-authority-data': Buffer.from(this.caPem).toString('base64') },
        },
      ],
      users: [{ name: 'warren', user: { token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'warren', namespace: 'default' } }],
      'current-context': 'fake',
    };
    writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    return path;
  }

  resourceVersion(): string {
    return String(this.#rv);
  }

  watchCount(resource?: Resource): number {
    let count = 0;
    for (const watcher of this.#watchers) if (resource === undefined || watcher.resource === resource) count++;
    return count;
  }

  // --- The cluster, as tests drive it -------------------------------------------------------------

  createPod(pod: KubeObject): KubeObject {
    const spec = isRecord(pod.spec) ? pod.spec : { containers: [] };
    const status = isRecord(pod.status) ? pod.status : {};
    return this.#create('pods', { ...pod, spec, status: { phase: 'Pending', ...status } });
  }

  getPod(namespace: string, name: string): KubeObject | undefined {
    const pod = this.#objects.pods.get(`${namespace}/${name}`);
    return pod === undefined ? undefined : structuredClone(pod);
  }

  updatePod(namespace: string, name: string, change: (pod: KubeObject) => void): KubeObject {
    return this.#update('pods', `${namespace}/${name}`, change);
  }

  setPodPhase(namespace: string, name: string, phase: string): KubeObject {
    return this.updatePod(namespace, name, (pod) => {
      pod.status = { ...(isRecord(pod.status) ? pod.status : {}), phase };
    });
  }

  deletePod(namespace: string, name: string, options: { force?: boolean } = {}): void {
    const key = `${namespace}/${name}`;
    const pod = this.#existing('pods', key);
    const spec = isRecord(pod.spec) ? pod.spec : {};
    const phase = isRecord(pod.status) ? pod.status.phase : undefined;
    const immediate = options.force === true || !spec.nodeName || phase === 'Succeeded' || phase === 'Failed';
    if (immediate || pod.metadata.deletionTimestamp !== undefined) {
      this.#remove('pods', key, (last) => {
        last.metadata.deletionTimestamp ??= rfc3339(this.#now());
        last.metadata.deletionGracePeriodSeconds = 0;
      });
      return;
    }
    const grace = typeof spec.terminationGracePeriodSeconds === 'number' ? spec.terminationGracePeriodSeconds : 30;
    this.#update('pods', key, (marked) => {
      marked.metadata.deletionTimestamp = rfc3339(new Date(this.#now().getTime() + grace * 1000));
      marked.metadata.deletionGracePeriodSeconds = grace;
    });
  }

  createNode(node: KubeObject | string): KubeObject {
    return this.#create('nodes', typeof node === 'string' ? { metadata: { name: node }, spec: {}, status: {} } : node);
  }

  updateNode(name: string, change: (node: KubeObject) => void): KubeObject {
    return this.#update('nodes', name, change);
  }

  deleteNode(name: string): void {
    this.#remove('nodes', name, () => undefined);
  }

  listEvents(namespace?: string): KubeObject[] {
    return [...this.#objects.events.values()]
      .filter((e) => namespace === undefined || e.metadata.namespace === namespace)
      .map((e) => structuredClone(e));
  }

  // --- Faults ---------------------------------------------------------------------------------------

  compactHistory(): void {
    this.#compactedThrough = this.#rv;
    this.#history = [];
  }

  expireNextWatch(as: ExpiredAs = this.#expiredAs): void {
    this.#pendingExpiries.push(as);
  }

  bookmark(): void {
    for (const watcher of this.#watchers) {
      if (!watcher.bookmarks) continue;
      const object = {
        kind: RESOURCES[watcher.resource].kind,
        apiVersion: 'v1',
        metadata: { resourceVersion: String(this.#rv) },
      };
      this.#send(watcher, { type: 'BOOKMARK', object });
    }
  }

  breakWatches(): void {
    for (const watcher of this.#watchers) {
      this.#forget(watcher);
      watcher.res.destroy();
    }
  }

  endWatches(): void {
    for (const watcher of this.#watchers) {
      this.#forget(watcher);
      watcher.res.end();
    }
  }

  terminateNamespace(namespace: string): void {
    this.#terminating.add(namespace);
  }

  forbid(verb: Verb, resource: Resource): void {
    this.#forbidden.add(`${verb} ${resource}`);
  }

  allow(verb: Verb, resource: Resource): void {
    this.#forbidden.delete(`${verb} ${resource}`);
  }

  async setUnavailable(down: boolean, how: Unavailability = 'refuse'): Promise<void> {
    if (down) {
      this.#down = how;
      this.breakWatches();
      if (how === 'refuse') await this.#closeListener();
      return;
    }
    this.#down = undefined;
    if (!this.#listening && !this.#stopped) {
      await new Promise<void>((resolveListen, reject) => {
        this.#server.once('error', reject);
        this.#server.listen(this.#port, '127.0.0.1', () => {
          this.#server.off('error', reject);
          resolveListen();
        });
      });
      this.#listening = true;
    }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.breakWatches();
    await this.#closeListener();
    removeDir(this.#dir);
  }

  async #closeListener(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    const closed = new Promise<void>((resolveClose) => this.#server.close(() => resolveClose()));
    this.#server.closeAllConnections();
    await closed;
  }

  // --- The store ------------------------------------------------------------------------------------

  #key(resource: Resource, object: KubeObject): string {
    return RESOURCES[resource].namespaced
      ? `${object.metadata.namespace}/${object.metadata.name}`
      : (object.metadata.name as string);
  }

  #existing(resource: Resource, key: string): KubeObject {
    const object = this.#objects[resource].get(key);
    if (object === undefined) throw new Error(`fake kube api: no ${resource} ${key}`);
    return object;
  }

  /** Fills in what the server owns (kind, uid, creation time, a generated name) and stores the object. */
  #create(resource: Resource, input: KubeObject): KubeObject {
    const info = RESOURCES[resource];
    const object: KubeObject = { ...structuredClone(input), apiVersion: 'v1', kind: info.kind };
    const meta = object.metadata;
    if (!meta.name && meta.generateName)
      meta.name = `${meta.generateName}${Array.from(randomBytes(5), (b) => GENERATE_ALPHABET[b % GENERATE_ALPHABET.length]).join('')}`;
    if (!meta.name) throw new Error(`fake kube api: a ${info.kind} needs metadata.name`);
    if (info.namespaced) meta.namespace ??= 'default';
    else delete meta.namespace;
    const key = this.#key(resource, object);
    if (this.#objects[resource].has(key)) throw new Error(`fake kube api: ${resource} ${key} already exists`);
    meta.uid ??= randomUUID();
    meta.creationTimestamp ??= rfc3339(this.#now());
    this.#commit(resource, 'ADDED', object, undefined);
    return structuredClone(object);
  }

  #update(resource: Resource, key: string, change: (object: KubeObject) => void): KubeObject {
    const previous = this.#existing(resource, key);
    const object = structuredClone(previous);
    change(object);
    if (this.#key(resource, object) !== key)
      throw new Error(`fake kube api: an update may not rename ${resource} ${key}`);
    this.#commit(resource, 'MODIFIED', object, previous);
    return structuredClone(object);
  }

  #remove(resource: Resource, key: string, last: (object: KubeObject) => void): void {
    const previous = this.#existing(resource, key);
    const object = structuredClone(previous);
    last(object);
    this.#commit(resource, 'DELETED', object, previous);
  }

  #commit(resource: Resource, type: ChangeType, object: KubeObject, previous: KubeObject | undefined): void {
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    const key = this.#key(resource, object);
    if (type === 'DELETED') this.#objects[resource].delete(key);
    else this.#objects[resource].set(key, object);
    const change: Change = { rv: this.#rv, resource, type, object, previous };
    this.#history.push(change);
    for (const watcher of this.#watchers) {
      if (watcher.resource !== resource) continue;
      const event = project(change, watcher.matches);
      if (event !== undefined) this.#send(watcher, event);
    }
  }

  // --- HTTP -----------------------------------------------------------------------------------------

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const method = req.method ?? 'GET';
    const route = routeOf(url.pathname);
    const verb = route === undefined ? undefined : verbOf(method, route, url.searchParams);
    const record: RequestRecord = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      verb,
      resource: route?.resource,
      contentType: req.headers['content-type'],
      status: 0,
    };
    this.#requests.push(record);
    try {
      if (this.#down === '503')
        throw failure(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
      if (req.headers.authorization !== `Bearer ${this.token}`) throw failure(401, 'Unauthorized', 'Unauthorized');
      if (route === undefined) throw failure(404, 'NotFound', 'the server could not find the requested resource', {});
      if (verb === undefined || !RESOURCES[route.resource].verbs.has(verb))
        throw failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
      if (this.#forbidden.has(`${verb} ${route.resource}`)) throw this.#forbiddenError(verb, route);
      for (const param of UNSUPPORTED_PARAMS)
        if (url.searchParams.has(param)) throw unsupportedByFake(`the query parameter ${param}`);
      switch (verb) {
        case 'get':
          return this.#reply(res, record, 200, this.#stored(route));
        case 'list':
          return this.#reply(res, record, 200, this.#list(route, url.searchParams));
        case 'watch':
          return this.#watch(route, url.searchParams, res, record);
        case 'create':
          return this.#reply(
            res,
            record,
            201,
            this.#createFromWire(route, await this.#jsonBody(req, ['application/json'])),
          );
        case 'patch':
          return this.#reply(
            res,
            record,
            200,
            this.#patch(route, req.headers['content-type'], await this.#jsonBody(req, PATCH_TYPES)),
          );
        case 'update':
        case 'delete':
        case 'deletecollection':
          throw failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
        default: {
          const never: never = verb;
          throw new Error(`unhandled verb ${String(never)}`);
        }
      }
    } catch (error) {
      const status =
        error instanceof KubeError
          ? error.status
          : failure(500, 'InternalError', `Internal error occurred: ${String(error)}`).status;
      if (!res.headersSent) this.#reply(res, record, status.code, status);
      else res.destroy();
    }
  }

  #reply(res: ServerResponse, record: RequestRecord, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    record.status = code;
    res.writeHead(code, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'no-cache, private',
    });
    res.end(text);
  }

  async #jsonBody(req: IncomingMessage, accepted: readonly string[]): Promise<unknown> {
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    if (!accepted.includes(type)) {
      req.resume();
      throw failure(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
      );
    }
    return readBody(req);
  }

  #forbiddenError(verb: Verb, route: Route): KubeError {
    const scope =
      route.namespace === undefined ? 'at the cluster scope' : `in the namespace ${JSON.stringify(route.namespace)}`;
    const subject = route.name === undefined ? route.resource : `${route.resource} ${JSON.stringify(route.name)}`;
    const message = `${subject} is forbidden: User ${JSON.stringify(this.#user)} cannot ${verb} resource ${JSON.stringify(route.resource)} in API group "" ${scope}`;
    return failure(403, 'Forbidden', message, {
      ...(route.name === undefined ? {} : { name: route.name }),
      kind: route.resource,
    });
  }

  #notFound(route: Route, name: string): KubeError {
    return failure(404, 'NotFound', `${route.resource} ${JSON.stringify(name)} not found`, {
      name,
      kind: route.resource,
    });
  }

  #stored(route: Route): KubeObject {
    const name = route.name as string;
    const key = route.namespace === undefined ? name : `${route.namespace}/${name}`;
    const object = this.#objects[route.resource].get(key);
    if (object === undefined) throw this.#notFound(route, name);
    return object;
  }

  #list(route: Route, query: URLSearchParams): unknown {
    const info = RESOURCES[route.resource];
    const matches = selectorMatcher(query, info, route.namespace);
    const keys = [...this.#objects[route.resource].keys()].sort();
    // Items of a typed list carry no kind or apiVersion of their own on the real server either.
    const items = keys
      .map((key) => this.#objects[route.resource].get(key) as KubeObject)
      .filter(matches)
      .map(({ kind: _kind, apiVersion: _apiVersion, ...rest }) => rest);
    return { kind: info.listKind, apiVersion: 'v1', metadata: { resourceVersion: String(this.#rv) }, items };
  }

  #watch(route: Route, query: URLSearchParams, res: ServerResponse, record: RequestRecord): void {
    const info = RESOURCES[route.resource];
    const matches = selectorMatcher(query, info, route.namespace);
    const rvText = query.get('resourceVersion') ?? '';
    if (rvText !== '' && !/^\d+$/.test(rvText)) throw badRequest(`invalid resource version: ${JSON.stringify(rvText)}`);
    const since = rvText === '' || rvText === '0' ? undefined : Number(rvText);
    const timeoutText = query.get('timeoutSeconds');
    if (timeoutText !== null && !/^\d+$/.test(timeoutText))
      throw badRequest(`invalid timeoutSeconds: ${JSON.stringify(timeoutText)}`);

    const forced = this.#pendingExpiries.shift();
    const expiredAs = forced ?? (since !== undefined && since < this.#compactedThrough ? this.#expiredAs : undefined);
    const oldest = forced === undefined ? this.#compactedThrough : this.#rv;
    const expired = failure(410, 'Expired', `too old resource version: ${since ?? 0} (${oldest})`).status;
    if (expiredAs === 'status') throw new KubeError(expired);

    record.status = 200;
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    res.flushHeaders();
    if (expiredAs === 'event') {
      res.end(`${JSON.stringify({ type: 'ERROR', object: expired })}\n`);
      return;
    }
    const watcher: Watcher = {
      resource: route.resource,
      matches,
      bookmarks: isTrue(query.get('allowWatchBookmarks')),
      res,
      timer: undefined,
    };
    this.#watchers.add(watcher);
    res.on('close', () => this.#forget(watcher));
    if (timeoutText !== null && Number(timeoutText) > 0) {
      watcher.timer = setTimeout(() => {
        this.#forget(watcher);
        res.end();
      }, Number(timeoutText) * 1000);
    }
    if (since === undefined) {
      for (const key of [...this.#objects[route.resource].keys()].sort()) {
        const object = this.#objects[route.resource].get(key) as KubeObject;
        if (matches(object)) this.#send(watcher, { type: 'ADDED', object });
      }
      return;
    }
    for (const change of this.#history) {
      if (change.rv <= since || change.resource !== route.resource) continue;
      const event = project(change, matches);
      if (event !== undefined) this.#send(watcher, event);
    }
  }

  #send(watcher: Watcher, event: WireEvent): void {
    if (watcher.res.writableEnded || watcher.res.destroyed) return;
    watcher.res.write(`${JSON.stringify(event)}\n`);
  }

  #forget(watcher: Watcher): void {
    if (watcher.timer !== undefined) clearTimeout(watcher.timer);
    watcher.timer = undefined;
    this.#watchers.delete(watcher);
  }

  // --- Events, as clients post and patch them --------------------------------------------------------

  #createFromWire(route: Route, body: unknown): KubeObject {
    const namespace = route.namespace as string;
    if (!isRecord(body)) throw badRequest('the body of the request must be a JSON object');
    if (body.kind !== undefined && body.kind !== 'Event')
      throw badRequest(`the kind of the provided object (${String(body.kind)}) is not Event`);
    if (body.apiVersion !== undefined && body.apiVersion !== 'v1')
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (v1)`,
      );
    const meta = isRecord(body.metadata) ? { ...body.metadata } : {};
    if (meta.resourceVersion !== undefined && meta.resourceVersion !== '')
      throw failure(500, 'InternalError', 'resourceVersion should not be set on objects to be created');
    if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    // Admission comes before the name is generated and the object validated.
    if (this.#terminating.has(namespace)) {
      throw terminatingNamespace(namespace, typeof meta.name === 'string' ? meta.name : '');
    }
    const event: KubeObject = { ...body, metadata: { ...meta, namespace } as ObjectMeta };
    if (!event.metadata.name && event.metadata.generateName)
      event.metadata.name = `${event.metadata.generateName}${Array.from(randomBytes(5), (b) => GENERATE_ALPHABET[b % GENERATE_ALPHABET.length]).join('')}`;
    const errors = eventErrors(event);
    if (errors.length > 0) throw invalid('Event', event.metadata.name ?? '', errors);
    truncateTimes(event);
    if (this.#objects.events.has(`${namespace}/${event.metadata.name}`))
      throw failure(409, 'AlreadyExists', `events ${JSON.stringify(event.metadata.name)} already exists`, {
        name: event.metadata.name as string,
        kind: 'events',
      });
    for (const owned of ['uid', 'creationTimestamp', 'deletionTimestamp']) delete event.metadata[owned];
    return this.#create('events', event);
  }

  #patch(route: Route, contentType: string | undefined, body: unknown): KubeObject {
    const current = this.#stored(route);
    const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
    let patched: unknown;
    if (type === 'application/json-patch+json') patched = jsonPatch(current, body);
    else {
      // A strategic merge patch of an Event is a merge patch: Event has no list with a merge key.
      if (!isRecord(body)) throw badRequest('the body of a merge patch must be a JSON object');
      patched = mergePatch(current, body);
    }
    if (!isRecord(patched) || !isRecord(patched.metadata)) throw badRequest('the patch removed the object metadata');
    const result = patched as KubeObject;
    const name = route.name as string;
    if (result.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(result.metadata.name)}) does not match the name on the URL (${name})`,
      );
    if (result.metadata.namespace !== route.namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    if (
      result.metadata.resourceVersion !== undefined &&
      result.metadata.resourceVersion !== current.metadata.resourceVersion
    )
      throw failure(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${route.resource} ${JSON.stringify(name)}: the object has been modified; please apply your changes to the latest version and try again`,
        { name, kind: route.resource },
      );
    const errors = route.resource === 'events' ? eventErrors(result) : [];
    if (errors.length > 0) throw invalid(RESOURCES[route.resource].kind, name, errors);
    truncateTimes(result);
    for (const owned of ['uid', 'creationTimestamp'] as const) result.metadata[owned] = current.metadata[owned];
    result.kind = current.kind;
    result.apiVersion = current.apiVersion;
    const key = this.#key(route.resource, current);
    return this.#update(route.resource, key, (object) => {
      for (const field of Object.keys(object)) delete object[field];
      Object.assign(object, structuredClone(result));
    });
  }
}

/** The patch media types the real server accepts for core objects, apply (server-side apply) aside. */
const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
];

/** Starts a fake API server on an ephemeral port of 127.0.0.1 with a fresh CA; call `stop()` when done. */
export async function startFakeKubeApi(options: FakeKubeApiOptions = {}): Promise<FakeKubeApi> {
  const dir = tempDir('warren-kube-api-');
  try {
    const certificate = issueServerCertificate(dir);
    const server = createServer({ key: certificate.keyPem, cert: certificate.certPem });
    await new Promise<void>((resolveListen, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolveListen();
      });
    });
    const port = (server.address() as AddressInfo).port;
    return new FakeKubeApiServer(server, port, dir, certificate.caPem, {
      ...options,
      token: options.token ?? randomBytes(16).toString('hex'),
    });
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}
