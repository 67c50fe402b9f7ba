/**
 * Writes this node's entry of a WarrenReservation's status: one JSON merge patch of the status
 * subresource, `{"status":{"inUse":{"<node>": entry | null}}}`. A merge patch merges maps key by
 * key, so each node writes its own entry and never another's, with no resourceVersion to race on.
 *
 * Guarantees: one request per write, with the API client's deadline; a reservation that is gone
 * (a JSON 404) answers 'missing'; any other answer is the WarrenError the client says it means
 * (a 403 names the missing permission). Through the agent's client for Warren's objects, opened
 * at the first use, not before, and again after an opening that failed (on-demand-client.ts).
 */
import type { OnDemandClient } from '../../sources/kubernetes/on-demand-client.ts';
import type { NodeInUse } from './reservations.ts';

export interface ReservationStatusWriter {
  write(name: string, entry: NodeInUse | null): Promise<'written' | 'missing'>;
}

export function reservationStatusWriter(opened: OnDemandClient, node: string): ReservationStatusWriter {
  return {
    async write(name, entry) {
      const client = await opened.get();
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
  };
}
