/**
 * The reads the migration makes of the Kubernetes API, through @kubernetes/client-node's HTTP layer
 * (its TLS and credentials): whereabouts' IPPools and OverlappingRangeIPReservations and the
 * NetworkAttachmentDefinitions, in every namespace, and one pod by name. Read only: the migration
 * writes through the cluster tier alone.
 *
 * Guarantees: listings are read in pages (`limit`, then `continue` while the server gives one);
 * a resource whose API the cluster does not serve (404 on the collection) lists as empty, so a
 * cluster without OverlappingRangeIPReservations migrates what its IPPools hold; any other
 * failure is a TRY_AGAIN WarrenError naming the request, the status and the missing permission.
 */
import { HttpMethod, IsomorphicFetchHttpLibrary, type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import {
  describeFailure,
  failureOfError,
  failureOfResponse,
  missingPermission,
} from '../../sources/kubernetes/api-failure.ts';

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
  readonly #config: KubeConfig;
  readonly #http = new IsomorphicFetchHttpLibrary();

  constructor(config: KubeConfig) {
    this.#config = config;
  }

  async #get(path: string, query: Record<string, string>): Promise<{ status: number; body: string }> {
    const cluster = this.#config.getCurrentCluster();
    if (cluster === null) throw new WarrenError('INVALID_CONFIG', 'the kubeconfig names no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
    try {
      const context = new RequestContext(url.toString(), HttpMethod.GET);
      await this.#config.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', 'application/json');
      const response = await this.#http.send(context).toPromise();
      return { status: response.httpStatusCode, body: await response.body.text() };
    } catch (error) {
      throw new WarrenError('TRY_AGAIN', `GET ${path}: ${describeFailure(failureOfError(error))}`, { cause: error });
    }
  }

  #failed(path: string, verb: string, resource: string, status: number, body: string): WarrenError {
    const failure = failureOfResponse(status, body);
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
      const { status, body } = await this.#get(path, query);
      if (status === 404 && token === undefined) return [];
      if (status !== 200) throw this.#failed(path, 'list', resource, status, body);
      const list = parseJson(body, path) as { items?: unknown; metadata?: { continue?: unknown } };
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
    const { status, body } = await this.#get(path, {});
    if (status === 404) return undefined;
    if (status !== 200) throw this.#failed(path, 'get', 'pods', status, body);
    return parseJson(body, path);
  }
}

function parseJson(body: string, path: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    throw new WarrenError('TRY_AGAIN', `GET ${path}: the answer is not JSON`);
  }
}
