/**
 * The CNI GC rule: which allocations of a network a GC call may take. The runtime sends the
 * attachments it still has (`cni.dev/valid-attachments`); every other allocation of the network is
 * stale, with two exceptions that keep addresses in use:
 * - on a store shared by nodes, the runtime's list is this node's attachments only: other nodes'
 *   allocations are not its to judge (`gcScope`);
 * - an allocation made after the runtime took its list is not on it and is in use: the caller
 *   spares allocations younger than a grace (`ReleaseLimits.createdAtOrBefore`).
 * Pure: the allocator's `gc` reads the store with `gcScope`, asks `gcCandidates` and releases.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type { AllocationFilter } from '../store/store.ts';
import { type ReleaseLimits, within } from './release.ts';

/** The key of one attachment (containerID, ifname) in a GC's set of valid attachments. */
export function attachmentKey(containerID: string, ifname: string): string {
  return JSON.stringify([containerID, ifname]);
}

/** The allocations a GC of `network` looks at: this node's only when nodes share the store. */
export function gcScope(network: string, node: string, sharedByNodes: boolean): AllocationFilter {
  return sharedByNodes ? { network, node } : { network };
}

/**
 * The owners whose allocations a GC releases: those of `allocations` (read with `gcScope`) whose
 * attachment is not in `valid` and that `limits` allow, one owner per attachment.
 */
export function gcCandidates(allocations: readonly Allocation[], valid: ReadonlySet<string>, limits: ReleaseLimits, boot: string | undefined, here?: string): Owner[] {
  const owners = new Map<string, Owner>();
  for (const a of allocations) {
    const key = attachmentKey(a.containerID, a.ifname);
    if (valid.has(key) || !within(a, limits, boot, here) || owners.has(key)) continue;
    owners.set(key, { network: a.network, containerID: a.containerID, ifname: a.ifname });
  }
  return [...owners.values()];
}
