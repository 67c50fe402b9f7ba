/**
 * Block placement: where a node allocates when the blocks it already uses are full. Pure policy
 * over the store's block summaries of one range; the allocator applies the decision (allocator.ts
 * and block-assigner.ts) and tests exercise it without a store (test/allocator/placement.test.ts).
 *
 * The order, each step only when the one before has nothing:
 * 1. own blocks: a block claimed by this node that the caller did not know of is tried first
 *    (another process of this node, or an earlier round, claimed it);
 * 2. claim: the lowest free block of the size the caller wants (`wantedPrefix`: a node that keeps
 *    filling its blocks asks for larger ones, block-assigner.ts `wantedBlockPrefix`), else the
 *    largest free smaller one, down to the range's smallest (ipam/blocks.ts firstFreeBlock: aligned,
 *    overlapping no claimed block), at the revision the summary shows, so two nodes racing for it
 *    cannot both win (the cluster tier refuses the later of two overlapping claims);
 * 3. borrow: an address in another node's block, the block with the most room first, so borrowing
 *    spreads over nodes instead of filling one;
 * 4. full: no block of the range has a free address.
 *
 * The summaries may be a partial picture (allocator/range-placer.ts probing a large range: the
 * blocks this node knows, not every claim): then only `own` and `claim` are acted on, the search
 * starts where `start` says (`probeStart`: a block this node's name picks), and a claim of a block
 * someone else holds is refused by the cluster tier, as any lost race is.
 */
import { bitsOf } from '../ipam/address.ts';
import { type Block, blockCapacity, blockOfKey, blockPrefixes, firstFreeBlock } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { LedgerSummary, Revision } from '../store/store.ts';

export type Placement =
  | { readonly kind: 'own' }
  | { readonly kind: 'claim'; readonly block: Block; readonly revision: Revision }
  | { readonly kind: 'borrow'; readonly from: readonly Block[] }
  | { readonly kind: 'full' };

export interface PlacementInput {
  readonly range: RangeSpec;
  /** This node. */
  readonly node: string;
  /** The store's summaries of the range's blocks (others are ignored). */
  readonly summaries: readonly LedgerSummary[];
  /** Keys of this node's blocks as the caller knew them; all of them were full. */
  readonly known: readonly string[];
  /** The size of block to claim (a prefix length of the range's blocks); the range's smallest when absent. */
  readonly wantedPrefix?: number;
  /**
   * Whether this node lost a race for a block of the range since its last claim: then the free
   * block is searched from a place of the range this node's name picks (`spreadStart`), not from
   * the range's start, so nodes starting together stop racing each other for the same lowest block.
   */
  readonly spread?: boolean;
  /** Where the free block is searched from, before wrapping to the range's start (overrides `spread`). */
  readonly start?: bigint;
}

export interface PlacementDecision {
  /** This node's blocks of the range as the summaries show them: the caller's new list. */
  readonly mine: readonly string[];
  readonly placement: Placement;
}

/** Keys of the blocks of `range` that `node` has claimed, in the summaries' order. */
export function ownBlocks(range: RangeSpec, node: string, summaries: readonly LedgerSummary[]): string[] {
  return summaries.filter((p) => p.affinity === node && blockOfKey(range, p.ledger) !== undefined).map((p) => p.ledger);
}

export function placeInBlocks(input: PlacementInput): PlacementDecision {
  const { range, node, summaries, known } = input;
  const claimed: Block[] = [];
  const others: Array<{ readonly block: Block; readonly room: bigint }> = [];
  const mine: string[] = [];
  for (const summary of summaries) {
    const block = blockOfKey(range, summary.ledger);
    if (block === undefined || summary.affinity === undefined) continue;
    claimed.push(block);
    if (summary.affinity === node) mine.push(block.key);
    else others.push({ block, room: blockCapacity(block) - BigInt(summary.allocated + summary.resting) });
  }
  if (mine.some((key) => !known.includes(key))) return { mine, placement: { kind: 'own' } };
  const start = input.start ?? (input.spread === true ? spreadStart(range, node) : undefined);
  const free = freeBlock(range, claimed, input.wantedPrefix ?? range.blockPrefix, start);
  if (free !== undefined) {
    const revision = summaries.find((p) => p.ledger === free.key)?.revision ?? 0;
    return { mine, placement: { kind: 'claim', block: free, revision } };
  }
  // Stable: blocks with equal room keep the summaries' (key) order.
  const from = others
    .filter((o) => o.room > 0n)
    .sort((a, b) => (a.room > b.room ? -1 : a.room < b.room ? 1 : 0))
    .map((o) => o.block);
  return { mine, placement: from.length === 0 ? { kind: 'full' } : { kind: 'borrow', from } };
}

/** The lowest free block of `wantedPrefix` bits, else of the largest smaller size that has one (from `start`). */
function freeBlock(
  range: RangeSpec,
  claimed: readonly Block[],
  wantedPrefix: number,
  start?: bigint,
): Block | undefined {
  for (const prefix of blockPrefixes(range).reverse()) {
    if (prefix < wantedPrefix) continue;
    const free = firstFreeBlock(range, claimed, prefix, start);
    if (free !== undefined) return free;
  }
  return undefined;
}

/**
 * Where `node` starts looking for a free block after losing a race: the start of one of the range's
 * largest blocks, picked by a hash of the node's name (FNV-1a), so nodes spread over the range and
 * a node keeps growing its blocks in one region. Pure.
 */
export function spreadStart(range: RangeSpec, node: string): bigint {
  return probeStart(range, node, Math.min(...blockPrefixes(range)));
}

/**
 * Where `node` probes for a free block of `prefix` bits in a range it has not read
 * (allocator/range-placer.ts): the start of one of the range's aligned blocks of that size, picked
 * by a hash of the node's name, so nodes claiming at once spread over the whole range and a probe
 * rarely meets another node's block (FNV-1a of the name). Pure.
 */
export function probeStart(range: RangeSpec, node: string, prefix: number): bigint {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(node)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  const size = 1n << BigInt(bitsOf(range.family) - prefix);
  const base = (range.first / size) * size;
  const regions = (range.last - base) / size + 1n;
  return base + (BigInt(hash) % regions) * size;
}

/**
 * The size of block a node asks for when its own blocks of `range` are full: one that holds at
 * least the ADDs under way (`demand`) and at least twice what the node's blocks hold (`held`), the
 * smallest such, or the range's largest. A range whose blocks do not grow has one size.
 */
export function wantedBlockPrefix(range: RangeSpec, demand: number, held: bigint): number {
  const want = BigInt(Math.max(1, demand)) > 2n * held ? BigInt(Math.max(1, demand)) : 2n * held;
  const bits = BigInt(range.family === 4 ? 32 : 128);
  const prefixes = blockPrefixes(range);
  return prefixes.find((p) => 1n << (bits - BigInt(p)) >= want) ?? (prefixes[prefixes.length - 1] as number);
}
