/**
 * PoolState, the allocation engine: draining random small ranges hands out every allocatable
 * address exactly once; a random mix of picks, releases with and without cooldown, requests and
 * clock ticks matches a naive model that scans address by address; and a /16 or a whole IPv6 /64
 * stay cheap because occupied addresses are runs, not a list.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type Family, formatIP, parseIP } from '../../src/ipam/address.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { type RangeSpec, capacityOf } from '../../src/ipam/range.ts';
import { LedgerState, type RequestCheck } from '../../src/ipam/ledger-state.ts';

function ip(text: string): bigint {
  const parsed = parseIP(text);
  assert.ok(parsed !== undefined, `${text} should parse`);
  return parsed.value;
}

function rangeOf(ipam: Record<string, unknown>): RangeSpec {
  const config = parseIpamConfig({ type: 'warren', ...ipam });
  assert.equal(config.ranges.length, 1);
  return config.ranges[0] as RangeSpec;
}

/** Picks and allocates as the allocator does: the cursor follows every picked address. */
function allocateNext(state: LedgerState, range: RangeSpec): bigint | undefined {
  const pick = state.pick(range);
  if (pick.kind === 'exhausted') return undefined;
  state.markAllocated(pick.address);
  state.cursor = pick.address;
  return pick.address;
}

function pickedAddress(state: LedgerState, range: RangeSpec): bigint {
  const pick = state.pick(range);
  assert.equal(pick.kind, 'picked');
  return pick.kind === 'picked' ? pick.address : -1n;
}

function isExcluded(range: RangeSpec, x: bigint): boolean {
  return range.excluded.some(([a, b]) => x >= a && x <= b);
}

/** A random small range: a network, optional range_start/range_end, excludes and a gateway. */
const smallRange = fc
  .record({
    family: fc.constantFrom<Family>(4, 6),
    // Mostly ranges of 16 to 128 addresses, sometimes the point-to-point and single-address ones.
    hostBits: fc.oneof(
      { arbitrary: fc.integer({ min: 4, max: 7 }), weight: 4 },
      { arbitrary: fc.integer({ min: 0, max: 3 }), weight: 1 },
    ),
    seed: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
    start: fc.oneof({ arbitrary: fc.constant(null), weight: 2 }, fc.nat(127)),
    end: fc.oneof({ arbitrary: fc.constant(null), weight: 2 }, fc.nat(127)),
    excludes: fc.array(
      fc.tuple(
        fc.nat(127),
        fc.oneof({ arbitrary: fc.integer({ min: 0, max: 3 }), weight: 6 }, fc.integer({ min: 0, max: 7 })),
      ),
      { maxLength: 4 },
    ),
    gateway: fc.option(fc.nat(127)),
  })
  .map(({ family, hostBits, seed, start, end, excludes, gateway }) => {
    const bits = family === 4 ? 32n : 128n;
    const size = 1n << BigInt(hostBits);
    const network = (seed % (1n << bits)) & ~(size - 1n);
    const at = (offset: number): string => formatIP({ family, value: network + (BigInt(offset) % size) });
    const ipam: Record<string, unknown> = { range: `${at(0)}/${Number(bits) - hostBits}` };
    if (start !== null && end !== null && BigInt(start) % size > BigInt(end) % size) {
      ipam.range_start = at(end);
      ipam.range_end = at(start);
    } else {
      if (start !== null) ipam.range_start = at(start);
      if (end !== null) ipam.range_end = at(end);
    }
    ipam.exclude = excludes.map(([offset, exBits]) => {
      const exSize = 1n << BigInt(Math.min(exBits, hostBits));
      const value = (network + (BigInt(offset) % size)) & ~(exSize - 1n);
      return `${formatIP({ family, value })}/${Number(bits) - Math.min(exBits, hostBits)}`;
    });
    if (gateway !== null) ipam.gateway = at(gateway);
    return ipam;
  });

/** Parses, or undefined when the random choice left the range empty or reversed. */
function tryRange(ipam: Record<string, unknown>): RangeSpec | undefined {
  try {
    return rangeOf(ipam);
  } catch (error) {
    assert.match(String(error), /no allocatable addresses|comes before range_start/);
    return undefined;
  }
}

