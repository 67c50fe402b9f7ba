/**
 * A typed client of the agent's API over its unix socket: one method per operation, the same
 * `AgentApi` the agent serves. A refusal comes back as a WarrenError with the agent's own code and
 * message (never "HTTP 400"); an agent that cannot be reached is AGENT_UNREACHABLE, so "the agent
 * is down" is never confused with "the agent said no".
 *
 * For the CLI and for tests. The plugin uses cni-call.ts alone, to keep its cold start small.
 */
import { requestJson } from '../core/unix-http.ts';
import { agentPeer, callCni } from './cni-call.ts';
import { errorFromAnswer } from './errors.ts';
import type {
  AcceptStoreResponse,
  AgentApi,
  Allocation,
  AllocationQuery,
  AuditReport,
  AuditRequest,
  CniOutcome,
  CniRequest,
  ForgetNodeRequest,
  ForgetNodeResponse,
  NodeReport,
  PoolReport,
  ReleaseRequest,
  ReleaseResponse,
} from './protocol.ts';
import type { AgentStatus, PluginsStatus, ReconcilerStatus, UninstallReport } from './status.ts';
import type { DoctorFacts } from './doctor.ts';
import { type HttpMethod, PATHS } from './routes.ts';

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

  allocations(query: AllocationQuery = {}): Promise<Allocation[]> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, value);
    return this.#call('GET', search.size === 0 ? PATHS.allocations : `${PATHS.allocations}?${search}`);
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
