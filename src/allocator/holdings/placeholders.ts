/**
 * The placeholder of a held address (holdings.ts): an allocation in the owner node's ledger that
 * hands the address out (its block, or a loan ledger), owner (`warren.dev/held`, <holder key>, `held`).
 * A bookkeeping record (ipam/bookkeeping.ts): no runtime, GC or pod-gone release takes it. With the
 * holder key as container and one interface name, the store's one-address-per-owner-and-range rule
 * makes it one placeholder per holder and range on a node. A holding whose owner node is forgotten
 * names ORPHANED as its owner until a claim of its block takes it (holdings.ts). Pure: no I/O.
 */
import { BOOKKEEPING_PREFIX } from '../../ipam/bookkeeping.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';

/** The network of a placeholder for a held address. */
export const HELD_NETWORK = `${BOOKKEEPING_PREFIX}held`;
const HELD_IFNAME = 'held';
/** The owner a holding's record names once its owner node is forgotten, until a claim of its block takes it. */
export const ORPHANED = `${BOOKKEEPING_PREFIX}orphaned`;

/** The owner of the placeholder of holder `key`. */
export function placeholderOwner(key: string): Owner {
  return { network: HELD_NETWORK, containerID: key, ifname: HELD_IFNAME };
}

/** Whether `a` is a holding's placeholder. */
export function isHeldPlaceholder(a: Pick<Allocation, 'network'>): boolean {
  return a.network === HELD_NETWORK;
}
