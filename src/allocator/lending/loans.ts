/**
 * The records of a loan, on both sides (pure: no I/O).
 *
 * - The lender holds a lent address in its block as a placeholder allocation of owner
 *   (`warren.dev/lent`, <borrower node>, <the address>), so its own picks never hand it out and its
 *   published view says where the address went. The address as the interface name keeps one owner
 *   per address (the store's one-address-per-owner rule).
 * - The borrower keeps each lent address in a loan pool of its own SQLite, keyed
 *   `<range pool>#<address>/<32|128>` (a block key whose block is one address: ipam/blocks.ts), and
 *   hands it out from there with no request to the cluster.
 * - A loan the borrower gave back is marked in its loan pool by an allocation of owner
 *   (`warren.dev/returned`, <borrower node>, <the address>): the pool is then full, so no pick reaches it
 *   again, and the grant can be removed from the request without a pick racing it. A grant of the
 *   same address later releases the mark.
 *
 * A loan pool key never reads as a block of its range (blockOfKey) unless the range's blocks are
 * one address each (block_size 32 or 128), where a loan would be a block anyway.
 */
import type { Moment } from '../../core/moment.ts';
import { type Family, bitsOf, formatIP, parseCidr } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockCidrOfKey, blockKey, blockKeyPrefix } from '../../ipam/blocks.ts';
import type { RangeSpec } from '../../ipam/range.ts';

/** The network of a lender's placeholder for an address it lent. */
export const LENT_NETWORK = 'warren.dev/lent';
/** The network of a borrower's mark on a loan it gave back. */
export const RETURNED_NETWORK = 'warren.dev/returned';
/** The lender named in grants that `warren migrate whereabouts` wrote: no node lent them. */
export const MIGRATION_LENDER = 'whereabouts';

/** The loan pool key of `address` (canonical text) in range pool `rangePool`. */
export function loanKey(rangePool: string, family: Family, address: bigint): string {
  return blockKey(rangePool, `${formatIP({ family, value: address })}/${bitsOf(family)}`);
}

/** The address a loan pool of `range` holds, or undefined when `key` is no loan pool of it. */
export function loanAddressOf(range: Pick<RangeSpec, 'pool' | 'family'>, key: string): bigint | undefined {
  if (!key.startsWith(blockKeyPrefix(range.pool))) return undefined;
  const cidr = parseCidr(blockCidrOfKey(key) ?? '');
  if (cidr === undefined || cidr.address.family !== range.family || cidr.length !== bitsOf(range.family))
    return undefined;
  return loanKey(range.pool, range.family, cidr.address.value) === key ? cidr.address.value : undefined;
}

/**
 * The span of the loan pool of `address`: the range narrowed to one address, its exclusions kept,
 * so an address the borrower's config excludes is never handed out even when a lender lent it.
 */
export function loanSpan(range: RangeSpec, address: bigint): RangeSpec {
  return { ...range, pool: loanKey(range.pool, range.family, address), first: address, last: address };
}

/** The lender's placeholder for `address` lent to `borrower` from its block `block`. */
export function placeholderOf(
  block: string,
  family: Family,
  address: bigint,
  borrower: string,
  lender: string,
  now: Moment,
): Allocation {
  const text = formatIP({ family, value: address });
  return {
    pool: block,
    address: text,
    network: LENT_NETWORK,
    containerID: borrower,
    ifname: text,
    node: lender,
    createdAt: now.wall,
    ...(now.stamp === undefined ? {} : { createdStamp: now.stamp }),
  };
}

/** The borrower's (`node`'s) mark on its loan pool `pool` of `address`, given back. */
export function returnedMarkOf(pool: string, address: string, node: string, now: Moment): Allocation {
  return {
    pool,
    address,
    network: RETURNED_NETWORK,
    containerID: node,
    ifname: address,
    node,
    createdAt: now.wall,
    ...(now.stamp === undefined ? {} : { createdStamp: now.stamp }),
  };
}