describe('draining a range', () => {
  test('hands out every allocatable address exactly once, then reports exhaustion', () => {
    let drained = 0;
    fc.assert(
      fc.property(smallRange, (ipam) => {
        const range = tryRange(ipam);
        if (range === undefined) return;
        drained++;
        const state = new LedgerState();
        const picked = new Set<bigint>();
        for (let address = allocateNext(state, range); address !== undefined; address = allocateNext(state, range)) {
          assert.ok(!picked.has(address), `${formatIP({ family: range.family, value: address })} picked twice`);
          picked.add(address);
          assert.ok(address >= range.first && address <= range.last, 'outside [first, last]');
          assert.ok(!isExcluded(range, address), 'excluded address picked');
          assert.notEqual(address, range.gateway?.value, 'gateway picked');
          assert.ok(BigInt(picked.size) <= capacityOf(range), 'more picks than capacity');
        }
        assert.equal(BigInt(picked.size), capacityOf(range));
        assert.equal(state.allocatedCount, BigInt(picked.size));
        assert.deepEqual(state.pick(range), { kind: 'exhausted' });
        for (let x = range.first; x <= range.last; x++) {
          assert.equal(state.checkRequest(range, x).kind, isExcluded(range, x) ? 'excluded' : 'occupied');
        }
      }),
      { numRuns: 400 },
    );
    assert.ok(drained > 200, `only ${drained} of the random ranges were usable`);
  });
});

type Op =
  | { readonly kind: 'pick' }
  | { readonly kind: 'release'; readonly which: number; readonly cooldown: number }
  | { readonly kind: 'request'; readonly offset: number }
  | { readonly kind: 'tick'; readonly by: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'pick' as const }), weight: 4 },
  {
    arbitrary: fc.record({
      kind: fc.constant('release' as const),
      which: fc.nat(),
      cooldown: fc.constantFrom(0, 0, 1, 3, 10),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('request' as const), offset: fc.integer({ min: -2, max: 140 }) }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('tick' as const), by: fc.integer({ min: 0, max: 4 }) }), weight: 2 },
);

/** The obvious implementation: scan address by address from just after the cursor, wrapping once. */
class NaivePool {
  readonly allocated = new Set<bigint>();
  readonly resting = new Map<bigint, number>();
  cursor: bigint | undefined;
  readonly range: RangeSpec;

  constructor(range: RangeSpec) {
    this.range = range;
  }

  check(x: bigint): RequestCheck['kind'] {
    if (x < this.range.first || x > this.range.last) return 'outside';
    if (isExcluded(this.range, x)) return 'excluded';
    if (this.resting.has(x)) return 'resting';
    if (this.allocated.has(x)) return 'occupied';
    return 'free';
  }

  pick(): bigint | undefined {
    const { first, last } = this.range;
    const start = this.cursor !== undefined && this.cursor >= first && this.cursor < last ? this.cursor + 1n : first;
    for (let x = start; x <= last; x++) if (this.check(x) === 'free') return x;
    for (let x = first; x < start; x++) if (this.check(x) === 'free') return x;
    return undefined;
  }
}

