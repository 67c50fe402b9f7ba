/**
 * How the WarrenPool status writer (pool-status.ts) writes: a PUT of the object's status subresource
 * at its resourceVersion, through a client opened at the first write (on-demand-client.ts: opened
 * again after an opening that failed) and closed when the writer stops.
 *
 * Guarantees: true when written; false when the object changed or is gone meanwhile (the writer
 * reads it again next round); any other answer is the WarrenError the API client says it means.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeObject } from '../../store/kubernetes/objects.ts';
import { Resource, warrenKind } from '../../store/kubernetes/resources.ts';
import { OnDemandClient } from './on-demand-client.ts';

export function poolStatusWrite(kubeConfig: KubeConfig): {
  write: (object: Record<string, unknown>) => Promise<boolean>;
  onStop: () => void;
} {
  const client = OnDemandClient.of(kubeConfig);
  const write = async (object: Record<string, unknown>): Promise<boolean> => {
    const pools = new Resource(await client.get(), warrenKind('warrenpools'));
    const name = (object.metadata as { name?: unknown } | undefined)?.name;
    const answer = await pools.replace(
      `write WarrenPool ${String(name)}'s status`,
      object as unknown as KubeObject,
      'status',
    );
    return answer.kind === 'replaced';
  };
  return { write, onStop: () => client.close() };
}
