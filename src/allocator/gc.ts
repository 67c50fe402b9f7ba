/**
 * The CNI GC rule: which allocations of a network a GC call may take. The runtime sends the
 * attachments it still has (`cni.dev/valid-attachments`); every other allocation of the network is
 * stale, with exceptions that keep addresses in use:
 * - on a store shared by nodes, the runtime's list is this node's attachments only: other nodes'
 *   allocations are not its to judge (`gcScope`);
 * - an allocation made after the runtime took its list is not on it and is in use: the caller
 *   spares allocations younger than a grace (`ReleaseLimits.createdAtOrBefore`);
 * - several runtimes may share a network name on one node (podman, through its registered
 *   adapter, beside containerd): the list is the asking runtime's attachments only. An allocation
 *   a registered adapter answers for (`runtimeOf` names it) is that adapter's runtime's and is
 *   never taken by a GC: the adapter's own resync judges it. The rest (the runtime with no adapter,
 *   containerd's) are taken only when the GC is not identifiably another runtime's: a list naming
 *   any attachment an adapter answers for comes from that adapter's runtime, and takes nothing;
 * - a bookkeeping record (ipam/bookkeeping.ts: a lent address's placeholder, a held address) is
 *   no attachment and is never taken.
 * Pure: the allocator's `gc` reads the store with `gcScope`, asks `gcCandidates` and releases.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { isBookkeeping } from '../ipam/bookkeeping.ts';
import { messageOf } from '../core/errors.ts';
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

/** Which registered adapter answers for an allocation; undefined: the runtime without one (containerd). */
export type RuntimeOf = (a: Allocation) => string | undefined;

/**
 * The owners whose allocations a GC releases: those of `allocations` (read with `gcScope`) whose
 * attachment is not in `valid`, that `limits` allow and that no adapter answers for, one owner per
 * attachment; none when `valid` names an attachment an adapter answers for (see the header).
 */
export function gcCandidates(
  allocations: readonly Allocation[],
  valid: ReadonlySet<string>,
  limits: ReleaseLimits,
  boot: string | undefined,
  here?: string,
  runtimeOf: RuntimeOf = () => undefined,
): Owner[] {
  if (allocations.some((a) => valid.has(attachmentKey(a.containerID, a.ifname)) && runtimeOf(a) !== undefined))
    return [];
  const owners = new Map<string, Owner>();
  for (const a of allocations) {
    const key = attachmentKey(a.containerID, a.ifname);
    if (valid.has(key) || !within(a, limits, boot, here) || owners.has(key) || runtimeOf(a) !== undefined) continue;
    // A bookkeeping record is no runtime's attachment: a GC's list never speaks for it.
    if (isBookkeeping(a)) continue;
    owners.set(key, { network: a.network, containerID: a.containerID, ifname: a.ifname });
  }
  return [...owners.values()];
}

export interface GcOutcome {
  readonly released: Allocation[];
  readonly errors: string[];
}

/** Releases each owner GC gave up, going on past a failure and reporting each (`<container>/<ifname>: why`). */
export async function releaseEach(
  owners: readonly Owner[],
  release: (owner: Owner) => Promise<Allocation[]>,
): Promise<GcOutcome> {
  const released: Allocation[] = [];
  const errors: string[] = [];
  for (const owner of owners) {
    try {
      released.push(...(await release(owner)));
    } catch (error) {
      errors.push(`${owner.containerID}/${owner.ifname}: ${messageOf(error)}`);
    }
  }
  return { released, errors };
}
