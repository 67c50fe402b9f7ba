/**
 * ExponentialBackoff is pure arithmetic: no failure, no wait; then 1 s doubling up to 5 min by
 * default; always a finite number however many failures; nonsense options refused.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ExponentialBackoff } from '../../src/core/backoff.ts';

describe('ExponentialBackoff', () => {
  test('defaults to 1 s doubling, capped at 5 minutes', () => {
    const b = new ExponentialBackoff();
    assert.equal(b.initialMs, 1_000);
    assert.equal(b.maxMs, 300_000);
    assert.equal(b.factor, 2);
    const delays = Array.from({ length: 12 }, (_, i) => b.delay(i));
    assert.deepEqual(
      delays,
      [0, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000],
    );
  });

  test('zero or negative failures mean no wait', () => {
    const b = new ExponentialBackoff();
    assert.equal(b.delay(0), 0);
    assert.equal(b.delay(-1), 0);
    assert.equal(b.delay(-Infinity), 0);
  });

  test('huge failure counts stay at the cap instead of overflowing to Infinity or NaN', () => {
    const b = new ExponentialBackoff();
    for (const n of [1_000, 1_025, 1_100, 10_000, 1e9, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE, Infinity]) {
      assert.equal(b.delay(n), 300_000, `delay(${n})`);
    }
  });

  test('custom options are honoured', () => {
    const b = new ExponentialBackoff({ initialMs: 100, maxMs: 1_000, factor: 3 });
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((n) => b.delay(n)),
      [100, 300, 900, 1_000, 1_000],
    );
    const flat = new ExponentialBackoff({ initialMs: 500, maxMs: 500, factor: 1 });
    assert.deepEqual(
      [1, 2, 50].map((n) => flat.delay(n)),
      [500, 500, 500],
    );
  });

  test('delays never decrease, never exceed the cap and are always finite', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.double({ min: 1, max: 10, noNaN: true }),
        fc.integer({ min: 0, max: 5_000 }),
        (initialMs, extra, factor, n) => {
          const b = new ExponentialBackoff({ initialMs, maxMs: initialMs + extra, factor });
          const d = b.delay(n);
          const next = b.delay(n + 1);
          assert.ok(Number.isFinite(d) && Number.isFinite(next));
          assert.ok(next >= d, `delay(${n + 1}) = ${next} < delay(${n}) = ${d}`);
          assert.ok(d <= b.maxMs);
          if (n >= 1) assert.ok(d >= initialMs);
        },
      ),
    );
  });

  test('invalid options are refused', () => {
    const bad = [
      { initialMs: 0 },
      { initialMs: -1 },
      { initialMs: Number.NaN },
      { initialMs: 2_000, maxMs: 1_000 },
      { maxMs: 999 },
      { maxMs: Number.NaN },
      { factor: 0.5 },
      { factor: 0 },
      { factor: -2 },
      { factor: Number.NaN },
    ];
    for (const options of bad)
      assert.throws(() => new ExponentialBackoff(options), RangeError, JSON.stringify(options));
  });
});
