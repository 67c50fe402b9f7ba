/**
 * A range addresses are drawn from, as the engine sees it: a subnet, its allocatable span,
 * what is excluded from it, its pool and its block size. Pure values; cni/ipam-range.ts builds
 * them from a network config.
 *
 * Guarantees: capacityOf counts each unusable address once, however exclusions overlap; a range's
 * largest block (largestBlockPrefix) is never more than an eighth of it nor more than the family's
 * default block, so growing blocks never hand one node most of a small range.
 */
import { type Family, type IPAddress, bitsOf } from './address.ts';

/** One range addresses are drawn from: one address per range per attachment. */
export interface RangeSpec {
  readonly family: Family;
  /** The network the range lives in, canonical (`10.0.0.0/24`), whatever host bits were written. */
  readonly subnet: string;
  /** The subnet's network address. */
  readonly network: bigint;
  readonly prefixLength: number;
  /** First and last allocatable address, after range_start/range_end, network and broadcast. */
  readonly first: bigint;
  readonly last: bigint;
  /** Excluded CIDRs as inclusive [from, to] intervals, plus the gateway when it is in the subnet. */
  readonly excluded: ReadonlyArray<readonly [bigint, bigint]>;
  /** Reported with every address of this range; of the range's family, possibly outside its subnet. */
  readonly gateway?: IPAddress | undefined;
  /** Identity of the pool: ranges with one subnet and network_name share addresses. */
  readonly pool: string;
  /**
   * Prefix length of the blocks the range is split into when nodes share it (cluster store);
   * `block_size`, or the family's default, never shorter than the range's own prefix.
   */
  readonly blockPrefix: number;
  /**
   * Prefix length of the largest block a node may claim in this range, when blocks grow with a
   * node's demand (ipam/blocks.ts: aligned blocks of any prefix from this one to `blockPrefix`, never
   * overlapping); absent, every block is `/blockPrefix`. Pinned with the block size at the range's
   * first use in the store, so every node reads the same bounds.
   */
  readonly largestBlockPrefix?: number;
  /**
   * Whether the config set `block_size`: a store that sizes blocks to the range
   * (adaptiveBlockPrefix) keeps a size the config set, and sizes the others itself.
   */
  readonly blockSizeSet?: true;
}

/** Default block prefix lengths in cluster mode: 64 addresses per block in either family. */
export const DEFAULT_BLOCK_PREFIX = { 4: 26, 6: 122 } as const;

/** Blocks a range is split into at least, where blocks adapt to it: room for several nodes each. */
export const MIN_BLOCKS_PER_RANGE = 64;

/**
 * The block prefix for a range whose config sets no `block_size`, on a store that sizes blocks to
 * the range (the two-tier store): the largest block that still gives the allocatable span
 * `first`..`last` at least MIN_BLOCKS_PER_RANGE blocks, never larger than the family's default
 * (DEFAULT_BLOCK_PREFIX: 64 addresses) and never smaller than one address. So a /16 keeps /26
 * blocks, a /24 gets /31 ones (127 blocks of 2), and whereabouts' /28 gets single-address blocks,
 * so every node can hold a share of even the smallest range. Pure.
 */
export function adaptiveBlockPrefix(family: Family, first: bigint, last: bigint): number {
  const span = last >= first ? last - first + 1n : 1n;
  // Host bits h with span / 2^h >= MIN_BLOCKS_PER_RANGE: 2^h <= span / MIN_BLOCKS_PER_RANGE.
  let hostBits = 0;
  while (1n << BigInt(hostBits + 1) <= span / BigInt(MIN_BLOCKS_PER_RANGE)) hostBits += 1;
  return Math.max(DEFAULT_BLOCK_PREFIX[family], bitsOf(family) - hostBits);
}

/** A grown block holds at most this share of its range (1/8): a /24 grows blocks up to /27. */
export const LARGEST_BLOCK_SHARE = 8;

/**
 * The largest block a node may claim in a range whose blocks grow (RangeSpec.largestBlockPrefix),
 * or undefined when they do not: the largest power of two no more than an eighth of the span
 * `first`..`last` (rounded up to a power of two), never larger than the family's default block
 * (DEFAULT_BLOCK_PREFIX) and never smaller than `blockPrefix`. Blocks of one address never grow (a
 * range that small is lent address by address: allocator/lending/). So a /24 (blocks of /31) grows
 * them up to /27, a /20 (/27) up to /26, and a /16 keeps /26. Pure.
 */
export function growthBlockPrefix(
  family: Family,
  first: bigint,
  last: bigint,
  blockPrefix: number,
): number | undefined {
  const bits = bitsOf(family);
  if (blockPrefix >= bits) return undefined;
  const span = last >= first ? last - first + 1n : 1n;
  let spanBits = 0;
  while (1n << BigInt(spanBits) < span) spanBits += 1;
  const shareBits = Math.log2(LARGEST_BLOCK_SHARE);
  const largest = Math.min(blockPrefix, Math.max(DEFAULT_BLOCK_PREFIX[family], bits - (spanBits - shareBits)));
  return largest < blockPrefix ? largest : undefined;
}

/** How many addresses a range can hand out (before what is allocated). */
export function capacityOf(range: RangeSpec): bigint {
  let excluded = 0n;
  // Exclusions may overlap each other or fall outside the allocatable span; count each address once.
  const clipped = range.excluded
    .map(([a, b]) => [a < range.first ? range.first : a, b > range.last ? range.last : b] as const)
    .filter(([a, b]) => a <= b)
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  let covered = range.first - 1n;
  for (const [a, b] of clipped) {
    const from = a > covered ? a : covered + 1n;
    if (b >= from) excluded += b - from + 1n;
    if (b > covered) covered = b;
  }
  return range.last - range.first + 1n - excluded;
}

/** Whether `ip` lies in the range's subnet (not necessarily in its allocatable span). */
export function inSubnet(range: RangeSpec, ip: IPAddress): boolean {
  if (ip.family !== range.family) return false;
  const shift = BigInt(bitsOf(range.family) - range.prefixLength);
  return ip.value >> shift === range.network >> shift;
}
