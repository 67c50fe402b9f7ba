/**
 * How many addresses, and which, a node lends from its blocks when another node of the range asks
 * (borrower.ts asks, lender.ts answers). Pure policy: no I/O, no clock.
 *
 * How many: what is wanted, at most `maxPerAnswer`, and at most half of the lender's free addresses
 * in the range, rounded up. Rounded up, so a lender with one free address still gives it: a range
 * smaller than a block (whereabouts' /28 shared by every node) is one block owned by one node, and
 * every address of it must be able to serve any node; the half keeps a lender from being emptied by
 * one answer while its own pods start.
 *
 * Which: in each block, the free addresses the lender's own picks reach last. Its picks go upward
 * from its cursor (next-after-last, ipam/ledger-state.ts), wrapping at the block's end, so the
 * addresses reached last lie just below the cursor: walk downward from the cursor and wrap at the
 * block's start. With no cursor, that is the highest addresses. Blocks with the most room give first.
 *
 * Guarantees (test/allocator/lending/grant-policy.test.ts, properties): never an address allocated,
 * resting or excluded, or outside the block's span; never more than wanted, nor than `maxPerAnswer`,
 * nor than half the free addresses rounded up; no address twice. Costs O(taken + exclusions) per
 * block, never O(block size): runs of taken addresses are jumped over.
 */
import type { RangeSpec } from '../../ipam/range.ts';
import { RunSet } from '../../ipam/run-set.ts';

/** One of the lender's blocks as it stands now. */
export interface LendableBlock {
  /** The block's store key. */
  readonly key: string;
  /** The block's span: its allocatable first..last and the exclusions the lender knows. */
  readonly span: Pick<RangeSpec, 'first' | 'last' | 'excluded'>;
  /** Addresses allocated or resting in the block (placeholders of earlier loans among them). */
  readonly taken: Iterable<bigint>;
  /** Where the lender's own next pick starts after (ipam/ledger-state.ts); undefined when never set. */
  readonly cursor?: bigint | undefined;
}

export interface GrantChoice {
  readonly block: string;
  readonly address: bigint;
}

/** The most addresses one answer lends, so one request never drains a lender in a single round. */
export const DEFAULT_MAX_PER_ANSWER = 16;

/** The addresses to lend for a request of `wanted` more (see the module header). */
export function chooseGrants(
  blocks: readonly LendableBlock[],
  wanted: number,
  maxPerAnswer = DEFAULT_MAX_PER_ANSWER,
): GrantChoice[] {
  if (!(wanted > 0) || !(maxPerAnswer > 0)) return [];
  const views = blocks.map((block) => ({ block, ...unusable(block) }));
  const free = views.reduce((n, v) => n + v.free, 0n);
  const half = (free + 1n) / 2n;
  let count = BigInt(Math.min(Math.floor(wanted), Math.floor(maxPerAnswer)));
  if (half < count) count = half;
  // Most room first; stable, so blocks with equal room keep the caller's order.
  const order = [...views].sort((a, b) => (a.free > b.free ? -1 : a.free < b.free ? 1 : 0));
  const out: GrantChoice[] = [];
  for (const view of order) {
    if (BigInt(out.length) >= count) break;
    for (const address of reachedLast(view.block, view.taken)) {
      if (BigInt(out.length) >= count) break;
      out.push({ block: view.block.key, address });
    }
  }
  return out;
}

/** The block's taken and excluded addresses within its span, and how many of the span are free. */
function unusable(block: LendableBlock): { taken: RunSet; free: bigint } {
  const { first, last, excluded } = block.span;
  const taken = new RunSet();
  if (first > last) return { taken, free: 0n };
  for (const [a, b] of excluded) taken.addRange(a < first ? first : a, b > last ? last : b);
  for (const address of block.taken) if (address >= first && address <= last) taken.add(address);
  return { taken, free: last - first + 1n - taken.size };
}

/** Free addresses of the block, those the lender's own picks reach last first. */
function* reachedLast(block: LendableBlock, taken: RunSet): Generator<bigint> {
  const { first, last } = block.span;
  if (first > last) return;
  const cursor = block.cursor;
  const start = cursor === undefined || cursor < first || cursor > last ? last : cursor;
  yield* downward(taken, start, first);
  if (start < last) yield* downward(taken, last, start + 1n);
}

/** Values from `from` down to `to` (inclusive) that are not in `taken`, jumping over its runs. */
function* downward(taken: RunSet, from: bigint, to: bigint): Generator<bigint> {
  const runs = taken.runs();
  // Index of the last run starting at or below `from`.
  let i = runs.length - 1;
  while (i >= 0 && (runs[i] as [bigint, bigint])[0] > from) i--;
  let x = from;
  while (x >= to) {
    const run = i >= 0 ? (runs[i] as [bigint, bigint]) : undefined;
    if (run !== undefined && run[1] >= x) {
      x = run[0] - 1n;
      i--;
      continue;
    }
    yield x;
    x--;
  }
}
