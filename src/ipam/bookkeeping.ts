/**
 * Bookkeeping records: the placeholder allocations Warren keeps for itself, not for a container.
 * Pure: no I/O.
 *
 * Every such record has a network under `warren.dev/` (a lender's placeholder for a lent address,
 * 'warren.dev/lent'; a borrower's mark on a loan it gave back, 'warren.dev/returned'; a held
 * address, 'warren.dev/held'; an address a node had announced it hands out next, kept after its
 * file went back, 'warren.dev/announced': store/tiered/announced.ts), a prefix no CNI network of a
 * container carries (a CNI network name holds no '/'). So one predicate tells them apart
 * everywhere: a runtime's resync, the audit, the GC and the pod-gone releases never release one as
 * a container that is gone, and listings and counts show them as what they are, not as containers.
 */

/** The prefix of the network of every bookkeeping record. */
export const BOOKKEEPING_PREFIX = 'warren.dev/';

/**
 * The kinds of bookkeeping record known here, each the network `warren.dev/<kind>`: counts read
 * them by network (a store filters by network exactly, not by prefix).
 */
export const BOOKKEEPING_KINDS = ['lent', 'returned', 'held', 'announced'] as const;

/** The network of bookkeeping records of `kind`. */
export function bookkeepingNetwork(kind: string): string {
  return `${BOOKKEEPING_PREFIX}${kind}`;
}

/** Whether `a` is a record Warren keeps for itself (a placeholder), not a container's allocation. */
export function isBookkeeping(a: { network: string }): boolean {
  return a.network.startsWith(BOOKKEEPING_PREFIX);
}

/** What `a` is, for listings (`lent to n2`), or undefined when it is a container's allocation. */
export function bookkeepingLabel(a: { network: string; containerID: string }): string | undefined {
  if (!isBookkeeping(a)) return undefined;
  const kind = a.network.slice(BOOKKEEPING_PREFIX.length);
  // The lending records name the borrower as their container (allocator/lending/loans.ts).
  if (kind === 'lent') return `lent to ${a.containerID}`;
  if (kind === 'returned') return `loan given back by ${a.containerID}`;
  return `${kind}: ${a.containerID}`;
}
