/**
 * Bookkeeping records: the placeholder allocations Warren keeps for itself, not for a container.
 * Pure: no I/O.
 *
 * Every such record has a network under `warren.dev/` (a lender's placeholder for a lent address,
 * 'warren.dev/lent'; a borrower's mark on a loan it gave back, 'warren.dev/returned'; a held
 * address, 'warren.dev/held'), a prefix no CNI network of a container carries (a CNI network name
 * holds no '/'). So one predicate tells them apart everywhere: a runtime's resync, the audit, the
 * GC and the pod-gone releases never release one as a container that is gone, and listings and
 * counts show them as what they are, not as containers.
 */

/** The prefix of the network of every bookkeeping record. */
export const BOOKKEEPING_PREFIX = 'warren.dev/';

/** Whether `a` is a record Warren keeps for itself (a placeholder), not a container's allocation. */
export function isBookkeeping(a: { network: string }): boolean {
  return a.network.startsWith(BOOKKEEPING_PREFIX);
}
