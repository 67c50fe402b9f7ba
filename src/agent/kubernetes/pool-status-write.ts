/**
 * How the WarrenPool status writer (pool-status.ts) writes: a PUT of the object's status subresource
 * at its resourceVersion, through the agent's client for Warren's objects (on-demand-client.ts:
 * opened at the first write, again after an opening that failed; the agent closes it).
 *
 * Guarantees: true when written; false when the object changed or is gone meanwhile (the writer
 * reads it again next round); any other answer is the WarrenError the API client says it means.
 */
import type { KubeObject } from '../../store/kubernetes/objects.ts';
import { Resource, warrenKind } from '../../store/kubernetes/resources.ts';
import type { OnDemandClient } from '../../sources/kubernetes/on-demand-client.ts';

export function poolStatusWrite(client: OnDemandClient): (object: Record<string, unknown>) => Promise<boolean> {
  return async (object) => {
    const pools = new Resource(await client.get(), warrenKind('warrenpools'));
    const name = (object.metadata as { name?: unknown } | undefined)?.name;
    const answer = await pools.replace(
      `write WarrenPool ${String(name)}'s status`,
      object as unknown as KubeObject,
      'status',
    );
    return answer.kind === 'replaced';
  };
}
