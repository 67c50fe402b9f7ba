/**
 * The Events an agent on the kubernetes store writes for its releases (src/agent/kubernetes/releases.ts:
 * reason IPAddressGarbageCollected, a Normal Event on the pod, "released <addresses>: <why>"), read
 * back from the API server through a node's own kubeconfig, as `kubectl get events` reads them.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { REASON_RELEASED } from '../../src/agent/kubernetes/releases.ts';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';

/** One release Event: the pod it is on and the addresses its message says were released. */
export interface ReleaseEvent {
  readonly pod: string;
  readonly addresses: readonly string[];
}

/** The release Events in `namespace`, read through `kubeconfig` (a request deadline of 10 s). */
export async function readReleaseEvents(kubeconfig: string, namespace: string): Promise<ReleaseEvent[]> {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfig);
  const client = await KubeApiClient.open({ kubeConfig: config, http2: false });
  try {
    const answer = await client.send('list events', {
      method: 'GET',
      path: `/api/v1/namespaces/${namespace}/events`,
    });
    if (answer.status !== 200) throw new Error(`listing events answered ${answer.status}`);
    const items = ((answer.body as { items?: unknown[] }).items ?? []) as Array<{
      reason?: string;
      message?: string;
      involvedObject?: { name?: string };
    }>;
    return items.filter((e) => e.reason === REASON_RELEASED).map(releaseEventOf);
  } finally {
    client.close();
  }
}

/** The pod and addresses of a release Event (its message: "released a, b: why"; the soak's ranges are IPv4). */
export function releaseEventOf(e: { message?: string; involvedObject?: { name?: string } }): ReleaseEvent {
  const said = /^released ([^:]*):/.exec(e.message ?? '')?.[1] ?? '';
  return { pod: e.involvedObject?.name ?? '', addresses: said.split(', ').filter(Boolean) };
}
