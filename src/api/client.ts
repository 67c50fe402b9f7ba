/**
 * A typed client of the agent's API over its unix socket: one method per operation, the same
 * `AgentApi` the agent serves. A refusal comes back as a WarrenError with the agent's own code and
 * message (never "HTTP 400"); an agent that cannot be reached is AGENT_UNREACHABLE, so "the agent
 * is down" is never confused with "the agent said no".
 *
 * For the CLI and for tests. The plugin uses cni-call.ts alone, to keep its cold start small.
 */
import { defined } from '../core/defined.ts';
import { requestJson } from '../core/unix-http.ts';
import { agentPeer, callCni } from './cni-call.ts';
import { errorFromAnswer } from './errors.ts';
import type {
  AcceptStoreResponse,
  AgentApi,
  Allocation,
  AllocationPage,
  AllocationPageRequest,
  AllocationQuery,
  AuditReport,
  AuditRequest,
  CniOutcome,
  CniRequest,
  ForgetNodeRequest,
  ForgetNodeResponse,
  NodeReport,
  PoolReport,
  ReservationsReport,
  ReleaseRequest,
  ReleaseResponse,
} from './protocol.ts';
import type { AgentStatus, PluginsStatus, ReconcilerStatus, UninstallReport } from './status.ts';
import type { DoctorFacts } from './doctor.ts';
import { type HttpMethod, PATHS } from './routes.ts';
import { DEFAULT_ALLOCATION_PAGE } from './protocol.ts';

/** A query's filters as URL search parameters (those given). */
function searchOf(query: AllocationQuery): URLSearchParams {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, value);
  return search;
}

export interface ApiClientOptions {
  readonly socket: string;
  /** Milliseconds before a call is abandoned; default that of unix-http (2 minutes). */
  readonly timeoutMs?: number;
}

export class ApiClient implements AgentApi {
  readonly socket: string;
  readonly #timeoutMs: number | undefined;

  constructor(options: ApiClientOptions) {
    this.socket = options.socket;
    this.#timeoutMs = options.timeoutMs;
  }

  cni(request: CniRequest): Promise<CniOutcome> {
    return callCni({ socket: this.socket, bodyText: JSON.stringify(request), ...this.#timeout() });
  }

  status(): Promise<AgentStatus> {
    return this.#call('GET', PATHS.status);
  }

  pools(): Promise<PoolReport[]> {
    return this.#call('GET', PATHS.pools);
  }

  reservations(): Promise<ReservationsReport> {
    return this.#call('GET', PATHS.reservations);
  }

  allocations(query: AllocationQuery = {}): Promise<Allocation[]> {
    const search = searchOf(query);
    return this.#call('GET', search.size === 0 ? PATHS.allocations : `${PATHS.allocations}?${search}`);
  }

  allocationsPage(query: AllocationQuery, page: AllocationPageRequest): Promise<AllocationPage> {
    const search = searchOf(query);
    search.set('limit', String(page.limit));
    if (page.continue !== undefined) search.set('continue', page.continue);
    if (page.cluster === true) search.set('cluster', 'true');
    return this.#call('GET', `${PATHS.allocations}?${search}`);
  }

  /**
   * Every allocation the query selects, a page at a time (`pageSize` each, DEFAULT_ALLOCATION_PAGE
   * by default): neither the agent nor this client holds more than one page of the agent's answer.
   */
  async *allAllocations(
    query: AllocationQuery = {},
    options: { readonly cluster?: boolean; readonly pageSize?: number } = {},
  ): AsyncGenerator<Allocation> {
    let token: string | undefined;
    do {
      const page = await this.allocationsPage(query, {
        limit: options.pageSize ?? DEFAULT_ALLOCATION_PAGE,
        ...defined({ continue: token }),
        ...(options.cluster === true ? { cluster: true } : {}),
      });
      yield* page.items;
      token = page.continue;
    } while (token !== undefined);
  }

  release(request: ReleaseRequest): Promise<ReleaseResponse> {
    return this.#call('POST', PATHS.release, request);
  }

  /** Judges every allocation; with fix, also releases what is provably stale. */
  audit(request: AuditRequest = { fix: false }): Promise<AuditReport> {
    return request.fix ? this.#call('POST', PATHS.audit, request) : this.#call('GET', PATHS.audit);
  }

  journal(): Promise<ReconcilerStatus> {
    return this.#call('GET', PATHS.journal);
  }

  nodes(): Promise<NodeReport[]> {
    return this.#call('GET', PATHS.nodes);
  }

  forgetNode(request: ForgetNodeRequest): Promise<ForgetNodeResponse> {
    return this.#call('POST', PATHS.forgetNode, request);
  }

  acceptStore(): Promise<AcceptStoreResponse> {
    return this.#call('POST', PATHS.acceptStore, {});
  }

  plugins(): Promise<PluginsStatus> {
    return this.#call('GET', PATHS.plugins);
  }

  doctor(): Promise<DoctorFacts> {
    return this.#call('GET', PATHS.doctor);
  }

  uninstall(): Promise<UninstallReport> {
    return this.#call('POST', PATHS.uninstall, {});
  }

  /** The answer's body as the route's type: the agent is the other half of this contract. */
  async #call<T>(method: HttpMethod, path: string, body?: unknown): Promise<T> {
    const peer = agentPeer(this.socket);
    const response = await requestJson({ socket: this.socket, peer, method, path, body, ...this.#timeout() });
    if (response.status !== 200) throw errorFromAnswer(response.status, response.body, peer.label);
    return response.body as T;
  }

  #timeout(): { timeoutMs?: number } {
    return this.#timeoutMs === undefined ? {} : { timeoutMs: this.#timeoutMs };
  }
}
