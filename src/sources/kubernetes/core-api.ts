/**
 * The few requests the agent makes of the core API beside its watches, through the agent's client
 * (on-demand-client.ts): one pod, namespace or Node read by name, and Events created and
 * merge-patched (agent/kubernetes/events.ts). The calls keep the shapes of @kubernetes/client-node's
 * CoreV1Api they replaced, so callers (and their tests) read the same.
 *
 * Guarantees:
 * - an object is the JSON the server sent (no client-side model classes: timestamps stay strings);
 * - an answer other than 2xx is thrown as an `ApiStatusError` whose numeric `code` is the HTTP
 *   status and `body` the server's Status (as text), which api-failure.ts `failureOfError` reads
 *   (404 not found, 403 and its permission, the Status' causes); no answer at all is the client's
 *   TRY_AGAIN, its cause the network error;
 * - each request is counted and identified by the client it goes through.
 */
import type { ApiAnswer, ApiRequest } from '../../store/kubernetes/api-client.ts';
import type { OnDemandClient } from './on-demand-client.ts';

/** An answer other than 2xx, in the shape failureOfError reads (as the library's ApiException). */
export class ApiStatusError extends Error {
  readonly code: number;
  readonly body: string;

  constructor(what: string, answer: ApiAnswer) {
    super(`${what}: HTTP ${answer.status} ${answer.failure.message}`);
    this.name = 'ApiStatusError';
    this.code = answer.status;
    this.body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  }
}

/** A Kubernetes object as the server sent it, with the metadata the agent reads. */
export interface KubeObject {
  readonly metadata?: { readonly name?: string; readonly namespace?: string; readonly uid?: string };
  readonly [field: string]: unknown;
}

const segment = encodeURIComponent;

export class CoreApi {
  readonly #client: OnDemandClient;

  constructor(client: OnDemandClient) {
    this.#client = client;
  }

  readNamespacedPod(p: { name: string; namespace: string }): Promise<KubeObject> {
    const path = `/api/v1/namespaces/${segment(p.namespace)}/pods/${segment(p.name)}`;
    return this.#ask(`read pod ${p.namespace}/${p.name}`, { method: 'GET', path });
  }

  readNamespace(p: { name: string }): Promise<KubeObject> {
    return this.#ask(`read namespace ${p.name}`, { method: 'GET', path: `/api/v1/namespaces/${segment(p.name)}` });
  }

  readNode(p: { name: string }): Promise<KubeObject> {
    return this.#ask(`read node ${p.name}`, { method: 'GET', path: `/api/v1/nodes/${segment(p.name)}` });
  }

  createNamespacedEvent(p: { namespace: string; body: object }): Promise<KubeObject> {
    const path = `/api/v1/namespaces/${segment(p.namespace)}/events`;
    return this.#ask(`create an event in ${p.namespace}`, { method: 'POST', path, body: p.body });
  }

  /** A merge patch (application/merge-patch+json) of the Event. */
  patchNamespacedEvent(p: { name: string; namespace: string; body: object }): Promise<KubeObject> {
    const path = `/api/v1/namespaces/${segment(p.namespace)}/events/${segment(p.name)}`;
    return this.#ask(`patch event ${p.namespace}/${p.name}`, {
      method: 'PATCH',
      path,
      body: p.body,
      contentType: 'application/merge-patch+json',
    });
  }

  async #ask(what: string, request: ApiRequest): Promise<KubeObject> {
    const client = await this.#client.get();
    const answer = await client.send(what, request);
    if (answer.status < 200 || answer.status > 299) throw new ApiStatusError(what, answer);
    return answer.body as KubeObject;
  }
}
