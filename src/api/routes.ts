/**
 * The agent's routes, in one table: method, path, how the request's query or JSON body becomes
 * the operation's typed input, and which operation of `AgentApi` runs it. The server serves
 * exactly this table; a method and path not in it is 404, a path asked with another method 405.
 *
 *   POST /v1/cni          CniRequest                    -> CniOutcome (200 once the body is read: CNI errors
 *                                                         are outcomes)
 *        with X-Warren-Answer: stdout (the native forwarder) -> the plugin's stdout and exit code,
 *                                                         or "run the TypeScript plugin" (cni-stdout.ts,
 *                                                         forwarded-call.ts); served by the server itself,
 *                                                         as it reads the body as bytes, not as JSON
 *   GET  /v1/status                                     -> AgentStatus
 *   GET  /v1/pools                                      -> PoolReport[]
 *   GET  /v1/allocations  ?pool=&network=&containerID=&ifname=&podNamespace=&podName=&podUID=&node=&address=
 *                                                       -> Allocation[]
 *                         with &limit=&continue=&cluster=  -> AllocationPage (one page, never the whole answer)
 *   POST /v1/release      {address, pool?, force?} | {containerID, network?, ifname?, force?} -> ReleaseResponse
 *   GET  /v1/audit                                      -> AuditReport (judges, releases nothing)
 *   POST /v1/audit        {fix}                         -> AuditReport (fix: also releases the stale)
 *   GET  /v1/journal                                    -> ReconcilerStatus
 *   GET  /v1/nodes                                      -> NodeReport[] (cluster store only)
 *   GET  /v1/reservations                               -> ReservationsReport (WarrenReservations as watched)
 *   POST /v1/nodes/forget {node}                        -> ForgetNodeResponse (refused while alive)
 *   POST /v1/store/accept {}                            -> AcceptStoreResponse (cluster store only: after the
 *                                                         agent stopped allocating, the store as it
 *                                                         is now is the one to use)
 *   GET  /v1/plugins                                    -> PluginsStatus (BAD_REQUEST when the registry is off)
 *   GET  /v1/doctor                                     -> DoctorFacts (the agent's own setup, for `warren doctor`)
 *   POST /v1/uninstall    {}                            -> UninstallReport (hands the node back: `warren uninstall`)
 *
 * Parsing checks shape only (fields, types, no unknown fields) and refuses with BAD_REQUEST naming
 * the field; what the values mean (is it an address, is the node alive) is the agent's to judge.
 * An unknown field is refused in every body, not ignored: a misspelt field would otherwise leave
 * a request doing more, or other, than its caller meant. The CNI body is the one exception here:
 * the CNI service checks its fields, unknown ones too, so that a refusal is a CNI outcome the
 * plugin can print.
 */
import { defined } from '../core/defined.ts';
import { WarrenError } from '../core/errors.ts';
import { isPlainObject, validator } from '../core/validate.ts';
import { CNI_PATH } from './cni-wire.ts';
import {
  ALLOCATION_PAGE_KEYS,
  ALLOCATION_QUERY_KEYS,
  type AgentApi,
  type AllocationPageRequest,
  type AllocationQuery,
  DEFAULT_ALLOCATION_PAGE,
  MAX_ALLOCATION_PAGE,
  type AuditRequest,
  type CniRequest,
  type ForgetNodeRequest,
  type ReleaseRequest,
} from './protocol.ts';

export type HttpMethod = 'GET' | 'POST';

/** What a request carries. The server reads a JSON body for POST routes only. */
export interface RequestParts {
  readonly query: URLSearchParams;
  readonly body: unknown;
}

export interface Route {
  readonly method: HttpMethod;
  readonly path: string;
  /** Parses the request into the operation's input and runs it; throws BAD_REQUEST on bad input. */
  readonly serve: (api: AgentApi, request: RequestParts) => Promise<unknown>;
}

export const PATHS = {
  cni: CNI_PATH,
  status: '/v1/status',
  pools: '/v1/pools',
  allocations: '/v1/allocations',
  release: '/v1/release',
  audit: '/v1/audit',
  journal: '/v1/journal',
  nodes: '/v1/nodes',
  reservations: '/v1/reservations',
  forgetNode: '/v1/nodes/forget',
  acceptStore: '/v1/store/accept',
  plugins: '/v1/plugins',
  doctor: '/v1/doctor',
  uninstall: '/v1/uninstall',
} as const;

