/**
 * Address counts as people read them (src/ipam/count-text.ts): exact below 2^24 with separators,
 * powers of two past it, exact differences near a power, an approximate exponent otherwise, and
 * anything that is not a whole number given back untouched. Fuzzed: every text without `≈` reads
 * back to the count it was made from.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { countText } from '../../src/ipam/count-text.ts';

/** Reads an exact text back: `2^64 − 3` → 2^64 − 3; undefined for an approximate one. */
function readBack(text: string): bigint | undefined {
  if (text.startsWith('≈')) return undefined;
  const m = /^2\^(\d+)(?: ([+−]) ([\d,]+))?$/.exec(text);
  if (m === null) return BigInt(text.replaceAll(',', ''));
  const power = 1n << BigInt(m[1] as string);
  if (m[2] === undefined) return power;
  const d = BigInt((m[3] as string).replaceAll(',', ''));
  return m[2] === '+' ? power + d : power - d;
}

describe('countText', () => {
  test('writes the counts operators plan with', () => {
    assert.equal(countText('0'), '0');
    assert.equal(countText('254'), '254');
    assert.equal(countText('65534'), '65,534');
    assert.equal(countText('16777215'), '16,777,215');
    assert.equal(countText(String(1n << 24n)), '2^24');
    assert.equal(countText(String(1n << 64n)), '2^64', 'an IPv6 /64');
    assert.equal(countText(String((1n << 64n) - 3n)), '2^64 − 3', 'a /64 less its excludes');
    assert.equal(countText(String((1n << 80n) + 1_000n)), '2^80 + 1,000');
    assert.equal(countText(String(3n << 62n)), '≈2^63.58');
  });

  test('gives back what is not a whole decimal number as it is', () => {
    for (const odd of ['', '-1', '1e9', '12.5', ' 7', 'many']) assert.equal(countText(odd), odd);
  });

  test('every exact text reads back to its count, and an approximate one is within a hundredth of its exponent', () => {
    const counts = fc.oneof(
      fc.bigInt({ min: 0n, max: 1n << 30n }),
      fc.bigInt({ min: 0n, max: 1n << 128n }),
      fc.tuple(fc.integer({ min: 24, max: 128 }), fc.bigInt({ min: -2_000_000n, max: 2_000_000n })).map(([k, d]) => {
        const n = (1n << BigInt(k)) + d;
        return n < 0n ? 0n : n;
      }),
    );
    fc.assert(
      fc.property(counts, (n) => {
        const text = countText(String(n));
        const back = readBack(text);
        if (back !== undefined) return back === n;
        const exponent = Number(text.slice(3));
        return n > 0n && Math.abs(exponent - Math.log2(Number(n))) <= 0.005 + 1e-9;
      }),
    );
  });
});
