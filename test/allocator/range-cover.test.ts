/**
 * The cover rule of overlapping ranges (allocator/range-cover.ts), on random ranges of one address
 * space admitted in random order: admitted pools never overlap one another, none is ever retired,
 * and every range is covered exactly (its pools overlap it and together contain it).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { carve, coverAfterAdmissions, planCover } from '../../src/allocator/range-cover.ts';
import { type PoolKey, parsePoolKey, poolKeyOf, subnetWithin, subnetsOverlap } from '../../src/ipam/pool-key.ts';

const BASE = 0x0ae80000n; // 10.232.0.0

/** A random subnet of 10.232.0.0/16, /16 to /30. */
const subnet = fc
  .tuple(fc.integer({ min: 16, max: 30 }), fc.integer({ min: 0, max: 0xffff }))
  .map(([prefixLength, offset]) => {
    const size = 1n << BigInt(32 - prefixLength);
    return { family: 4 as const, network: BASE + (BigInt(offset) / size) * size, prefixLength };
  });

const keyOf = (s: { family: 4; network: bigint; prefixLength: number }) => poolKeyOf(s, 'blue');
const parsed = (key: string): PoolKey => {
  const k = parsePoolKey(key);
  assert.ok(k, key);
  return k;
};
const size = (k: PoolKey) => 1n << BigInt(32 - k.prefixLength);

describe('range-cover: overlapping ranges of one network_name', () => {
  it('keeps admitted pools apart, retires none, and covers every range exactly, whatever the order', () => {
    fc.assert(
      fc.property(fc.array(subnet, { minLength: 1, maxLength: 12 }), (steps) => {
        let admitted: readonly string[] = [];
        for (const s of steps) {
          const key = keyOf(s);
          const me = parsed(key);
          const outcome = coverAfterAdmissions(key, me, admitted);
          for (const before of admitted) assert.ok(outcome.admitted.includes(before), `${before} stays admitted`);
          admitted = outcome.admitted;
          const pools = outcome.pools.map(parsed);
          // Apart: no two admitted pools overlap.
          admitted.forEach((a, i) =>
            admitted.slice(i + 1).forEach((b) => assert.ok(!subnetsOverlap(parsed(a), parsed(b)), `${a} and ${b}`)),
          );
          // Exact: each pool is admitted and overlaps the range; inside it, they add up to it.
          let covered = 0n;
          for (const [i, p] of pools.entries()) {
            assert.ok(admitted.includes(outcome.pools[i] as string));
            assert.ok(subnetsOverlap(p, me));
            covered += subnetWithin(p, me) ? size(p) : size(me);
          }
          assert.equal(covered, size(me), `${key} covered by ${outcome.pools.join(', ')}`);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('serves a range inside an admitted pool from it, and carves a range around admitted pools', () => {
    const outer = keyOf({ family: 4, network: BASE, prefixLength: 24 });
    const inner = keyOf({ family: 4, network: BASE + 64n, prefixLength: 26 });
    assert.deepEqual(planCover(inner, parsed(inner), [outer]), { kind: 'covered', pools: [outer] });
    assert.deepEqual(planCover(outer, parsed(outer), []), { kind: 'admit', pool: outer });
    assert.deepEqual(planCover(outer, parsed(outer), [inner]), {
      kind: 'admit',
      pool: keyOf({ family: 4, network: BASE, prefixLength: 26 }),
    });
    assert.deepEqual(coverAfterAdmissions(outer, parsed(outer), [inner]).pools, [
      keyOf({ family: 4, network: BASE, prefixLength: 26 }),
      inner,
      keyOf({ family: 4, network: BASE + 128n, prefixLength: 25 }),
    ]);
  });

  it('carves a /16 around a /30 into 14 pieces, the largest aligned subnets', () => {
    const outer = { family: 4 as const, network: BASE, prefixLength: 16 };
    const pieces = carve(outer, [{ family: 4, network: BASE + 4n, prefixLength: 30 }]);
    assert.equal(pieces.length, 14);
    assert.equal(
      pieces.reduce((n, p) => n + (1n << BigInt(32 - p.prefixLength)), 0n),
      (1n << 16n) - 4n,
    );
  });
});
