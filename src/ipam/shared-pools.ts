/**
 * Which allocations belong to a range when ranges of one network_name overlap (a /24 and a /26
 * inside it, on two configs): such a range is served from the pools that cover it
 * (allocator/admission.ts), so an owner's address for it may live in another range's pool. Pure.
 *
 * Guarantees: a range's own pool always counts; another pool counts only when it overlaps the
 * range in its network_name (never a pool kept apart, nor another network's), and an address in it
 * only when it lies in the range's allocatable span.
 */
import { parseIP } from './address.ts';
import type { Allocation } from './allocation.ts';
import { rangePoolOfKey } from './blocks.ts';
import { parsePoolKey, poolsOverlap } from './pool-key.ts';
import type { RangeSpec } from './range.ts';

/**
 * Whether `allocation` lies in a pool `range` shares addresses with: its own, or one overlapping it
 * in its network_name (a segment it may be served from).
 */
export function sharesPool(range: RangeSpec, allocation: Pick<Allocation, 'pool'>): boolean {
  const pool = rangePoolOfKey(allocation.pool);
  if (pool === range.pool) return true;
  const theirs = parsePoolKey(pool);
  const mine = parsePoolKey(range.pool);
  return theirs !== undefined && mine !== undefined && poolsOverlap(theirs, mine);
}

/** Whether `allocation` is an address `range` handed out: in a pool it shares, within its span. */
export function heldInRange(range: RangeSpec, allocation: Pick<Allocation, 'pool' | 'address'>): boolean {
  if (rangePoolOfKey(allocation.pool) === range.pool) return true;
  if (!sharesPool(range, allocation)) return false;
  const ip = parseIP(allocation.address);
  return ip !== undefined && ip.family === range.family && ip.value >= range.first && ip.value <= range.last;
}
