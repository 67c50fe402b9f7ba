/**
 * RunSet against a model: a plain Set<bigint> over a small universe receives the same random
 * operations, and after each one the two must agree on every answer while the runs stay sorted,
 * disjoint and non-adjacent.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RunSet } from '../../src/ipam/run-set.ts';

const UNIVERSE = 40n;

type Op =
  | { readonly kind: 'add'; readonly x: bigint }
  | { readonly kind: 'addRange'; readonly from: bigint; readonly to: bigint }
  | { readonly kind: 'delete'; readonly x: bigint };

const value = fc.bigInt({ min: 0n, max: UNIVERSE - 1n });
const op: fc.Arbitrary<Op> = fc.oneof(
  value.map((x) => ({ kind: 'add' as const, x })),
  // Reversed bounds on purpose sometimes: an empty range must change nothing.
  fc
    .tuple(value, fc.bigInt({ min: -2n, max: 12n }))
    .map(([from, span]) => ({ kind: 'addRange' as const, from, to: from + span })),
  value.map((x) => ({ kind: 'delete' as const, x })),
  value.map((x) => ({ kind: 'delete' as const, x })),
);

function apply(set: RunSet, model: Set<bigint>, o: Op): void {
  switch (o.kind) {
    case 'add': {
      const expected = !model.has(o.x);
      model.add(o.x);
      assert.equal(set.add(o.x), expected, `add(${o.x})`);
      return;
    }
    case 'addRange': {
      let added = 0n;
      for (let x = o.from; x <= o.to; x++) {
        if (!model.has(x)) added++;
        model.add(x);
      }
      assert.equal(set.addRange(o.from, o.to), added, `addRange(${o.from}, ${o.to})`);
      return;
    }
    case 'delete': {
      const expected = model.has(o.x);
      model.delete(o.x);
      assert.equal(set.delete(o.x), expected, `delete(${o.x})`);
      return;
    }
    default: {
      const never: never = o;
      throw new Error(`unexpected op ${String(never)}`);
    }
  }
}

function checkAgainstModel(set: RunSet, model: Set<bigint>): void {
  const runs = set.runs();
  assert.equal(set.runCount, runs.length);
  for (let i = 0; i < runs.length; i++) {
    const [s, e] = runs[i] as [bigint, bigint];
    assert.ok(s <= e, `run ${i} is [${s}, ${e}]`);
    const next = runs[i + 1];
    if (next !== undefined) assert.ok(e + 1n < next[0], `runs ${i} and ${i + 1} touch or overlap`);
  }
  const fromRuns = new Set<bigint>();
  for (const [s, e] of runs) for (let x = s; x <= e; x++) fromRuns.add(x);
  assert.deepEqual(
    [...fromRuns].sort((a, b) => (a < b ? -1 : 1)),
    [...model].sort((a, b) => (a < b ? -1 : 1)),
  );
  assert.equal(set.size, BigInt(model.size));
  const top = UNIVERSE + 15n;
  for (let x = -3n; x <= top; x++) {
    assert.equal(set.has(x), model.has(x), `has(${x})`);
    let absent = x;
    while (model.has(absent)) absent++;
    assert.equal(set.nextAbsent(x), absent, `nextAbsent(${x})`);
  }
}

describe('RunSet', () => {
  test('behaves like a plain set under any sequence of adds, range adds and deletes', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80, size: 'max' }), (ops) => {
        const set = new RunSet();
        const model = new Set<bigint>();
        for (const o of ops) {
          apply(set, model, o);
          checkAgainstModel(set, model);
        }
      }),
      { numRuns: 200 },
    );
  });

  test('an empty set has no runs and every value is absent', () => {
    const set = new RunSet();
    assert.equal(set.size, 0n);
    assert.equal(set.runCount, 0);
    assert.equal(set.has(0n), false);
    assert.equal(set.nextAbsent(7n), 7n);
    assert.equal(set.delete(7n), false);
  });

  test('adding neighbours merges them into one run', () => {
    const set = new RunSet();
    set.add(5n);
    set.add(7n);
    assert.deepEqual(set.runs(), [
      [5n, 5n],
      [7n, 7n],
    ]);
    set.add(6n);
    assert.deepEqual(set.runs(), [[5n, 7n]]);
    assert.equal(set.addRange(0n, 4n), 5n);
    assert.deepEqual(set.runs(), [[0n, 7n]]);
    assert.equal(set.addRange(8n, 8n), 1n);
    assert.deepEqual(set.runs(), [[0n, 8n]]);
  });

  test('a range add spanning several runs merges them and counts only the new values', () => {
    const set = new RunSet();
    set.addRange(0n, 2n);
    set.addRange(10n, 12n);
    set.addRange(20n, 22n);
    assert.equal(set.addRange(1n, 21n), 21n - 7n);
    assert.deepEqual(set.runs(), [[0n, 22n]]);
    assert.equal(set.size, 23n);
  });

  test('an empty range (to before from) adds nothing', () => {
    const set = new RunSet();
    assert.equal(set.addRange(5n, 4n), 0n);
    assert.equal(set.size, 0n);
    assert.equal(set.runCount, 0);
  });

  test('deleting inside a run splits it in two', () => {
    const set = new RunSet();
    set.addRange(1n, 9n);
    assert.equal(set.delete(5n), true);
    assert.deepEqual(set.runs(), [
      [1n, 4n],
      [6n, 9n],
    ]);
    assert.equal(set.delete(5n), false);
    assert.equal(set.delete(1n), true);
    assert.equal(set.delete(9n), true);
    assert.deepEqual(set.runs(), [
      [2n, 4n],
      [6n, 8n],
    ]);
    assert.equal(set.size, 6n);
  });

  test('nextAbsent jumps a whole run at once, whatever the size of the numbers', () => {
    const set = new RunSet();
    const base = 1n << 100n;
    assert.equal(set.addRange(base, base + (1n << 64n) - 1n), 1n << 64n);
    assert.equal(set.runCount, 1);
    assert.equal(set.nextAbsent(base + 12345n), base + (1n << 64n));
    assert.equal(set.nextAbsent(base - 1n), base - 1n);
    assert.equal(set.has(base + (1n << 63n)), true);
  });
});
