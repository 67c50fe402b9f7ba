/**
 * Loan pool keys: where a node keeps an address another node lent it (allocator/lending/), a pool
 * of one address keyed `<range pool>#<address>/<32|128>`: a block key (blocks.ts) whose block is one
 * address. Pure: no I/O.
 *
 * Guarantees: `loanAddressOf(r, loanKey(r.pool, r.family, a)) === a`; a key is a loan key of a
 * range only when the range's own blocks are longer than one address (`isLoanKey`), so a loan pool
 * is never taken for one of the range's blocks, nor a block for a loan.
 */
import { type Family, bitsOf, formatIP, parseCidr } from './address.ts';
import { blockCidrOfKey, blockKey, blockKeyPrefix } from './blocks.ts';
import type { RangeSpec } from './range.ts';

/** The loan pool key of `address` in range pool `rangePool`. */
export function loanKey(rangePool: string, family: Family, address: bigint): string {
  return blockKey(rangePool, `${formatIP({ family, value: address })}/${bitsOf(family)}`);
}

/** The address the pool `key` of one address in `range` names, or undefined when it is no such pool. */
export function loanAddressOf(range: Pick<RangeSpec, 'pool' | 'family'>, key: string): bigint | undefined {
  if (!key.startsWith(blockKeyPrefix(range.pool))) return undefined;
  const cidr = parseCidr(blockCidrOfKey(key) ?? '');
  if (cidr === undefined || cidr.address.family !== range.family || cidr.length !== bitsOf(range.family))
    return undefined;
  return loanKey(range.pool, range.family, cidr.address.value) === key ? cidr.address.value : undefined;
}

/**
 * Whether `key` is a loan pool of a range split into `/blockPrefix` blocks: a pool of one address
 * where the range's blocks are larger. (With one-address blocks a key of one address is a block.)
 */
export function isLoanKey(key: string, blockPrefix: number): boolean {
  const cidr = parseCidr(blockCidrOfKey(key) ?? '');
  return cidr !== undefined && cidr.length === bitsOf(cidr.address.family) && blockPrefix < cidr.length;
}
