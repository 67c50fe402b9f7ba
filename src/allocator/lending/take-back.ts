/**
 * The lender letting go of placeholders (loans.ts): those of an answer whose grant write lost, those
 * whose grant has been gone for the grace (lender.ts tidy-up), and those whose borrower gave the loan
 * back and said so (`takeBack`).
 *
 * Guarantees of `takeBack`: a grant is taken back only when its borrower flagged it given back
 * (Grant.returned), which it does only after marking its loan ledger given back (loan-return.ts),
 * and it never takes such a mark off for a grant before GIVEN_BACK_GRACE_MS (borrower.ts); the
 * flagged grants are removed from the request first (guarded by its version: a request changed
 * since is left for the next look) and the placeholders released only after, so a lender stopped
 * between the two leaves a placeholder without its grant, which the tidy-up releases after its
 * grace, never an address lent and free at once. Local commits run under the range pool's lock.
 */
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import type { AddressRequest, ClusterRecords } from '../../store/cluster.ts';
import type { LedgerOp, Store } from '../../store/store.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { LENT_NETWORK } from './loans.ts';

export interface PlaceholderRelease {
  readonly store: Store;
  readonly ledgers: LedgerCache;
  /** The allocator's locks: local commits take the range pool's. */
  readonly locks: KeyedMutex;
}

/** A placeholder to let go of: its block and its address. */
export interface HeldAddress {
  readonly block: string;
  readonly text: string;
}

/** Releases the placeholders `held` of range pool `pool`, block by block, those still there. */
export async function releasePlaceholders(
  o: PlaceholderRelease,
  pool: string,
  held: readonly HeldAddress[],
): Promise<void> {
  const { store, ledgers, locks } = o;
  await locks.run(pool, async () => {
    for (const block of new Set(held.map((h) => h.block))) {
      const read = await store.readLedger(block);
      if (read.kind !== 'snapshot') continue;
      const ops: LedgerOp[] = held
        .filter((h) => h.block === block && read.allocations.includes(h.text))
        .map((h) => ({ op: 'release', address: h.text }));
      if (ops.length > 0) await store.commit(block, read.revision, ops);
      ledgers.forget(block);
    }
  });
}

/**
 * Takes back the grants of `node` that their borrowers flagged given back in `requests`, and
 * releases their placeholders at once (see the header); what it released, as `address (node)`.
 */
export async function takeBack(
  o: PlaceholderRelease & { readonly tier: ClusterRecords; readonly node: string },
  requests: readonly AddressRequest[],
): Promise<string[]> {
  const released: string[] = [];
  for (const request of requests) {
    const back = request.grants.filter((g) => g.returned === true && g.lender === o.node);
    if (back.length === 0) continue;
    const kept = request.grants.filter((g) => !back.includes(g));
    if ((await o.tier.updateRequest(request, kept, request.wanted)) === undefined) continue;
    const placeholders = (await o.store.list({ rangePool: request.pool, network: LENT_NETWORK })).filter(
      (p) => p.containerID === request.node && back.some((g) => g.address === p.address),
    );
    await releasePlaceholders(
      o,
      request.pool,
      placeholders.map((p) => ({ block: p.pool, text: p.address })),
    );
    released.push(...placeholders.map((p) => `${p.address} (given back by ${request.node})`));
  }
  return released;
}
