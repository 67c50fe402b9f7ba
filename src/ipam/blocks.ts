/**
 * Blocks: how a range is split when several nodes share it. A block is the aligned CIDR of
 * `range.blockPrefix` bits that contains an address, clipped to the range's allocatable span, so a
 * range whose size is not a multiple of the block size simply has smaller blocks at its edges, and
 * `range_start`/`range_end` and `exclude` hold inside every block. Pure: no I/O.
 *
 * Each block is a pool of its own in the store, keyed `<range pool>#<block CIDR>`: a store key
 * (store-key.ts, the one codec of every kind of key). The functions here (`blockKey`, `isBlockKey`,
 * `rangePoolOfKey`, `blockCidrOfKey`, `blockKeyPrefix`, `inRangePool`, `rangePoolListed`) say
 * what the allocator and the stores ask of a key in its words; each is the codec's, none splits a
 * key at `#` by hand.
 *
 * Guarantees: `rangePoolOfKey(blockKey(p, c)) === p` and `blockCidrOfKey(blockKey(p, c)) === c` for
 * every range pool key `p` (pool-key.ts refuses `#` in network names, so `p` never holds one); a key
 * without `#` is a range pool (or a plain pool) and is its own range pool.
 */
import { bitsOf, formatCidr, parseCidr } from './address.ts';
import { type RangeSpec, capacityOf } from './range.ts';
import { exclusionSet, firstFree } from './ledger-state.ts';
import { RunSet } from './run-set.ts';
import { formatStoreKey, parseStoreKey, partOf, partsPrefix, rangePoolOf } from './store-key.ts';

/** The store key of block `cidr` of the range pool `rangePool`. */
export function blockKey(rangePool: string, cidr: string): string {
  return formatStoreKey({ kind: 'block', rangePool, cidr });
}

/** Whether a ledger key names a block (of some range pool), a loan or a use: a part of a range pool. */
export function isBlockKey(key: string): boolean {
  return partOf(key) !== undefined;
}

/** The range pool a ledger belongs to: a block `p#cidr` belongs to `p`; any other pool to itself. */
export function rangePoolOfKey(key: string): string {
  return rangePoolOf(key);
}

/** The block CIDR of a block key, as written in it; undefined when `key` is not a block key. */
export function blockCidrOfKey(key: string): string | undefined {
  return partOf(key);
}

/** What every block key of `rangePool` starts with, for prefix listings (`Store.pools`). */
export function blockKeyPrefix(rangePool: string): string {
  return partsPrefix(rangePool);
}

/** The range pool whose blocks a listing prefix asks for (exactly `blockKeyPrefix(r)`), else undefined. */
export function rangePoolListed(prefix: string | undefined): string | undefined {
  const key = prefix === undefined ? undefined : parseStoreKey(prefix);
  return key?.kind === 'block' && key.cidr === '' ? key.rangePool : undefined;
}

/** Whether ledger `key` is the pool `rangePool` itself or one of its blocks. */
export function inRangePool(key: string, rangePool: string): boolean {
  return key === rangePool || key.startsWith(blockKeyPrefix(rangePool));
}

export interface Block {
  /** Store key of the block: `<range pool>#<CIDR>`. */
  readonly key: string;
  readonly cidr: string;
  /** The range restricted to this block, with `pool` set to the block key. */
  readonly span: RangeSpec;
}

function hostBits(range: RangeSpec): bigint {
  return BigInt(bitsOf(range.family) - range.blockPrefix);
}

/** The block holding `address`, which must lie in the range's subnet. */
export function blockAt(range: RangeSpec, address: bigint): Block {
  const bits = hostBits(range);
  const base = (address >> bits) << bits;
  const end = base + (1n << bits) - 1n;
  const cidr = formatCidr(range.family, base, range.blockPrefix);
  const key = blockKey(range.pool, cidr);
  const span: RangeSpec = {
    ...range,
    first: range.first > base ? range.first : base,
    last: range.last < end ? range.last : end,
    pool: key,
  };
  return { key, cidr, span };
}

/** The block a store key names, when it is a block of `range` (undefined otherwise). */
export function blockOfKey(range: RangeSpec, key: string): Block | undefined {
  if (rangePoolOf(key) !== range.pool) return undefined;
  const cidr = parseCidr(partOf(key) ?? '');
  if (cidr === undefined || cidr.length !== range.blockPrefix || cidr.address.family !== range.family) return undefined;
  const block = blockAt(range, cidr.address.value);
  return block.key === key && block.span.first <= block.span.last ? block : undefined;
}

/** Addresses a block can hand out. */
export function blockCapacity(block: Block): bigint {
  return block.span.first > block.span.last ? 0n : capacityOf(block.span);
}

/**
 * The lowest block of the range that nobody has claimed and that has at least one allocatable
 * address, or undefined when every such block is claimed. Costs O(claimed blocks + exclusions),
 * not O(blocks): it searches for the first address in neither a claimed block nor an exclusion.
 */
export function firstUnclaimedBlock(range: RangeSpec, claimed: Iterable<Block>): Block | undefined {
  const taken = new RunSet();
  for (const b of claimed) {
    const bits = hostBits(range);
    const base = (b.span.first >> bits) << bits;
    taken.addRange(base, base + (1n << bits) - 1n);
  }
  const address = firstFree(taken, exclusionSet(range), range.first, range.last);
  return address === undefined ? undefined : blockAt(range, address);
}