describe('picking, releasing and resting', () => {
  test('a random mix of operations agrees with a naive address-by-address model', () => {
    fc.assert(
      fc.property(smallRange, fc.array(op, { maxLength: 60, size: 'max' }), (ipam, ops) => {
        const range = tryRange(ipam);
        if (range === undefined) return;
        const state = new LedgerState();
        const model = new NaivePool(range);
        let now = 0;
        for (const o of ops) {
          switch (o.kind) {
            case 'pick': {
              const expected = model.pick();
              const pick = state.pick(range);
              assert.deepEqual(
                pick,
                expected === undefined ? { kind: 'exhausted' } : { kind: 'picked', address: expected },
              );
              if (expected !== undefined) {
                state.markAllocated(expected);
                state.cursor = expected;
                model.allocated.add(expected);
                model.cursor = expected;
              }
              break;
            }
            case 'release': {
              const held = [...model.allocated];
              if (held.length === 0) break;
              const x = held[o.which % held.length] as bigint;
              model.allocated.delete(x);
              if (o.cooldown > 0) {
                model.resting.set(x, now + o.cooldown);
                state.markReleased(x, now + o.cooldown, now);
              } else {
                state.markReleased(x);
              }
              break;
            }
            case 'request': {
              // A specific address asked for (the `ips` capability): taken only when free, cursor untouched.
              const x: bigint = range.first + BigInt(o.offset);
              const verdict = state.checkRequest(range, x);
              assert.equal(verdict.kind, model.check(x));
              if (verdict.kind === 'free') {
                state.markAllocated(x);
                model.allocated.add(x);
              }
              break;
            }
            case 'tick': {
              now += o.by;
              const freed = state.expireRests(now);
              const due = [...model.resting].filter(([, at]) => at <= now).map(([x]) => x);
              for (const x of due) model.resting.delete(x);
              assert.deepEqual(new Set(freed), new Set(due));
              assert.equal(freed.length, due.length);
              break;
            }
            default: {
              const never: never = o;
              throw new Error(`unexpected op ${String(never)}`);
            }
          }
          assert.equal(state.allocatedCount, BigInt(model.allocated.size));
          assert.equal(state.restingCount, model.resting.size);
          for (const x of model.resting.keys()) assert.ok(state.isResting(x));
        }
      }),
      { numRuns: 400 },
    );
  });

  test('addresses are handed out in order from the first', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    const got = [1, 2, 3, 4, 5, 6].map(() => allocateNext(state, range));
    assert.deepEqual(
      got,
      [1n, 2n, 3n, 4n, 5n, 6n].map((n) => ip('10.0.0.0') + n),
    );
    assert.equal(allocateNext(state, range), undefined);
  });

  test('a released address is not handed out next while others are free', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    for (let i = 0; i < 3; i++) allocateNext(state, range);
    state.markReleased(ip('10.0.0.3'));
    assert.equal(allocateNext(state, range), ip('10.0.0.4'));
    state.markReleased(ip('10.0.0.4'));
    assert.equal(allocateNext(state, range), ip('10.0.0.5'));
  });

  test('a released address is handed out again when it is the only free one', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    while (allocateNext(state, range) !== undefined);
    state.markReleased(ip('10.0.0.6'));
    assert.equal(allocateNext(state, range), ip('10.0.0.6'));
    state.markReleased(ip('10.0.0.3'));
    assert.equal(allocateNext(state, range), ip('10.0.0.3'));
  });

  test('the search wraps around to the start, and the address at the cursor comes last', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    while (allocateNext(state, range) !== undefined);
    state.markReleased(ip('10.0.0.2'));
    state.markReleased(ip('10.0.0.5'));
    state.cursor = ip('10.0.0.5');
    // .6 is taken, so the search wraps to the start and finds .2 before coming back round to .5.
    assert.equal(allocateNext(state, range), ip('10.0.0.2'));
    assert.equal(allocateNext(state, range), ip('10.0.0.5'));
    assert.equal(allocateNext(state, range), undefined);
  });

  test('a cursor at the last address or outside the range starts the search at the first', () => {
    const range = rangeOf({ range: '10.0.0.0/24', range_start: '10.0.0.10', range_end: '10.0.0.20' });
    const state = new LedgerState();
    state.cursor = ip('10.0.0.20');
    assert.equal(pickedAddress(state, range), ip('10.0.0.10'));
    state.cursor = ip('10.0.0.200');
    assert.equal(pickedAddress(state, range), ip('10.0.0.10'));
    state.cursor = ip('10.0.0.2');
    assert.equal(pickedAddress(state, range), ip('10.0.0.10'));
    state.cursor = ip('10.0.0.14');
    assert.equal(pickedAddress(state, range), ip('10.0.0.15'));
  });

  test('excluded addresses and the gateway are skipped', () => {
    const range = rangeOf({
      range: '10.0.0.0/28',
      gateway: '10.0.0.1',
      exclude: ['10.0.0.2/31', '10.0.0.4/30', '10.0.0.9'],
    });
    const state = new LedgerState();
    const got: bigint[] = [];
    for (let x = allocateNext(state, range); x !== undefined; x = allocateNext(state, range))
      got.push(x - ip('10.0.0.0'));
    assert.deepEqual(got, [8n, 10n, 11n, 12n, 13n, 14n]);
  });
});

describe('cooldown', () => {
  test('a resting address cannot be picked until its rest ends', () => {
    const range = rangeOf({ range: '10.0.0.0/30' });
    const state = new LedgerState();
    const a = allocateNext(state, range);
    const b = allocateNext(state, range);
    assert.ok(a !== undefined && b !== undefined);
    state.markReleased(a, 1_000, 400);
    assert.equal(state.isResting(a), true);
    assert.equal(state.restingCount, 1);
    assert.equal(state.allocatedCount, 1n);
    assert.deepEqual(state.pick(range), { kind: 'exhausted' });
    assert.deepEqual(state.checkRequest(range, a), { kind: 'resting' });
    assert.deepEqual(state.expireRests(999), []);
    assert.deepEqual(state.pick(range), { kind: 'exhausted' });
    assert.deepEqual(state.expireRests(1_000), [a]);
    assert.equal(state.isResting(a), false);
    assert.deepEqual(state.checkRequest(range, a), { kind: 'free' });
    assert.equal(allocateNext(state, range), a);
  });

  test('a release whose reusable time has already come frees the address at once', () => {
    const range = rangeOf({ range: '10.0.0.0/30' });
    const state = new LedgerState();
    const a = allocateNext(state, range);
    assert.ok(a !== undefined);
    state.markReleased(a, 500, 500);
    assert.equal(state.isResting(a), false);
    assert.deepEqual(state.checkRequest(range, a), { kind: 'free' });
  });

  test('rests end in the order of their reusable times, however they were released', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    const [a, b, c] = [1, 2, 3].map(() => allocateNext(state, range)) as [bigint, bigint, bigint];
    state.markReleased(a, 30, 0);
    state.markReleased(b, 10, 0);
    state.markReleased(c, 20, 0);
    assert.deepEqual(state.expireRests(15), [b]);
    assert.deepEqual(state.expireRests(100), [c, a]);
    assert.equal(state.restingCount, 0);
  });

  test('allocating a resting address (as a recovery does) ends its rest', () => {
    const range = rangeOf({ range: '10.0.0.0/29' });
    const state = new LedgerState();
    const a = allocateNext(state, range);
    assert.ok(a !== undefined);
    state.markReleased(a, 100, 0);
    state.markAllocated(a);
    assert.equal(state.isResting(a), false);
    assert.equal(state.allocatedCount, 1n);
    assert.deepEqual(state.expireRests(1_000), []);
    assert.deepEqual(state.checkRequest(range, a), { kind: 'occupied' });
  });
});

