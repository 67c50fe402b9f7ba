/**
 * Loan ledger keys: where a node keeps an address another node lent it (allocator/lending/), a pool
 * of one address keyed `<range pool>#<address>/<32|128>`: a store key of kind loan (store-key.ts,
 * the codec), a block key (blocks.ts) whose block is one address. Pure: no I/O.
 *
 * Guarantees: `loanAddressOf(r, loanKey(r.pool, r.family, a)) === a`; a key is a loan key of a
 * range only when the range's own blocks are longer than one address (`isLoanKey`), so a loan ledger
 * is never taken for one of the range's blocks, nor a block for a loan.
 */
import { type Family, bitsOf } from './address.ts';
import type { RangeSpec } from './range.ts';
import { formatStoreKey, parseStoreKey } from './store-key.ts';

/** The loan ledger key of `address` in range pool `rangePool`. */
export function loanKey(rangePool: string, family: Family, address: bigint): string {
  return formatStoreKey({ kind: 'loan', rangePool, family, address });
}

/** The address the pool `key` of one address in `range` names, or undefined when it is no such pool. */
export function loanAddressOf(range: Pick<RangeSpec, 'pool' | 'family'>, key: string): bigint | undefined {
  const k = parseStoreKey(key);
  return k.kind === 'loan' && k.rangePool === range.pool && k.family === range.family ? k.address : undefined;
}

/**
 * Whether `key` is a loan ledger of a range split into `/blockPrefix` blocks: a pool of one address
 * where the range's blocks are larger. (With one-address blocks a key of one address is a block.)
 */
export function isLoanKey(key: string, blockPrefix: number): boolean {
  const k = parseStoreKey(key);
  return k.kind === 'loan' && blockPrefix < bitsOf(k.family);
}
