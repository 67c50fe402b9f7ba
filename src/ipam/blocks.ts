/**
 * Blocks: how a range is split when several nodes share it. A block is an aligned CIDR clipped to
 * the range's allocatable span, so a range whose size is not a multiple of the block size simply
 * has smaller blocks at its edges, and `range_start`/`range_end` and `exclude` hold inside every
 * block. Pure: no I/O.
 *
 * Its size: `/range.blockPrefix` (the smallest block, `blockAt`), or, in a range whose blocks grow
 * (`range.largestBlockPrefix`, ipam/range.ts growthBlockPrefix), any aligned CIDR from
 * `/largestBlockPrefix` to `/blockPrefix` (a buddy system: two blocks of one size are either apart
 * or one holds the other). One address is in exactly one claimed block because claims never
 * overlap: placement picks only blocks apart from every claimed one (`firstFreeBlock`), and the
 * cluster tier refuses a claim overlapping one made before it (store/tiered/cluster-tier.ts).
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
  /** The CIDR's prefix length: `range.blockPrefix`, or shorter for a grown block. */
  readonly prefix: number;
  /** The range restricted to this block, with `pool` set to the block key. */
  readonly span: RangeSpec;
}

/** How a range is split in the store: its smallest block and the largest its blocks may grow to. */
export interface RangeSplit {
  readonly blockPrefix: number;
  readonly largestBlockPrefix?: number | undefined;
}

/** `range` split as `split` says (a largest block no larger than the smallest: blocks do not grow). Pure. */
export function splitRange(range: RangeSpec, split: RangeSplit): RangeSpec {
  const { largestBlockPrefix: _was, ...rest } = range;
  const largest = split.largestBlockPrefix;
  return largest === undefined || largest >= split.blockPrefix
    ? { ...rest, blockPrefix: split.blockPrefix }
    : { ...rest, blockPrefix: split.blockPrefix, largestBlockPrefix: largest };
}

/** The prefix lengths a block of `range` may have, the smallest block's first. */
export function blockPrefixes(range: RangeSpec): number[] {
  const largest = Math.min(range.largestBlockPrefix ?? range.blockPrefix, range.blockPrefix);
  const prefixes: number[] = [];
  for (let p = range.blockPrefix; p >= largest; p--) prefixes.push(p);
  return prefixes;
}

/** The aligned block of `prefix` bits of `range` holding `address`, which must lie in the range's subnet. */
export function alignedBlock(range: RangeSpec, address: bigint, prefix: number): Block {
  const bits = BigInt(bitsOf(range.family) - prefix);
  const base = (address >> bits) << bits;
  const end = base + (1n << bits) - 1n;
  const cidr = formatCidr(range.family, base, prefix);
  const key = blockKey(range.pool, cidr);
  const span: RangeSpec = {
    ...range,
    first: range.first > base ? range.first : base,
    last: range.last < end ? range.last : end,
    pool: key,
  };
  return { key, cidr, prefix, span };
}

/** The smallest block (`/range.blockPrefix`) holding `address`, which must lie in the range's subnet. */
export function blockAt(range: RangeSpec, address: bigint): Block {
  return alignedBlock(range, address, range.blockPrefix);
}

/**
 * Every block `address` may be claimed in, the smallest first: one per block size of the range
 * (one, where blocks do not grow). Whoever holds one of them holds the address.
 */
export function blocksHolding(range: RangeSpec, address: bigint): Block[] {
  return blockPrefixes(range).map((prefix) => alignedBlock(range, address, prefix));
}

/** The block a store key names, when it is a block of `range` (undefined otherwise). */
export function blockOfKey(range: RangeSpec, key: string): Block | undefined {
  if (rangePoolOf(key) !== range.pool) return undefined;
  const cidr = parseCidr(partOf(key) ?? '');
  if (cidr === undefined || cidr.address.family !== range.family) return undefined;
  if (!blockPrefixes(range).includes(cidr.length)) return undefined;
  const block = alignedBlock(range, cidr.address.value, cidr.length);
  return block.key === key && block.span.first <= block.span.last ? block : undefined;
}

/** The addresses a block covers, aligned: its CIDR's whole extent, inside the range or not. */
function extentOf(block: Block): readonly [bigint, bigint] {
  const bits = BigInt(bitsOf(block.span.family) - block.prefix);
  const base = (block.span.first >> bits) << bits;
  return [base, base + (1n << bits) - 1n];
}

/** Whether two blocks share an address (aligned blocks: one holds the other, or they are apart). */
export function blocksOverlap(a: Block, b: Block): boolean {
  const [a0, a1] = extentOf(a);
  const [b0, b1] = extentOf(b);
  return a0 <= b1 && b0 <= a1;
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
  return firstFreeBlock(range, claimed, range.blockPrefix);
}