/** A row of the table: the parse and the run meet on one input type. */
function route<I>(
  method: HttpMethod,
  path: string,
  parse: (request: RequestParts) => I,
  run: (api: AgentApi, input: I) => Promise<unknown>,
): Route {
  return { method, path, serve: async (api, request) => run(api, parse(request)) };
}

const nothing = (): undefined => undefined;
const body =
  <I>(parse: (body: unknown) => I) =>
  (request: RequestParts): I =>
    parse(request.body);

export const ROUTES: readonly Route[] = [
  route('POST', PATHS.cni, body(cniRequest), (api, input) => api.cni(input)),
  route('GET', PATHS.status, nothing, (api) => api.status()),
  route('GET', PATHS.pools, nothing, (api) => api.pools()),
  route(
    'GET',
    PATHS.allocations,
    (request) => ({ query: allocationQuery(request.query), page: allocationPageRequest(request.query) }),
    (api, { query, page }) => (page === undefined ? api.allocations(query) : api.allocationsPage(query, page)),
  ),
  route('POST', PATHS.release, body(releaseRequest), (api, input) => api.release(input)),
  route(
    'GET',
    PATHS.audit,
    (): AuditRequest => ({ fix: false }),
    (api, input) => api.audit(input),
  ),
  route('POST', PATHS.audit, body(auditRequest), (api, input) => api.audit(input)),
  route('GET', PATHS.journal, nothing, (api) => api.journal()),
  route('GET', PATHS.nodes, nothing, (api) => api.nodes()),
  route('GET', PATHS.reservations, nothing, (api) => api.reservations()),
  route('POST', PATHS.forgetNode, body(forgetNodeRequest), (api, input) => api.forgetNode(input)),
  route('POST', PATHS.acceptStore, body(emptyRequest), (api) => api.acceptStore()),
  route('GET', PATHS.plugins, nothing, (api) => api.plugins()),
  route('GET', PATHS.doctor, nothing, (api) => api.doctor()),
  route('POST', PATHS.uninstall, body(emptyRequest), (api) => api.uninstall()),
];

export type RouteMatch =
  | { readonly kind: 'found'; readonly route: Route }
  | { readonly kind: 'wrong-method'; readonly allowed: readonly HttpMethod[] }
  | { readonly kind: 'not-found' };

export function matchRoute(method: string | undefined, path: string): RouteMatch {
  const onPath = ROUTES.filter((r) => r.path === path);
  const found = onPath.find((r) => r.method === method);
  if (found !== undefined) return { kind: 'found', route: found };
  if (onPath.length > 0) return { kind: 'wrong-method', allowed: onPath.map((r) => r.method) };
  return { kind: 'not-found' };
}

// ---------------------------------------------------------------------------------------------
// Parsers: unknown JSON in, typed input out.

const { refuseUnknownFields } = validator((message) => new WarrenError('BAD_REQUEST', message));

/**
 * Not checked here: the CNI service checks every field with the plugin's own rules and answers a
 * bad one as a CNI error in the config's version, which is what the plugin prints.
 */
function cniRequest(value: unknown): CniRequest {
  return value as CniRequest;
}

export function allocationQuery(query: URLSearchParams): AllocationQuery {
  const out: Partial<Record<(typeof ALLOCATION_QUERY_KEYS)[number], string>> = {};
  for (const [name, value] of query) {
    if ((ALLOCATION_PAGE_KEYS as readonly string[]).includes(name)) continue;
    if (!(ALLOCATION_QUERY_KEYS as readonly string[]).includes(name)) {
      throw new WarrenError('BAD_REQUEST', `unknown filter "${name}"; filters are ${ALLOCATION_QUERY_KEYS.join(', ')}`);
    }
    out[name as (typeof ALLOCATION_QUERY_KEYS)[number]] = value;
  }
  return out;
}

/** The longest continue token taken back: far more than any this agent gives. */
const MAX_CONTINUE_LENGTH = 4_096;

