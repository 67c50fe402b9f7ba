/**
 * The lending policy (src/allocator/lending/grant-policy.ts), held to its guarantees over random
 * blocks: what it lends must be free in the lender's block, and never more than asked or than the
 * half the lender can spare.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type LendableBlock, chooseGrants } from '../../../src/allocator/lending/grant-policy.ts';

interface Drawn {
  readonly first: bigint;
  readonly last: bigint;
  readonly excluded: Array<readonly [bigint, bigint]>;
  readonly taken: bigint[];
  readonly cursor: bigint | undefined;
}

/** A block of up to 64 addresses somewhere, with taken addresses, exclusions and a cursor in and around it. */
const blockArb: fc.Arbitrary<Drawn> = fc
  .record({ base: fc.bigInt({ min: 0n, max: 1n << 40n }), size: fc.integer({ min: 0, max: 64 }) })
  .chain(({ base, size }) => {
    const last = base + BigInt(size) - 1n;
    const around = fc.bigInt({ min: base - 2n, max: last + 2n });
    return fc.record({
      first: fc.constant(base),
      last: fc.constant(last),
      excluded: fc.array(
        fc.tuple(around, fc.integer({ min: 0, max: 5 })).map(([a, n]) => [a, a + BigInt(n)] as const),
        { maxLength: 4 },
      ),
      taken: fc.array(around, { maxLength: 40 }),
      cursor: fc.option(around, { nil: undefined }),
    });
  });

function lendable(drawn: readonly Drawn[]): LendableBlock[] {
  return drawn.map((d, i) => ({
    key: `r#b${i}`,
    span: { first: d.first, last: d.last, excluded: d.excluded },
    taken: d.taken,
    cursor: d.cursor,
  }));
}

function isFree(d: Drawn, address: bigint): boolean {
  return (
    address >= d.first &&
    address <= d.last &&
    !d.taken.includes(address) &&
    !d.excluded.some(([a, b]) => address >= a && address <= b)
  );
}

function freeCount(d: Drawn): number {
  let n = 0;
  for (let x = d.first; x <= d.last; x++) if (isFree(d, x)) n++;
  return n;
}

describe('lending policy', () => {
  it('never lends an address allocated, resting, excluded or outside the block, nor one twice', () => {
    fc.assert(
      fc.property(
        fc.array(blockArb, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 0, max: 80 }),
        (drawn, wanted) => {
          const grants = chooseGrants(lendable(drawn), wanted, 1000);
          const seen = new Set<string>();
          for (const g of grants) {
            const i = Number(g.block.slice('r#b'.length));
            assert.ok(isFree(drawn[i] as Drawn, g.address), `${g.address} is not free in ${g.block}`);
            const id = `${g.block} ${g.address}`;
            assert.ok(!seen.has(id), `${id} lent twice`);
            seen.add(id);
          }
        },
      ),
    );
  });

  it('never lends more than wanted, than the per-answer bound, or than half the free addresses rounded up', () => {
    fc.assert(
      fc.property(
        fc.array(blockArb, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: -2, max: 80 }),
        fc.integer({ min: 1, max: 20 }),
        (drawn, wanted, max) => {
          const grants = chooseGrants(lendable(drawn), wanted, max);
          const free = drawn.reduce((n, d) => n + freeCount(d), 0);
          assert.ok(grants.length <= Math.max(0, wanted));
          assert.ok(grants.length <= max);
          assert.ok(grants.length <= Math.ceil(free / 2));
          // and it does lend when it can: exactly that much
          assert.equal(grants.length, Math.max(0, Math.min(wanted, max, Math.ceil(free / 2))));
        },
      ),
    );
  });

  it('lends the last free address of a lender: a /28 shared by every node is served whole', () => {
    const grants = chooseGrants([{ key: 'b', span: { first: 1n, last: 14n, excluded: [] }, taken: range(1n, 13n) }], 1);
    assert.deepEqual(grants, [{ block: 'b', address: 14n }]);
  });

  it('lends the addresses its own picks reach last: just below the cursor, else the highest', () => {
    const span = { first: 10n, last: 19n, excluded: [] };
    assert.deepEqual(
      chooseGrants([{ key: 'b', span, taken: [] }], 3).map((g) => g.address),
      [19n, 18n, 17n],
    );
    assert.deepEqual(
      chooseGrants([{ key: 'b', span, taken: [12n, 11n], cursor: 12n }], 3).map((g) => g.address),
      [10n, 19n, 18n],
    );
  });

  it('lends from the block with the most room first', () => {
    const grants = chooseGrants(
      [
        { key: 'small', span: { first: 0n, last: 3n, excluded: [] }, taken: [] },
        { key: 'big', span: { first: 10n, last: 19n, excluded: [] }, taken: [] },
      ],
      2,
    );
    assert.deepEqual(grants, [
      { block: 'big', address: 19n },
      { block: 'big', address: 18n },
    ]);
  });
});

function range(from: bigint, to: bigint): bigint[] {
  const out: bigint[] = [];
  for (let x = from; x <= to; x++) out.push(x);
  return out;
}
