/**
 * Sticky addresses for StatefulSet pods (the holdings planner, last of add-plan.ts's planners): on a
 * network whose config says `"sticky": true`, or whose plan draws from a WarrenPool with
 * `spec.sticky`, a pod controlled by a StatefulSet is planned with the holding
 * `statefulset/<namespace>/<StatefulSet>/<ordinal>` (ipam/holding-key.ts), so the allocator gives
 * it the address its ordinal held before, on any node (allocator/holdings/).
 *
 * Guarantees:
 * - a plan that names a holding already (an IPAMClaim's) is left as it is; so is every ADD that is
 *   not sticky, names no pod, or whose pod no StatefulSet controls: they cost nothing here;
 * - the ordinal is read from the pod's name (`<StatefulSet>-<ordinal>`, as the StatefulSet
 *   controller names its pods), never guessed: a name of another form is refused with code 7;
 * - the pod is read from the pod directory (the pod watch's cache; a GET only on a miss); a pod
 *   that cannot be found is TRY_AGAIN (its StatefulSet cannot be known, and an ADD planned without
 *   its holding would take another address for good).
 */
import { WarrenError } from '../../core/errors.ts';
import type { NetConf } from '../../cni/netconf.ts';
import { holderKey } from '../../ipam/holding-key.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import { POOL_NETWORK_PREFIX } from '../../cni/pool-names.ts';
import type { CatalogEntry } from '../../sources/kubernetes/pool-catalog.ts';
import type { AddPlan, AddPlanner, PodRef } from '../server/add-plan.ts';
import type { PodView } from './pod-directory.ts';

export interface StickyPlannerOptions {
  readonly directory: { pod(ref: PodRef): Promise<PodView | undefined> };
  /** The WarrenPools (pool-catalog.ts), on the kubernetes store; absent elsewhere. */
  readonly catalog?: { entry(name: string): CatalogEntry | undefined };
}

/** Whether the ADD's addresses are sticky: the config says so, or a WarrenPool the plan draws from. */
export function isSticky(conf: NetConf, plan: AddPlan, catalog: StickyPlannerOptions['catalog']): boolean {
  if (conf.ipam.sticky === true) return true;
  return plan.ranges.some((range) => {
    const networkName = parsePoolKey(range.pool)?.networkName ?? '';
    if (!networkName.startsWith(POOL_NETWORK_PREFIX)) return false;
    const spec = catalog?.entry(networkName.slice(POOL_NETWORK_PREFIX.length))?.spec;
    return spec !== undefined && !(spec instanceof Error) && spec.sticky;
  });
}

/** The ordinal in the name of `pod`, a pod of StatefulSet `set`; undefined when the name is not `<set>-<n>`. */
export function ordinalOf(pod: string, set: string): number | undefined {
  if (!pod.startsWith(`${set}-`)) return undefined;
  const rest = pod.slice(set.length + 1);
  return /^(0|[1-9][0-9]{0,8})$/.test(rest) ? Number(rest) : undefined;
}

export function stickyPlanner(o: StickyPlannerOptions): AddPlanner {
  return async (conf, pod, plan) => {
    if (pod === undefined || plan.holding !== undefined || !isSticky(conf, plan, o.catalog)) return plan;
    const view = await o.directory.pod(pod);
    if (view === undefined)
      throw new WarrenError(
        'TRY_AGAIN',
        `pod ${pod.namespace}/${pod.name} is not found: whether a StatefulSet holds its address cannot be told yet`,
      );
    const set = view.owners.find((owner) => owner.controller && owner.kind === 'StatefulSet');
    if (set === undefined) return plan;
    const ordinal = ordinalOf(pod.name, set.name);
    if (ordinal === undefined)
      throw new WarrenError(
        'INVALID_CONFIG',
        `pod ${pod.namespace}/${pod.name} is controlled by StatefulSet ${set.name} but is not named ` +
          `${set.name}-<ordinal>: its sticky address cannot be told`,
      );
    return { ...plan, holding: holderKey({ kind: 'statefulset', namespace: pod.namespace, name: set.name, ordinal }) };
  };
}
