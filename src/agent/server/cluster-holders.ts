/**
 * Who really holds each address in the cluster's published view, for `warren allocations
 * --cluster` (allocation-pages.ts): a lent address is published twice, as its lender's placeholder
 * (a bookkeeping record naming the borrower, ipam/bookkeeping.ts) and in the borrower's published
 * loan ledger (ClusterTier.publishLoan) with the container using it. The listing shows one of them.
 *
 * Guarantees, for the blocks of one read of the view:
 * - listing every node: a lender's placeholder is shown as the container the borrower's loan
 *   publication names for that address, when there is one (with the borrower's node), else as the
 *   placeholder itself ("lent to <node>", the loan idle or not yet published); a loan publication is
 *   not listed by itself, so no address is listed twice as two holders;
 * - listing one node: its blocks as published (its placeholders say what it lent), and its loan
 *   pools' containers, which no block of that node lists;
 * - one element out per element in per block (a placeholder stands for one address, and one address
 *   has one holder), so the paging offsets into a read stay where they were;
 * - the borrower's loans are read once per read of the view, per range and borrower, page by page.
 */
import { defined } from '../../core/defined.ts';
import { parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { bookkeepingNetwork, isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { PublishedBlock } from '../../store/cluster.ts';
import type { PublishedView } from '../../store/cluster.ts';

/** Loan publications read at a time. */
const LOANS_PER_READ = 100;

/** The key of the loan ledger holding `address` in range `pool` (ipam/loan-key.ts, from the address's text). */
function loanKeyOf(pool: string, address: string): string | undefined {
  const ip = parseIP(address);
  return ip === undefined ? undefined : blockKey(pool, `${address}/${ip.family === 4 ? 32 : 128}`);
}

/** What the listing shows of each block of `blocks`, in order (see the header). */
export async function holdersOf(
  blocks: readonly PublishedBlock[],
  published: PublishedView,
  oneNode: boolean,
): Promise<Allocation[][]> {
  if (oneNode)
    return blocks.map((b) => (b.loan === true ? b.allocations.filter((a) => !isBookkeeping(a)) : [...b.allocations]));
  const lent = bookkeepingNetwork('lent');
  const wanted = new Set<string>();
  for (const b of blocks)
    if (b.loan !== true)
      for (const a of b.allocations) if (a.network === lent) wanted.add(`${rangePoolOfKey(b.key)}\0${a.containerID}`);
  const loans = new Map<string, Allocation>();
  for (const pair of wanted) {
    const [pool = '', borrower = ''] = pair.split('\0');
    let token: string | undefined;
    do {
      const page = await published(
        { pool, node: borrower },
        { limit: LOANS_PER_READ, ...defined({ continue: token }) },
      );
      for (const loan of page.items) {
        if (loan.loan !== true) continue;
        const holder = loan.allocations.find((a) => !isBookkeeping(a));
        if (holder !== undefined) loans.set(loan.key, holder);
      }
      token = page.continue === '' ? undefined : page.continue;
    } while (token !== undefined);
  }
  return blocks.map((b) => {
    if (b.loan === true) return [];
    return b.allocations.map((a) => {
      if (a.network !== lent) return a;
      const key = loanKeyOf(rangePoolOfKey(b.key), a.address);
      const holder = key === undefined ? undefined : loans.get(key);
      return holder !== undefined && holder.address === a.address && holder.node === a.containerID ? holder : a;
    });
  });
}
