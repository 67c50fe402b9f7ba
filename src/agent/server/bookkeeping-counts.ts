/**
 * How many bookkeeping records (ipam/bookkeeping.ts) this agent's store holds, by kind: the
 * status counts them apart from the allocations of containers ("3 lent to other nodes"), so a
 * lender's placeholders are never shown as containers it runs.
 *
 * Each kind is read by its network (a store filters by network exactly): a lender holds as many
 * placeholders as it lent, a few per range, so the reads stay small.
 */
import { BOOKKEEPING_KINDS, bookkeepingNetwork } from '../../ipam/bookkeeping.ts';
import type { Store } from '../../store/store.ts';

/** Records by kind (`lent`, `returned`, `held`); kinds with none are left out. */
export async function bookkeepingCounts(store: Pick<Store, 'list'>): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const kind of BOOKKEEPING_KINDS) {
    const n = (await store.list({ network: bookkeepingNetwork(kind) })).length;
    if (n > 0) counts[kind] = n;
  }
  return counts;
}

/** The records of all kinds together. */
export function bookkeepingTotal(counts: Readonly<Record<string, number>>): number {
  return Object.values(counts).reduce((sum, n) => sum + n, 0);
}
