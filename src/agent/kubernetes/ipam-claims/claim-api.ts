/**
 * The two requests the agent makes of IPAMClaims besides its list-watch: a GET of one claim (an
 * ADD's cache miss) and a merge patch of one claim's status subresource (what it holds). Through
 * the agent's client for Warren's objects (on-demand-client.ts: the kubernetes store's API client,
 * one keep-alive pool, deadlines, TRY_AGAIN when no answer came; opened at the first request, an
 * agent with no claims never opens it, and again after an opening that failed).
 *
 * And whether the API server serves IPAMClaims at all (its discovery document of the group version,
 * which any authenticated client may read): a cluster without KubeVirt's CRD has none to watch.
 *
 * Guarantees: a claim that does not exist (a Status 404) answers undefined / 'gone'; the API
 * server not serving IPAMClaims at all (its text 404) is INVALID_CONFIG saying the CRD is missing;
 * every other unexpected answer is the client's refusal (TRY_AGAIN for 429 and 5xx, else
 * IO_FAILURE naming the Status, or the permission missing).
 */
import { WarrenError } from '../../../core/errors.ts';
import type { ApiAnswer, KubeApiClient } from '../../../store/kubernetes/api-client.ts';
import type { ClaimRef } from './claim-cache.ts';
import type { PatchOutcome, WantedClaimStatus } from './claim-status.ts';
import type { OnDemandClient } from '../../../sources/kubernetes/on-demand-client.ts';

const RESOURCE = 'ipamclaims.k8s.cni.cncf.io';

const claimPath = (ref: ClaimRef): string => {
  const [namespace, name] = [encodeURIComponent(ref.namespace), encodeURIComponent(ref.name)];
  return `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${namespace}/ipamclaims/${name}`;
};

export class ClaimApi {
  readonly #client: OnDemandClient;

  constructor(client: OnDemandClient) {
    this.#client = client;
  }

  #api(): Promise<KubeApiClient> {
    return this.#client.get();
  }

  /** Whether the server serves IPAMClaims now (k8s.cni.cncf.io/v1alpha1 lists `ipamclaims`). */
  async served(): Promise<boolean> {
    const what = 'read the discovery document of k8s.cni.cncf.io/v1alpha1';
    const api = await this.#api();
    const answer = await api.send(what, { method: 'GET', path: '/apis/k8s.cni.cncf.io/v1alpha1' });
    if (answer.status === 404) return false;
    if (answer.status !== 200) throw api.refusal(what, answer, 'get', 'k8s.cni.cncf.io/v1alpha1');
    const resources = (answer.body as { resources?: unknown } | null)?.resources;
    return Array.isArray(resources) && resources.some((r) => (r as { name?: unknown } | null)?.name === 'ipamclaims');
  }

  /** The claim as the server holds it; undefined when it does not exist. */
  async get(ref: ClaimRef): Promise<unknown> {
    const what = `read IPAMClaim ${ref.namespace}/${ref.name}`;
    const api = await this.#api();
    const answer = await api.send(what, { method: 'GET', path: claimPath(ref) });
    if (answer.status === 200) return answer.body;
    if (answer.status === 404 && answer.json) return undefined;
    throw refusal(api, what, answer, 'get', 'ipamclaims');
  }

  /** Writes `status.ips` and `status.ownerPod` of the claim (a merge patch: no read, no conflict). */
  async patchStatus(ref: ClaimRef, status: WantedClaimStatus): Promise<PatchOutcome> {
    const what = `write the status of IPAMClaim ${ref.namespace}/${ref.name}`;
    const api = await this.#api();
    const answer = await api.send(what, {
      method: 'PATCH',
      path: `${claimPath(ref)}/status`,
      contentType: 'application/merge-patch+json',
      body: { status: { ips: status.ips, ownerPod: status.ownerPod } },
    });
    if (answer.status === 200) return 'patched';
    if (answer.status === 404 && answer.json) return 'gone';
    throw refusal(api, what, answer, 'patch', 'ipamclaims/status');
  }
}

function refusal(api: KubeApiClient, what: string, answer: ApiAnswer, verb: string, resource: string): WarrenError {
  if (answer.status === 404 && !answer.json)
    return new WarrenError(
      'INVALID_CONFIG',
      `the Kubernetes API server ${api.server} does not serve ${RESOURCE} (${what}): ` +
        "is KubeVirt's IPAMClaim CustomResourceDefinition installed?",
    );
  return api.refusal(what, answer, verb, resource);
}
