/**
 * The records of a loan, on both sides (pure: no I/O).
 *
 * - The lender holds a lent address in its block as a placeholder allocation of owner
 *   (`warren.dev/lent`, <borrower node>, <the address>) recorded with node <borrower>, so its own
 *   picks never hand it out and its published view says where the address went. The address as
 *   the interface name keeps one owner per address (the store's one-address-per-owner rule).
 * - The borrower keeps each lent address in a loan ledger of its own SQLite, keyed
 *   `<range pool>#<address>/<32|128>` (ipam/loan-key.ts), and hands it out from there with no
 *   request to the cluster.
 * - A block whose owner holds nothing of its own in it, and every address in use in which is lent to
 *   one borrower, is handed over to that borrower (handover.ts): its loans become its allocations in
 *   the block, each loan ledger left with a given-back mark; a grant flagged offered is never adopted.
 * - A loan the borrower gave back is marked in its loan ledger by an allocation of owner
 *   (`warren.dev/returned`, <borrower node>, <the address>), node `warren.dev/returned`: the pool
 *   is then full, so no pick reaches it again, and the grant can be removed from the request
 *   without a pick racing it. A grant of the same address later releases the mark.
 *
 * Lending needs blocks larger than one address: where a range's blocks are one address each, a
 * loan ledger's key would be a block's (ipam/loan-key.ts), so lenders lend nothing from such blocks.
 */
import { defined } from '../../core/defined.ts';
import type { Moment } from '../../core/moment.ts';
import { type Family, formatIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { BOOKKEEPING_PREFIX } from '../../ipam/bookkeeping.ts';
import { isLoanKey, loanKey } from '../../ipam/loan-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';

export { loanAddressOf, loanKey } from '../../ipam/loan-key.ts';

/**
 * The loan ledgers among `summaries` (this node's ledgers): keys of one address in a range whose
 * blocks are larger, its block size read from the range's description or, lacking one, the range
 * as this node's configs define it (`rangeOf`). A range whose block size neither tells has none:
 * one-address blocks share the key shape, and a file put back from a copy taken before the range
 * was described holds such blocks with no description beside them (the soak, etcd seed 3943:
 * five empty blocks whose claims had vanished were taken for idle loans and marked given back).
 */
export function loanLedgers<
  T extends { readonly ledger: string; readonly description?: { readonly blockPrefix?: number } },
>(summaries: readonly T[], rangeOf: (pool: string) => { readonly blockPrefix: number } | undefined): T[] {
  const described = new Map<string, number>();
  for (const p of summaries)
    if (!isBlockKey(p.ledger) && p.description?.blockPrefix !== undefined)
      described.set(p.ledger, p.description.blockPrefix);
  return summaries.filter((p) => {
    if (!isBlockKey(p.ledger)) return false;
    const pool = rangePoolOfKey(p.ledger);
    const blockPrefix = described.get(pool) ?? rangeOf(pool)?.blockPrefix;
    return blockPrefix !== undefined && isLoanKey(p.ledger, blockPrefix);
  });
}

/** The network of a lender's placeholder for an address it lent. */
export const LENT_NETWORK = `${BOOKKEEPING_PREFIX}lent`;
/** The network of a borrower's mark on a loan it gave back. */
export const RETURNED_NETWORK = `${BOOKKEEPING_PREFIX}returned`;
/** The lender named in grants that `warren migrate whereabouts` wrote: no node lent them. */
export const MIGRATION_LENDER = 'whereabouts';

/**
 * The span of the loan ledger of `address`: the range narrowed to one address, its exclusions kept,
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
  now: Moment,
): Allocation {
  const text = formatIP({ family, value: address });
  return {
    pool: block,
    address: text,
    network: LENT_NETWORK,
    containerID: borrower,
    ifname: text,
    // The borrower's name: the published view says where the address went, and a borrower
    // forgotten for good (forget-node) takes its placeholders with it. That it names no container of
    // this node is not what keeps resyncs, audits and GC off it: its network is (ipam/bookkeeping.ts).
    node: borrower,
    createdAt: now.wall,
    ...defined({ createdStamp: now.stamp }),
  };
}

/** The borrower's (`node`'s) mark on its loan ledger `pool` of `address`, given back (or moved into its block). */
export function returnedMarkOf(pool: string, address: string, node: string, now: Moment): Allocation {
  return {
    pool,
    address,
    network: RETURNED_NETWORK,
    containerID: node,
    ifname: address,
    // No node's name (node names hold no '/'): a node forget never reaches it. Resyncs, audits and GC
    // leave it by its network (ipam/bookkeeping.ts).
    node: RETURNED_NETWORK,
    createdAt: now.wall,
    ...defined({ createdStamp: now.stamp }),
  };
}