/** The page asked of GET /v1/allocations, or undefined when the whole answer is (no page key given). */
export function allocationPageRequest(query: URLSearchParams): AllocationPageRequest | undefined {
  if (!ALLOCATION_PAGE_KEYS.some((key) => query.has(key))) return undefined;
  const limitText = query.get('limit');
  const limit = limitText === null ? DEFAULT_ALLOCATION_PAGE : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_ALLOCATION_PAGE)
    throw new WarrenError('BAD_REQUEST', `limit must be a whole number from 1 to ${MAX_ALLOCATION_PAGE}`);
  const token = query.get('continue');
  if (token !== null && (token === '' || token.length > MAX_CONTINUE_LENGTH))
    throw new WarrenError('BAD_REQUEST', 'continue must be the token a previous page gave');
  const cluster = query.get('cluster');
  if (cluster !== null && cluster !== 'true' && cluster !== 'false')
    throw new WarrenError('BAD_REQUEST', 'cluster must be true or false');
  return { limit, ...(token === null ? {} : { continue: token }), ...(cluster === 'true' ? { cluster: true } : {}) };
}

const RELEASE_FIELDS = ['pool', 'address', 'containerID', 'network', 'ifname'] as const;
const RELEASE_FIELD_SET: ReadonlySet<string> = new Set([...RELEASE_FIELDS, 'force']);

export function releaseRequest(value: unknown): ReleaseRequest {
  if (!isPlainObject(value)) throw new WarrenError('BAD_REQUEST', 'release needs a JSON object');
  refuseUnknownFields(value, RELEASE_FIELD_SET, 'release');
  const { force: forceField, ...rest } = value;
  if (forceField !== undefined && typeof forceField !== 'boolean')
    throw new WarrenError('BAD_REQUEST', 'release: force must be true or false');
  const force = forceField === true ? { force: true } : {};
  const fields: Partial<Record<(typeof RELEASE_FIELDS)[number], string>> = {};
  for (const [key, field] of Object.entries(rest)) {
    if (typeof field !== 'string' || field === '')
      throw new WarrenError('BAD_REQUEST', `release: ${key} must be a non-empty string`);
    fields[key as (typeof RELEASE_FIELDS)[number]] = field;
  }
  const { address, pool, containerID, network, ifname } = fields;
  const byAddress = address !== undefined || pool !== undefined;
  const byContainer = containerID !== undefined || network !== undefined || ifname !== undefined;
  // One form or the other: a field of the other form would be silently ignored, and a release
  // that does more than its caller meant cannot be taken back.
  if (byAddress && byContainer) {
    throw new WarrenError(
      'BAD_REQUEST',
      'release takes an address (with an optional pool) or a containerID (with optional network and ifname), ' +
        'not fields of both',
    );
  }
  if (address !== undefined) return { address, ...defined({ pool }), ...force };
  if (containerID !== undefined)
    return {
      containerID,
      ...defined({ network, ifname }),
      ...force,
    };
  throw new WarrenError(
    'BAD_REQUEST',
    'release needs an address (with an optional pool) or a containerID (with optional network and ifname)',
  );
}

const AUDIT_FIELDS: ReadonlySet<string> = new Set(['fix']);

export function auditRequest(value: unknown): AuditRequest {
  if (isPlainObject(value)) refuseUnknownFields(value, AUDIT_FIELDS, 'audit');
  const fix = isPlainObject(value) ? value.fix : undefined;
  if (typeof fix !== 'boolean') throw new WarrenError('BAD_REQUEST', 'audit needs {"fix": true|false}');
  return { fix };
}

/** A body that carries nothing: `{}` (or none); any field is refused. */
export function emptyRequest(value: unknown): undefined {
  if (value === undefined || value === null) return undefined;
  if (!isPlainObject(value)) throw new WarrenError('BAD_REQUEST', 'the request body must be {}');
  refuseUnknownFields(value, new Set(), 'request');
  return undefined;
}

const FORGET_NODE_FIELDS: ReadonlySet<string> = new Set(['node']);

export function forgetNodeRequest(value: unknown): ForgetNodeRequest {
  if (isPlainObject(value)) refuseUnknownFields(value, FORGET_NODE_FIELDS, 'forget');
  const node = isPlainObject(value) ? value.node : undefined;
  if (typeof node !== 'string' || node === '') throw new WarrenError('BAD_REQUEST', 'forget needs {"node": "<name>"}');
  return { node };
}
