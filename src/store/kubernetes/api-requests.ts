/**
 * The agent's own Kubernetes API requests, counted: every request either client sends (the cluster
 * store's KubeApiClient, and the agent's own one for its sources, reads and Events) is told here
 * once, by verb, resource and outcome, so an operator sees what the agent costs the API server
 * (`warren_kube_api_requests_total`, and the rate in `warren status` and `warren doctor`).
 *
 * Guarantees:
 * - one count per request that left (a request sent again on a fresh connection because the server
 *   had closed the idle one is one request: the first never reached it); a watch counts when it is
 *   opened, not per event;
 * - the verb and resource are read from the request itself (method, path, `watch` in the query), as
 *   the API server's audit log names them, so both clients count alike without being told;
 * - the outcome is a class of bounded cardinality: `2xx`, `404`, `409`, `410`, the other codes by
 *   their hundred (`4xx`, `5xx`), or `unreachable` when no answer came (refused, reset, timeout);
 * - the rate is read on the injected clock's monotonic time from a ring of per-minute buckets, the
 *   last `windowMinutes` of them (core/minute-counts.ts): memory does not grow with time, only with
 *   the kinds of request.
 */
import type { Clock } from '../../core/clock.ts';
import { MinuteCounts, mostFirst } from '../../core/minute-counts.ts';

export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

/** What one request did, as an audit log names it: `list warrenblocks`. */
export interface ApiRequestKind {
  readonly verb: ApiVerb;
  /** The resource's plural (`warrenblocks`, `leases`, `pods`); `discovery` for a group's discovery. */
  readonly resource: string;
}

/** How a request ended: its status' class, or `unreachable` when no answer came. */
export type ApiOutcome = '404' | '409' | '410' | `${1 | 2 | 3 | 4 | 5}xx` | 'unreachable';

/** The count of one kind of request with one outcome since the agent started. */
export interface ApiRequestTotal extends ApiRequestKind {
  readonly code: ApiOutcome;
  readonly count: number;
}

/** The agent's request rate over the last minutes. */
export interface ApiRequestRate {
  /** The minutes the rate is taken over (fewer while the agent is younger). */
  readonly minutes: number;
  /** Requests per minute, every kind. */
  readonly perMinute: number;
  /** Requests per minute by verb, the verbs sent only. */
  readonly byVerb: Readonly<Partial<Record<ApiVerb, number>>>;
  /** Requests per minute by verb and resource, most first. */
  readonly byKind: readonly (ApiRequestKind & { readonly perMinute: number })[];
}

/** The verb and resource of a request to the API server, from its method, path and query. */
export function requestKindOf(method: string, path: string, watch = false): ApiRequestKind {
  const all =
    path
      .split('?')[0]
      ?.split('/')
      .filter((part) => part !== '') ?? [];
  // `/api/v1/...` (the core group) or `/apis/<group>/<version>/...`, after the server's own prefix if any.
  const parts = all.slice(
    Math.max(
      0,
      all.findIndex((part) => part === 'api' || part === 'apis'),
    ),
  );
  const rest = parts[0] === 'api' ? parts.slice(2) : parts.slice(3);
  const namespaced = rest[0] === 'namespaces' && rest.length >= 3;
  const resource = (namespaced ? rest[2] : rest[0]) ?? 'discovery';
  const named = (namespaced ? rest[3] : rest[1]) !== undefined;
  switch (method.toUpperCase()) {
    case 'POST':
      return { verb: 'create', resource };
    case 'PUT':
      return { verb: 'update', resource };
    case 'PATCH':
      return { verb: 'patch', resource };
    case 'DELETE':
      return { verb: named ? 'delete' : 'deletecollection', resource };
    default:
      return { verb: named || resource === 'discovery' ? 'get' : watch ? 'watch' : 'list', resource };
  }
}

/** The User-Agent the agent's requests carry, so an audit log (or a fake) tells the nodes apart. */
export function kubeUserAgent(version: string, node: string): string {
  return `warren/${version} (node ${node})`;
}

/** Whether a query asks for a watch (`watch=true` or `watch=1`). */
export function asksWatch(value: unknown): boolean {
  return value === true || value === 'true' || value === '1' || value === 1;
}

/** The outcome class of an HTTP status; `unreachable` for none. */
export function outcomeOf(status: number | undefined): ApiOutcome {
  if (status === undefined || !(status >= 100 && status < 600)) return 'unreachable';
  if (status === 404 || status === 409 || status === 410) return String(status) as ApiOutcome;
  return `${Math.floor(status / 100) as 1 | 2 | 3 | 4 | 5}xx`;
}

export class ApiRequestCounter {
  /** Since the start, by `verb resource code`: what the metric exposes. */
  readonly #totals = new Map<string, { kind: ApiRequestKind; code: ApiOutcome; count: number }>();
  /** The last minutes, by `verb resource`: the rate. */
  readonly #recent: MinuteCounts;

  constructor(clock: Clock, windowMinutes = 10) {
    this.#recent = new MinuteCounts(clock, windowMinutes);
  }

  /** One request sent, answered with `status` (undefined: no answer came). */
  count(kind: ApiRequestKind, status: number | undefined): void {
    const code = outcomeOf(status);
    const key = `${kind.verb} ${kind.resource}`;
    const total = this.#totals.get(`${key} ${code}`);
    if (total === undefined) this.#totals.set(`${key} ${code}`, { kind, code, count: 1 });
    else total.count += 1;
    this.#recent.add(key);
  }

  /** A request to `method path` (with `watch` asked or not), answered with `status`. */
  countRequest(method: string, path: string, watch: boolean, status: number | undefined): void {
    this.count(requestKindOf(method, path, watch), status);
  }

  /** Every kind and outcome counted since the start. */
  totals(): ApiRequestTotal[] {
    return [...this.#totals.values()].map(({ kind, code, count }) => ({ ...kind, code, count }));
  }

  /** The rate over the last `windowMinutes` up to now (core/minute-counts.ts says how it is taken). */
  rate(): ApiRequestRate {
    const { minutes, counts, perMinute } = this.#recent.window();
    let all = 0;
    const verbs = new Map<ApiVerb, number>();
    const byKind: (ApiRequestKind & { perMinute: number })[] = [];
    for (const [key, n] of counts) {
      const [verb, resource] = key.split(' ') as [ApiVerb, string];
      all += n;
      verbs.set(verb, (verbs.get(verb) ?? 0) + n);
      byKind.push({ verb, resource, perMinute: perMinute(n) });
    }
    byKind.sort(mostFirst((k) => `${k.verb} ${k.resource}`));
    return {
      minutes,
      perMinute: perMinute(all),
      byVerb: Object.fromEntries([...verbs].map(([verb, n]) => [verb, perMinute(n)])),
      byKind,
    };
  }
}