describe('checkRequest', () => {
  test('gives each verdict', () => {
    const range = rangeOf({
      range: '10.0.0.0/24',
      range_start: '10.0.0.10',
      range_end: '10.0.0.100',
      gateway: '10.0.0.1',
      exclude: ['10.0.0.16/30'],
    });
    const state = new LedgerState();
    state.markAllocated(ip('10.0.0.11'));
    state.markAllocated(ip('10.0.0.12'));
    state.markReleased(ip('10.0.0.12'), 10, 0);
    const verdict = (text: string): string => state.checkRequest(range, ip(text)).kind;
    assert.equal(verdict('10.0.0.10'), 'free');
    assert.equal(verdict('10.0.0.11'), 'occupied');
    assert.equal(verdict('10.0.0.12'), 'resting');
    assert.equal(verdict('10.0.0.17'), 'excluded');
    assert.equal(verdict('10.0.0.9'), 'outside');
    assert.equal(verdict('10.0.0.101'), 'outside');
    assert.equal(verdict('10.0.0.0'), 'outside');
    assert.equal(verdict('10.0.0.255'), 'outside');
    // The gateway lies before range_start here; inside the span it is excluded.
    assert.equal(verdict('10.0.0.1'), 'outside');
    const withGateway = rangeOf({ range: '10.0.0.0/24', gateway: '10.0.0.1' });
    assert.deepEqual(state.checkRequest(withGateway, ip('10.0.0.1')), { kind: 'excluded' });
  });
});

describe('at scale', () => {
  test('a /16 filled with 65,000 addresses in scrambled order still picks, and its occupied set is one run', () => {
    const range = rangeOf({ range: '10.1.0.0/16' });
    const state = new LedgerState();
    const count = 65_000;
    // 7919 is prime and does not divide 65,000, so i * 7919 mod 65,000 visits every offset once.
    for (let i = 0; i < count; i++) state.markAllocated(range.first + BigInt((i * 7919) % count));
    assert.equal(state.allocatedCount, BigInt(count));
    assert.equal(state.occupied.runCount, 1);
    assert.equal(pickedAddress(state, range), range.first + BigInt(count));
    // Fill the rest but one address in the middle: the pick finds the hole.
    for (let x = range.first + BigInt(count); x <= range.last; x++) state.markAllocated(x);
    const hole = range.first + 40_000n;
    state.markReleased(hole);
    state.cursor = hole + 1n;
    assert.equal(pickedAddress(state, range), hole);
    assert.equal(state.occupied.runCount, 2);
  });

  test('a whole IPv6 /64 picks sequentially with one run, and finds one free address among 2^64', () => {
    const range = rangeOf({ range: 'fd00::/64', gateway: 'fd00::1' });
    assert.equal(capacityOf(range), (1n << 64n) - 2n);
    const state = new LedgerState();
    for (let i = 0; i < 5_000; i++) assert.ok(allocateNext(state, range) !== undefined);
    assert.equal(state.cursor, ip('fd00::1389'), '5,000 addresses after the gateway');
    assert.equal(state.occupied.runCount, 1);

    // Occupy every address but one near the end, then one near the start.
    state.occupied.addRange(range.first, range.last);
    const late = range.last - 7n;
    state.markReleased(late);
    state.cursor = range.first;
    assert.equal(pickedAddress(state, range), late);
    state.markAllocated(late);
    state.markReleased(range.first + 2n);
    state.cursor = late;
    // Wraps past the end of the /64 to the start.
    assert.equal(pickedAddress(state, range), range.first + 2n);
    assert.ok(state.occupied.runCount <= 2);
    state.markAllocated(range.first + 2n);
    assert.deepEqual(state.pick(range), { kind: 'exhausted' });
  });
});
