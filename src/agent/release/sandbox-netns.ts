/**
 * Network namespaces for allocations no CNI ADD recorded here. An address `warren migrate
 * whereabouts` carried over is its pod's allocation with the pod's namespace, name and UID and the
 * sandbox's container ID (whereabouts' `id`), but no network namespace: whereabouts keeps none. So
 * neither the namespace sweep nor the pod-gone path could judge it by its namespace; it waited for
 * containerd's word or the pod-gone grace (45 s on a real node). Each reconcile pass, this node's
 * allocations that name a pod UID and no namespace are looked up in the runtime (the pod's CRI
 * sandbox: pod-sandboxes.ts) and the namespace of the sandbox they were made for is recorded, by a
 * `relocate` commit naming their holder; from then on they are judged like any other. The pass
 * hands in its one listing of this node's allocations and audits the listing this answers, so a
 * pass lists the store once (the namespaces recorded are in it, as a second listing would show them).
 *
 * Guarantees:
 * - only this node's allocations that are not bookkeeping, name a pod UID and have no namespace;
 * - no lookup while no such allocation is held; else one listing of the sandboxes a pass, for at
 *   most MAX_PODS_A_PASS pods (the rest the next pass);
 * - the namespace recorded is that of the sandbox whose ID is the allocation's container ID and
 *   whose pod is the allocation's, and only when that sandbox names one: never another sandbox's
 *   of the pod (a sandbox re-made), never a guess;
 * - a commit that meets a newer revision, or a lookup that fails, is left for the next pass; a
 *   failure is said in the agent's recent errors, never thrown;
 * - the listing answered is the one handed in, each allocation whose namespace was committed
 *   replaced by itself with that namespace (a `relocate` changes nothing else), nothing else changed.
 */
import type { Logger } from 'pino';
import { messageOf } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { PodSandbox } from '../../sources/containerd/pod-sandboxes.ts';
import type { Store } from '../../store/store.ts';
import type { RecentErrors } from '../metrics/recent-errors.ts';

/** Pods looked up in one pass at most. */
export const MAX_PODS_A_PASS = 64;

/** The runtime's pod sandboxes now. */
export type SandboxLookup = () => Promise<readonly PodSandbox[]>;

export interface SandboxNetnsOptions {
  readonly store: Store;
  readonly lookup: SandboxLookup;
  /** This node's allocations as the pass listed them (only this node's on a store shared by nodes). */
  readonly listed: readonly Allocation[];
  readonly logger: Logger;
  readonly errors: RecentErrors;
}

/** Records the namespaces found; answers `listed` with them (see the header). */
export async function recordSandboxNamespaces(o: SandboxNetnsOptions): Promise<readonly Allocation[]> {
  const byPod = new Map<string, Allocation[]>();
  for (const a of o.listed) {
    if (a.netns !== undefined || a.podUID === undefined || isBookkeeping(a)) continue;
    if (!byPod.has(a.podUID) && byPod.size >= MAX_PODS_A_PASS) continue;
    byPod.set(a.podUID, [...(byPod.get(a.podUID) ?? []), a]);
  }
  if (byPod.size === 0) return o.listed;
  let sandboxes: readonly PodSandbox[];
  try {
    sandboxes = await o.lookup();
  } catch (error) {
    o.errors.add(`listing the runtime's pod sandboxes failed: ${messageOf(error)}`);
    return o.listed;
  }
  const recorded = new Map<Allocation, Allocation>();
  for (const [podUID, held] of byPod) {
    for (const a of held) {
      const netns = sandboxes.find((s) => s.id === a.containerID && s.podUID === podUID)?.netns;
      if (netns === undefined) continue;
      const read = await o.store.readLedger(a.pool);
      if (read.kind !== 'snapshot') continue;
      const moved = { ...a, netns };
      const result = await o.store.commit(a.pool, read.revision, [{ op: 'relocate', allocation: moved }]);
      if (result.kind !== 'committed') continue;
      recorded.set(a, moved);
      o.logger.info(
        { address: a.address, pool: a.pool, containerID: a.containerID, podUID, netns },
        "recorded the network namespace of a migrated address's sandbox",
      );
    }
  }
  return recorded.size === 0 ? o.listed : o.listed.map((a) => recorded.get(a) ?? a);
}
