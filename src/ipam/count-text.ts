/**
 * Address counts as people read them. An IPv6 /64 holds 18,446,744,073,709,551,616 addresses: a
 * column of such numbers tells an operator nothing at a glance, so a count past 2^24 is written as
 * a power of two (`2^64`), one near it (`2^64 − 3`, `2^63 + 12`), or, when it is near none, to two
 * decimals of its exponent (`≈2^63.58`). Smaller counts are written in full with thousands
 * separators (`65,536`): a /16 is still a number people plan with. Pure: no I/O.
 *
 * Guarantees: the text is exact whenever it has no `≈` (the power and the difference are whole
 * numbers computed in bigint); a string that is not a whole decimal number is given back as it is,
 * so nothing unreadable is ever made to look like a count.
 */

/** From this count on, powers of two: 2^24 (a /8 of IPv4). */
const POWERS_FROM = 1n << 24n;
/** The largest difference written beside a power: `2^64 − 999999`. */
const NEAR = 1_000_000n;

/** `count`, a whole decimal string, as people read it; anything else as it is. */
export function countText(count: string): string {
  if (!/^\d+$/.test(count)) return count;
  const n = BigInt(count);
  if (n < POWERS_FROM) return grouped(n);
  const bits = n.toString(2).length; // 2^(bits-1) <= n < 2^bits
  const below = 1n << BigInt(bits - 1);
  const above = below << 1n;
  if (n === below) return `2^${bits - 1}`;
  if (above - n < NEAR) return `2^${bits} − ${grouped(above - n)}`;
  if (n - below < NEAR) return `2^${bits - 1} + ${grouped(n - below)}`;
  return `≈2^${log2(n).toFixed(2)}`;
}

/** `1234567` → `1,234,567`. */
function grouped(n: bigint): string {
  return n.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** log2 of a large bigint, to well within two decimals: its top 53 bits and the shift past them. */
function log2(n: bigint): number {
  const bits = n.toString(2).length;
  const shift = Math.max(0, bits - 53);
  return Math.log2(Number(n >> BigInt(shift))) + shift;
}
