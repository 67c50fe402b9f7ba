/**
 * The reads the migration makes of the Kubernetes API, through the store's API client (its TLS,
 * credentials and deadlines; store/kubernetes/api-client.ts): whereabouts' IPPools and
 * OverlappingRangeIPReservations and the NetworkAttachmentDefinitions, in every namespace, and one
 * pod by name. Read only: the migration writes through the cluster tier alone (the way back,
 * `migrate to-whereabouts`, writes whereabouts' objects through kube-writes.ts).
 *
 * Guarantees: listings are read in pages (`limit`, then `continue` while the server gives one);
 * a resource whose API the cluster does not serve (404 on the collection) lists as empty, so a
 * cluster without OverlappingRangeIPReservations migrates what its IPPools hold; any other
 * failure is a TRY_AGAIN WarrenError naming the request, the status and the missing permission.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { describeFailure, failureOfError, missingPermission } from '../../sources/kubernetes/api-failure.ts';
import { OnDemandClient } from '../../sources/kubernetes/on-demand-client.ts';
import type { ApiAnswer } from '../../store/kubernetes/api-client.ts';
import type { ApiFailure } from '../../store/kubernetes/api-failure.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';

const PAGE_LIMIT = 500;

export const COLLECTIONS = {
  ipPools: { path: '/apis/whereabouts.cni.cncf.io/v1alpha1/ippools', resource: 'ippools.whereabouts.cni.cncf.io' },
  reservations: {
    path: '/apis/whereabouts.cni.cncf.io/v1alpha1/overlappingrangeipreservations',
    resource: 'overlappingrangeipreservations.whereabouts.cni.cncf.io',
  },
  definitions: {
    path: '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions',
    resource: 'network-attachment-definitions.k8s.cni.cncf.io',
  },
} as const;

export type Collection = keyof typeof COLLECTIONS;

/** What the migration reads of the cluster; an interface so the planning can be fed without one. */
export interface WhereaboutsReader {
  list(collection: Collection): Promise<unknown[]>;
  /** The pod's object, or undefined when there is none. */
  pod(namespace: string, name: string): Promise<unknown>;
}

export class KubeReader implements WhereaboutsReader {
  readonly #client: OnDemandClient;

  constructor(config: KubeAccess) {
    this.#client = OnDemandClient.of(config, { userAgent: 'warren-migrate' });
  }

  async #get(path: string, query: Record<string, string>): Promise<ApiAnswer> {
    try {
      const client = await this.#client.get();
      return await client.send(`GET ${path}`, { method: 'GET', path, query });
    } catch (error) {
      throw new WarrenError('TRY_AGAIN', `GET ${path}: ${describeFailure(failureOfError(error))}`, { cause: error });
    }
  }

  #failed(path: string, verb: string, resource: string, failure: ApiFailure): WarrenError {
    const missing = missingPermission(failure, verb, resource);
    return new WarrenError(
      'TRY_AGAIN',
      `GET ${path}: ${describeFailure(failure)}${missing === undefined ? '' : ` (the migration needs: ${missing})`}`,
    );
  }

  async list(collection: Collection): Promise<unknown[]> {
    const { path, resource } = COLLECTIONS[collection];
    const items: unknown[] = [];
    let token: string | undefined;
    do {
      const query: Record<string, string> = {
        limit: String(PAGE_LIMIT),
        ...defined({ continue: token }),
      };
      const answer = await this.#get(path, query);
      if (answer.status === 404 && token === undefined) return [];
      if (answer.status !== 200) throw this.#failed(path, 'list', resource, answer.failure);
      const list = jsonOf(answer, path) as { items?: unknown; metadata?: { continue?: unknown } };
      if (!Array.isArray(list.items) && list.items !== null)
        throw new WarrenError('TRY_AGAIN', `GET ${path}: the answer holds no items`);
      items.push(...(list.items ?? []));
      const next = list.metadata?.continue;
      token = typeof next === 'string' && next !== '' ? next : undefined;
    } while (token !== undefined);
    return items;
  }

  async pod(namespace: string, name: string): Promise<unknown> {
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`;
    const answer = await this.#get(path, {});
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw this.#failed(path, 'get', 'pods', answer.failure);
    return jsonOf(answer, path);
  }
}

/** The answer's JSON object; TRY_AGAIN when it is none. */
function jsonOf(answer: { readonly body: unknown; readonly json: boolean }, path: string): Record<string, unknown> {
  if (!answer.json || typeof answer.body !== 'object' || answer.body === null)
    throw new WarrenError('TRY_AGAIN', `GET ${path}: the answer is not JSON`);
  return answer.body as Record<string, unknown>;
}