/**
 * The lowest aligned block of `prefix` bits that overlaps no claimed block and has at least one
 * allocatable address, or undefined when there is none of that size. With `start`, the lowest at or
 * after it, else (wrapping) the lowest from the range's start. Costs O((claimed blocks +
 * exclusions) · log): each candidate passed over holds a claimed block or starts past an exclusion.
 */
export function firstFreeBlock(
  range: RangeSpec,
  claimed: Iterable<Block>,
  prefix: number,
  start?: bigint,
): Block | undefined {
  const blocks = [...claimed];
  if (start !== undefined && start > range.first && start <= range.last) {
    const after = firstFreeBlockFrom(range, blocks, prefix, start);
    if (after !== undefined) return after;
  }
  return firstFreeBlockFrom(range, blocks, prefix, range.first);
}

function firstFreeBlockFrom(
  range: RangeSpec,
  claimed: readonly Block[],
  prefix: number,
  start: bigint,
): Block | undefined {
  const taken = new RunSet();
  for (const b of claimed) {
    const [from, to] = extentOf(b);
    taken.addRange(from, to);
  }
  const runs = taken.runs();
  const excluded = exclusionSet(range);
  const size = 1n << BigInt(bitsOf(range.family) - prefix);
  let from = start;
  for (;;) {
    const address = firstFree(taken, excluded, from, range.last);
    if (address === undefined) return undefined;
    const base = (address / size) * size;
    const end = base + size - 1n;
    const inside = firstRunEndingAtOrAfter(runs, base);
    if (inside === undefined || inside[0] > end) return alignedBlock(range, base, prefix);
    from = end + 1n; // a claimed block lies inside this candidate: the next one
  }
}

/** The first of the sorted, disjoint `runs` that ends at or after `x` (binary search). */
function firstRunEndingAtOrAfter(runs: ReadonlyArray<[bigint, bigint]>, x: bigint): [bigint, bigint] | undefined {
  let lo = 0;
  let hi = runs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((runs[mid] as [bigint, bigint])[1] < x) lo = mid + 1;
    else hi = mid;
  }
  return runs[lo];
}

/** The aligned extent of block key `key` (its CIDR's first and last address), or undefined for no block key. */
function extentOfKey(key: string): { family: 4 | 6; prefix: number; from: bigint; to: bigint } | undefined {
  const cidr = parseCidr(partOf(key) ?? '');
  if (cidr === undefined) return undefined;
  const bits = BigInt(bitsOf(cidr.address.family) - cidr.length);
  const from = (cidr.address.value >> bits) << bits;
  return { family: cidr.address.family, prefix: cidr.length, from, to: from + (1n << bits) - 1n };
}

/** Whether block keys `a` and `b` of one range pool share an address (one holds the other, or they are one). */
export function blockKeysOverlap(a: string, b: string): boolean {
  const x = extentOfKey(a);
  const y = extentOfKey(b);
  if (x === undefined || y === undefined || rangePoolOf(a) !== rangePoolOf(b) || x.family !== y.family) return false;
  return x.from <= y.to && y.from <= x.to;
}

/**
 * The key of the largest block (`/largestPrefix`) holding block `key`: every block sharing an
 * address with `key` lies inside it, in a range whose blocks are no larger (a buddy system).
 */
export function enclosingBlockKey(key: string, largestPrefix: number): string {
  const x = extentOfKey(key);
  if (x === undefined || x.prefix < largestPrefix) return key;
  const host = BigInt(bitsOf(x.family) - largestPrefix);
  return blockKey(rangePoolOf(key), formatCidr(x.family, (x.from >> host) << host, largestPrefix));
}

/**
 * The keys of the blocks of sizes `/largestPrefix`../`smallestPrefix` other than `key` that share an
 * address with block `key`: the blocks holding it and the blocks it holds. At most
 * 2^(smallestPrefix - prefix + 1) of them: bounded by the range's block sizes, not by its blocks.
 */
export function overlappingBlockKeys(key: string, largestPrefix: number, smallestPrefix: number): string[] {
  const x = extentOfKey(key);
  if (x === undefined) return [];
  const pool = rangePoolOf(key);
  const keys: string[] = [];
  const bits = bitsOf(x.family);
  for (let p = largestPrefix; p < x.prefix; p++) {
    const host = BigInt(bits - p);
    keys.push(blockKey(pool, formatCidr(x.family, (x.from >> host) << host, p)));
  }
  for (let p = x.prefix + 1; p <= smallestPrefix; p++) {
    const size = 1n << BigInt(bits - p);
    for (let base = x.from; base <= x.to; base += size) keys.push(blockKey(pool, formatCidr(x.family, base, p)));
  }
  return keys;
}
