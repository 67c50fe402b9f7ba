/**
 * Blocks: how a range is split when several nodes share it. A block is the aligned CIDR of
 * `range.blockPrefix` bits that contains an address, clipped to the range's allocatable span, so a
 * range whose size is not a multiple of the block size simply has smaller blocks at its edges, and
 * `range_start`/`range_end` and `exclude` hold inside every block. Each block is a pool of its own
 * in the store, keyed `<range pool>#<block CIDR>`. Pure: no I/O.
 */
import { bitsOf, formatCidr, parseCidr } from './address.ts';
import { type RangeSpec, capacityOf } from './config.ts';
import { exclusionSet, firstFree } from './pool-state.ts';
import { RunSet } from './run-set.ts';

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
  const key = `${range.pool}#${cidr}`;
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
  if (!key.startsWith(`${range.pool}#`)) return undefined;
  const cidr = parseCidr(key.slice(range.pool.length + 1));
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
