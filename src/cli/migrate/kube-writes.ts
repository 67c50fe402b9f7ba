/**
 * The writes `warren migrate to-whereabouts` makes of the Kubernetes API: whereabouts' IPPools and
 * OverlappingRangeIPReservations, one object at a time in one namespace, through the store's API
 * client (its TLS, credentials and deadlines), as kube-reads.ts reads them.
 *
 * Guarantees: a create never replaces an object (an object of that name created meanwhile is
 * answered `exists`, 409); a replace is made only at the `metadata.resourceVersion` the object
 * carries (one changed meanwhile is answered `changed`, 409), so no write ever overwrites what
 * another writer (whereabouts itself) put there since it was read; any other failure is a
 * TRY_AGAIN WarrenError naming the request, the status and the missing permission.
 */
import { WarrenError } from '../../core/errors.ts';
import { describeFailure, failureOfError, missingPermission } from '../../sources/kubernetes/api-failure.ts';
import { OnDemandClient } from '../../sources/kubernetes/on-demand-client.ts';
import type { ApiAnswer, ApiRequest } from '../../store/kubernetes/api-client.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';
import { COLLECTIONS } from './kube-reads.ts';

/** Whereabouts' two kinds of object, as kube-reads.ts names their collections. */
export type WhereaboutsKind = 'ipPools' | 'reservations';

/** An object as the API server serves it: what the writes read of it. */
export interface KubeObjectJson {
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly resourceVersion?: string };
  readonly spec?: unknown;
  readonly [field: string]: unknown;
}

/** What the rollback writes; an interface so it can be driven without an API server. */
export interface WhereaboutsWriter {
  /** The object, or undefined when there is none. */
  get(kind: WhereaboutsKind, namespace: string, name: string): Promise<KubeObjectJson | undefined>;
  /** Creates it; `exists` when an object of its name is there already. */
  create(kind: WhereaboutsKind, namespace: string, object: KubeObjectJson): Promise<'created' | 'exists'>;
  /** Replaces it at its `metadata.resourceVersion`; `changed` when it changed since (or is gone). */
  replace(kind: WhereaboutsKind, namespace: string, object: KubeObjectJson): Promise<'replaced' | 'changed'>;
}

/** `/apis/<group>/<version>/namespaces/<namespace>/<plural>[/<name>]` of a collection kube-reads.ts lists. */
export function objectPath(kind: WhereaboutsKind, namespace: string, name?: string): string {
  const { path } = COLLECTIONS[kind];
  const at = path.lastIndexOf('/');
  const tail = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  return `${path.slice(0, at)}/namespaces/${encodeURIComponent(namespace)}${path.slice(at)}${tail}`;
}

export class KubeWriter implements WhereaboutsWriter {
  readonly #client: OnDemandClient;

  constructor(config: KubeAccess) {
    this.#client = OnDemandClient.of(config, { userAgent: 'warren-migrate' });
  }

  async #send(request: ApiRequest): Promise<ApiAnswer> {
    const what = `${request.method} ${request.path}`;
    try {
      return await (await this.#client.get()).send(what, request);
    } catch (error) {
      throw new WarrenError('TRY_AGAIN', `${what}: ${describeFailure(failureOfError(error))}`, { cause: error });
    }
  }

  #failed(request: ApiRequest, verb: string, kind: WhereaboutsKind, answer: ApiAnswer): WarrenError {
    const missing = missingPermission(answer.failure, verb, COLLECTIONS[kind].resource);
    return new WarrenError(
      'TRY_AGAIN',
      `${request.method} ${request.path}: ${describeFailure(answer.failure)}` +
        (missing === undefined ? '' : ` (the rollback needs: ${missing})`),
    );
  }

  async get(kind: WhereaboutsKind, namespace: string, name: string): Promise<KubeObjectJson | undefined> {
    const request: ApiRequest = { method: 'GET', path: objectPath(kind, namespace, name) };
    const answer = await this.#send(request);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200 || !answer.json || typeof answer.body !== 'object' || answer.body === null)
      throw this.#failed(request, 'get', kind, answer);
    return answer.body as KubeObjectJson;
  }

  async create(kind: WhereaboutsKind, namespace: string, object: KubeObjectJson): Promise<'created' | 'exists'> {
    const request: ApiRequest = { method: 'POST', path: objectPath(kind, namespace), body: object };
    const answer = await this.#send(request);
    if (answer.status === 409) return 'exists';
    if (answer.status !== 200 && answer.status !== 201) throw this.#failed(request, 'create', kind, answer);
    return 'created';
  }

  async replace(kind: WhereaboutsKind, namespace: string, object: KubeObjectJson): Promise<'replaced' | 'changed'> {
    const request: ApiRequest = {
      method: 'PUT',
      path: objectPath(kind, namespace, object.metadata.name),
      body: object,
    };
    const answer = await this.#send(request);
    // 404: deleted since it was read; read again, and it is created.
    if (answer.status === 409 || answer.status === 404) return 'changed';
    if (answer.status !== 200 && answer.status !== 201) throw this.#failed(request, 'update', kind, answer);
    return 'replaced';
  }
}
