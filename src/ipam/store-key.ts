/**
 * The store key: the one codec of the name a pool goes by in a store, whatever its kind. Pure: no
 * I/O. A key is a range pool's (pool-key.ts: `10.0.0.0/24` or `<subnet>@<network_name>`, never a
 * `#`), or one of the range pool's parts, `<range pool>#<part>`:
 * - a block, `#<block CIDR>` (blocks.ts: the aligned CIDR a node claims);
 * - a loan, `#<address>/<32|128>`: a pool of one address another node lent (loan-key.ts);
 * - a use, `#held:<address>/<holder key>`: pods' use of an address held for a holder (holding-key.ts).
 *
 * Every other module asks this one (through the functions of the files named above) and none
 * splits a key at `#` by hand. (The SQLite store's unique index repeats the range pool rule in SQL,
 * and says so.)
 *
 * Guarantees:
 * - total: every string parses, and `formatStoreKey(parseStoreKey(s)) === s` for every string `s`;
 * - the range pool of a key is what precedes its first `#` (the key itself when it has none);
 * - a loan is a part of exactly one address written as `formatIP` writes it (one written otherwise
 *   is a block's part, as written); whether a one-address pool is a loan or a block of a range whose
 *   blocks are one address is the range's to say (loan-key.ts `isLoanKey`);
 * - a use is a part beginning `held:` with a `/` after the address: the address and the holder are
 *   as written (holding-key.ts checks them); a part beginning `held:` without one is a block's part.
 */
import { type Family, bitsOf, formatIP, parseCidr } from './address.ts';

/** Between a range pool key and the part of it a key names. */
export const KEY_SEPARATOR = '#';

/** What begins a use's part: `held:<address>/<holder>`. */
const USE_MARK = 'held:';

/** A store key, by kind. */
export type StoreKey =
  | { readonly kind: 'range'; readonly rangePool: string }
  | { readonly kind: 'block'; readonly rangePool: string; readonly cidr: string }
  | { readonly kind: 'loan'; readonly rangePool: string; readonly family: Family; readonly address: bigint }
  | { readonly kind: 'use'; readonly rangePool: string; readonly address: string; readonly holder: string };

export type StoreKeyKind = StoreKey['kind'];

/** The key of `key`'s parts. */
export function formatStoreKey(key: StoreKey): string {
  switch (key.kind) {
    case 'range':
      return key.rangePool;
    case 'block':
      return `${key.rangePool}${KEY_SEPARATOR}${key.cidr}`;
    case 'loan':
      return `${key.rangePool}${KEY_SEPARATOR}${loanPart(key.family, key.address)}`;
    case 'use':
      return `${key.rangePool}${KEY_SEPARATOR}${USE_MARK}${key.address}/${key.holder}`;
  }
}

/** What `key` names (see the guarantees). */
export function parseStoreKey(key: string): StoreKey {
  const rangePool = rangePoolOf(key);
  const part = partOf(key);
  if (part === undefined) return { kind: 'range', rangePool };
  const slash = part.indexOf('/', USE_MARK.length);
  if (part.startsWith(USE_MARK) && slash >= 0)
    return { kind: 'use', rangePool, address: part.slice(USE_MARK.length, slash), holder: part.slice(slash + 1) };
  const cidr = parseCidr(part);
  if (cidr !== undefined && cidr.length === bitsOf(cidr.address.family)) {
    const { family, value } = cidr.address;
    if (loanPart(family, value) === part) return { kind: 'loan', rangePool, family, address: value };
  }
  return { kind: 'block', rangePool, cidr: part };
}

/**
 * The range pool `key` belongs to: the part before its first `#`, or the key itself. (The kind's
 * field, read without parsing the part: asked of every allocation listed.)
 */
export function rangePoolOf(key: string): string {
  const i = key.indexOf(KEY_SEPARATOR);
  return i < 0 ? key : key.slice(0, i);
}

/**
 * The part of `key` after its range pool, as written (a block's CIDR, a loan's address, a use's
 * `held:` part); undefined for a range pool's key.
 */
export function partOf(key: string): string | undefined {
  const i = key.indexOf(KEY_SEPARATOR);
  return i < 0 ? undefined : key.slice(i + KEY_SEPARATOR.length);
}

/** What every key of a part of `rangePool` begins with, for prefix listings. */
export function partsPrefix(rangePool: string): string {
  return `${rangePool}${KEY_SEPARATOR}`;
}

function loanPart(family: Family, address: bigint): string {
  return `${formatIP({ family, value: address })}/${bitsOf(family)}`;
}
