/**
 * The allocation engine: the in-memory picture of one pool and the pure decision of which address
 * to hand out next. No I/O. Occupied addresses (allocated, or resting after release) are a RunSet,
 * so picking costs O(log runs × exclusions) however large the range is and however full.
 *
 * Pick order is next-after-last, like host-local: the search starts just after the address handed
 * out last and wraps around once, so a just-released address is the last to be reused.
 */
import { exclusionSet } from './exclusions.ts';
import type { RangeSpec } from './range.ts';
import type { Reservation } from './reserved.ts';
import { RunSet } from './run-set.ts';

export { exclusionSet };

export type Pick = { readonly kind: 'picked'; readonly address: bigint } | { readonly kind: 'exhausted' };

export type RequestCheck =
  | { readonly kind: 'free' }
  | { readonly kind: 'occupied' }
  | { readonly kind: 'resting' }
  | { readonly kind: 'outside' }
  | { readonly kind: 'excluded' }
  /** Held back by a cluster-wide reservation (ipam/reserved.ts). */
  | { readonly kind: 'reserved'; readonly reservation: Reservation };

interface Resting {
  readonly address: bigint;
  /** When the rest ends, on the caller's one clock (the allocator's: the monotonic clock, never the wall clock). */
  readonly reusableAt: number;
}

export class LedgerState {
  /** Allocated addresses and resting (cooling-down) ones: neither may be picked. */
  readonly occupied = new RunSet();
  /** Addresses released under a cooldown, ordered by when they become reusable. */
  #resting: Resting[] = [];
  #restingSet = new Set<bigint>();
  /** The address handed out last; the next search starts after it. */
  cursor: bigint | undefined;

  get allocatedCount(): bigint {
    return this.occupied.size - BigInt(this.#resting.length);
  }

  get restingCount(): number {
    return this.#resting.length;
  }

  isResting(address: bigint): boolean {
    return this.#restingSet.has(address);
  }

  markAllocated(address: bigint): void {
    if (this.#restingSet.has(address)) this.#unrest(address);
    this.occupied.add(address);
  }

  /** Frees an address now, or after a rest when reusableAt is in the future. */
  markReleased(address: bigint, reusableAt?: number, now = 0): void {
    if (reusableAt !== undefined && reusableAt > now) {
      if (!this.#restingSet.has(address)) {
        this.#restingSet.add(address);
        const index = this.#insertionIndex(reusableAt);
        this.#resting.splice(index, 0, { address, reusableAt });
      }
      this.occupied.add(address);
      return;
    }
    if (this.#restingSet.has(address)) this.#unrest(address);
    this.occupied.delete(address);
  }

  /** Ends every rest due by `now`; returns the addresses that became free. */
  expireRests(now: number): bigint[] {
    const freed: bigint[] = [];
    while (this.#resting.length > 0 && (this.#resting[0] as Resting).reusableAt <= now) {
      const { address } = this.#resting.shift() as Resting;
      this.#restingSet.delete(address);
      this.occupied.delete(address);
      freed.push(address);
    }
    return freed;
  }

  #unrest(address: bigint): void {
    this.#restingSet.delete(address);
    const i = this.#resting.findIndex((r) => r.address === address);
    if (i >= 0) this.#resting.splice(i, 1);
  }

  #insertionIndex(reusableAt: number): number {
    let lo = 0;
    let hi = this.#resting.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#resting[mid] as Resting).reusableAt <= reusableAt) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Whether a specific address could be handed out in `range` now; `reservedBy` names the
   * reservation holding an address back (ipam/reserved.ts), if any.
   */
  checkRequest(
    range: RangeSpec,
    address: bigint,
    reservedBy?: (address: bigint) => Reservation | undefined,
  ): RequestCheck {
    if (address < range.first || address > range.last) return { kind: 'outside' };
    if (range.excluded.some(([a, b]) => address >= a && address <= b)) return { kind: 'excluded' };
    const reservation = reservedBy?.(address);
    if (reservation !== undefined) return { kind: 'reserved', reservation };
    if (this.#restingSet.has(address)) return { kind: 'resting' };
    if (this.occupied.has(address)) return { kind: 'occupied' };
    return { kind: 'free' };
  }

  /**
   * The next free address of `range` after the cursor, wrapping around once. `blocked`, when
   * given, stands for the range's exclusions (ReservedAddresses.blocking: they and the reservations).
   */
  pick(range: RangeSpec, blocked?: RunSet): Pick {
    const exclusions = blocked ?? exclusionSet(range);
    const after =
      this.cursor === undefined || this.cursor < range.first || this.cursor >= range.last
        ? undefined
        : this.cursor + 1n;
    const found =
      (after === undefined ? undefined : firstFree(this.occupied, exclusions, after, range.last)) ??
      firstFree(this.occupied, exclusions, range.first, after === undefined ? range.last : after - 1n);
    return found === undefined ? { kind: 'exhausted' } : { kind: 'picked', address: found };
  }
}

/**
 * Smallest x in [from, to] in neither set. Each round jumps past a whole run of one set, and runs
 * of one set never touch, so the rounds are bounded by the number of exclusion runs.
 */
export function firstFree(occupied: RunSet, excluded: RunSet, from: bigint, to: bigint): bigint | undefined {
  let x = from;
  while (x <= to) {
    const y = occupied.nextAbsent(x);
    const z = excluded.nextAbsent(y);
    if (z === y) return y <= to ? y : undefined;
    x = z;
  }
  return undefined;
}
