/**
 * A set of bigints kept as sorted, disjoint, non-adjacent runs [start, end]. Membership and "first
 * value at or after x that is not in the set" cost O(log runs), whatever the size of the numbers,
 * which is what lets Warren allocate in a whole IPv6 /64 as cheaply as in a /24: the allocator
 * jumps over occupied runs instead of walking addresses.
 */
export class RunSet {
  /** Run starts, ascending. */
  #starts: bigint[] = [];
  /** Run ends, parallel to #starts; #ends[i] + 1 < #starts[i + 1] always (runs never touch). */
  #ends: bigint[] = [];
  #size = 0n;

  /** Number of values in the set. */
  get size(): bigint {
    return this.#size;
  }

  get runCount(): number {
    return this.#starts.length;
  }

  /** Index of the last run whose start is <= x, or -1. */
  #find(x: bigint): number {
    let lo = 0;
    let hi = this.#starts.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#starts[mid] as bigint) <= x) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return found;
  }

  has(x: bigint): boolean {
    const i = this.#find(x);
    return i >= 0 && (this.#ends[i] as bigint) >= x;
  }

  /** The smallest value >= x that is not in the set. */
  nextAbsent(x: bigint): bigint {
    const i = this.#find(x);
    if (i >= 0 && (this.#ends[i] as bigint) >= x) return (this.#ends[i] as bigint) + 1n;
    return x;
  }

  /** Adds x; returns false when it was already present. */
  add(x: bigint): boolean {
    return this.addRange(x, x) > 0n;
  }

  /** Adds every value in [from, to]; returns how many were new. */
  addRange(from: bigint, to: bigint): bigint {
    if (to < from) return 0n;
    // Runs that overlap or touch [from, to] merge into one.
    let first = this.#find(from - 1n);
    if (first < 0 || (this.#ends[first] as bigint) < from - 1n) first += 1;
    const last = this.#find(to + 1n);
    let start = from;
    let end = to;
    let covered = 0n;
    for (let i = first; i <= last; i++) {
      const s = this.#starts[i] as bigint;
      const e = this.#ends[i] as bigint;
      const lo = s > from ? s : from;
      const hi = e < to ? e : to;
      if (hi >= lo) covered += hi - lo + 1n;
      if (s < start) start = s;
      if (e > end) end = e;
    }
    const removed = last >= first ? last - first + 1 : 0;
    this.#starts.splice(first, removed, start);
    this.#ends.splice(first, removed, end);
    const added = to - from + 1n - covered;
    this.#size += added;
    return added;
  }

  /** Removes x; returns false when it was absent. */
  delete(x: bigint): boolean {
    const i = this.#find(x);
    if (i < 0) return false;
    const s = this.#starts[i] as bigint;
    const e = this.#ends[i] as bigint;
    if (e < x) return false;
    if (s === x && e === x) {
      this.#starts.splice(i, 1);
      this.#ends.splice(i, 1);
    } else if (s === x) {
      this.#starts[i] = x + 1n;
    } else if (e === x) {
      this.#ends[i] = x - 1n;
    } else {
      this.#ends[i] = x - 1n;
      this.#starts.splice(i + 1, 0, x + 1n);
      this.#ends.splice(i + 1, 0, e);
    }
    this.#size -= 1n;
    return true;
  }

  /** The runs, for tests and diagnostics. */
  runs(): Array<[bigint, bigint]> {
    return this.#starts.map((s, i) => [s, this.#ends[i] as bigint]);
  }
}
