/**
 * Writes this node's entry of a WarrenReservation's status: one JSON merge patch of the status
 * subresource, `{"status":{"inUse":{"<node>": entry | null}}}`. A merge patch merges maps key by
 * key, so each node writes its own entry and never another's, with no resourceVersion to race on.
 *
 * Guarantees: one request per write, with the API client's deadline; a reservation that is gone
 * (a JSON 404) answers 'missing'; any other answer is the WarrenError the client says it means
 * (a 403 names the missing permission). The client opens at the first write, not before, so an
 * agent with no reservation never connects for them.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeApiClient } from '../../store/kubernetes/api-client.ts';
import type { NodeInUse } from './reservations.ts';

export interface ReservationStatusWriter {
  write(name: string, entry: NodeInUse | null): Promise<'written' | 'missing'>;
  /** Closes the client's connections (the agent stops). */
  close(): void;
}

export function reservationStatusWriter(kubeConfig: KubeConfig, node: string): ReservationStatusWriter {
  let opened: Promise<KubeApiClient> | undefined;
  return {
    async write(name, entry) {
      opened ??= KubeApiClient.open({ kubeConfig });
      const client = await opened.catch((error: unknown) => {
        opened = undefined; // a kubeconfig that failed may be fixed (a rotated file): open again next time
        throw error;
      });
      const what = `the status of WarrenReservation ${name}`;
      const answer = await client.send(what, {
        method: 'PATCH',
        path: `/apis/warren.dev/v1alpha1/warrenreservations/${encodeURIComponent(name)}/status`,
        contentType: 'application/merge-patch+json',
        body: { status: { inUse: { [node]: entry } } },
      });
      if (answer.status === 200) return 'written';
      if (answer.status === 404 && answer.json) return 'missing';
      throw client.refusal(what, answer, 'patch', 'warrenreservations.warren.dev');
    },
    close() {
      void opened?.then((client) => client.close()).catch(() => undefined);
      opened = undefined;
    },
  };
}
