/**
 * The store key's one codec (src/ipam/store-key.ts): every string parses and formats back to
 * itself; every key of each kind parses back to what it was made of; and the keys Warren writes
 * (blocks.ts, loan-key.ts, holding-key.ts, pool-key.ts) parse as their kind.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type Family, bitsOf, formatCidr, formatIP } from '../../src/ipam/address.ts';
import { blockAt, blockKey, blockKeyPrefix, rangePoolListed } from '../../src/ipam/blocks.ts';
import { holderKey, useKey, useLedgerOf } from '../../src/ipam/holding-key.ts';
import { loanKey } from '../../src/ipam/loan-key.ts';
import { parsePoolKey, poolKeyOf } from '../../src/ipam/pool-key.ts';
import { type StoreKey, formatStoreKey, parseStoreKey } from '../../src/ipam/store-key.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';

const family = fc.constantFrom<Family>(4, 6);
const address = (f: Family) => fc.bigInt({ min: 0n, max: (1n << BigInt(bitsOf(f))) - 1n });
const name = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
/** A range pool key as pool-key.ts makes them: a subnet, with or without a network name. */
const rangePool = family.chain((f) =>
  fc
    .tuple(address(f), fc.integer({ min: 0, max: bitsOf(f) }), fc.option(name, { nil: '' }))
    .map(([a, length, networkName]) => {
      const bits = BigInt(bitsOf(f) - length);
      return poolKeyOf({ family: f, network: (a >> bits) << bits, prefixLength: length }, networkName);
    }),
);
const holder = fc.oneof(
  fc.record({ kind: fc.constant('statefulset' as const), namespace: name, name, ordinal: fc.nat(1000) }),
  fc.record({ kind: fc.constant('ipamclaim' as const), namespace: name, name }),
);
/** A key of every kind, as Warren writes them. */
const storeKey: fc.Arbitrary<StoreKey> = fc.oneof(
  rangePool.map((p) => ({ kind: 'range' as const, rangePool: p })),
  fc.tuple(rangePool, family).chain(([p, f]) =>
    fc.tuple(address(f), fc.integer({ min: 0, max: bitsOf(f) - 1 })).map(([a, length]) => {
      const bits = BigInt(bitsOf(f) - length);
      return { kind: 'block' as const, rangePool: p, cidr: formatCidr(f, (a >> bits) << bits, length) };
    }),
  ),
  fc
    .tuple(rangePool, family)
    .chain(([p, f]) => address(f).map((a) => ({ kind: 'loan' as const, rangePool: p, family: f, address: a }))),
  fc.tuple(rangePool, family, holder).chain(([p, f, h]) =>
    address(f).map((a) => ({
      kind: 'use' as const,
      rangePool: p,
      address: formatIP({ family: f, value: a }),
      holder: holderKey(h),
    })),
  ),
);
/** Any text, leaning to the characters the key's parts are made of. */
const anyText = fc
  .array(
    fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('#', '/', '@', 'held:', '10.0.0.1', '::1', '/32', '/128')),
    {
      maxLength: 8,
    },
  )
  .map((parts) => parts.join(''));

describe('the store key codec', () => {
  it('formats every string back to itself once parsed (total: no string is refused or changed)', () => {
    fc.assert(
      fc.property(anyText, (text) => {
        assert.equal(formatStoreKey(parseStoreKey(text)), text);
      }),
      { numRuns: 2000 },
    );
  });

  it('parses every key of each kind (range, block, loan, use) back to what it was made of', () => {
    fc.assert(
      fc.property(storeKey, (key) => {
        assert.deepEqual(parseStoreKey(formatStoreKey(key)), key);
      }),
      { numRuns: 2000 },
    );
  });

  it("reads the keys Warren writes as their kind: range pools, blocks, loans and pods' uses of a holding", () => {
    const [range] = parseIpamConfig({ type: 'warren', range: '10.7.0.0/24', block_size: 28, network_name: 'n' }).ranges;
    assert.ok(range);
    assert.deepEqual(parseStoreKey(range.pool), { kind: 'range', rangePool: '10.7.0.0/24@n' });
    assert.deepEqual(parsePoolKey(range.pool)?.networkName, 'n');
    const block = blockAt(range, range.first);
    assert.deepEqual(parseStoreKey(block.key), { kind: 'block', rangePool: range.pool, cidr: '10.7.0.0/28' });
    assert.equal(blockKey(range.pool, block.cidr), block.key);
    assert.deepEqual(parseStoreKey(loanKey(range.pool, 4, range.first)), {
      kind: 'loan',
      rangePool: range.pool,
      family: 4,
      address: range.first,
    });
    const use = useKey(range.pool, '10.7.0.9', 'statefulset/ns/web/0');
    assert.equal(use, '10.7.0.0/24@n#held:10.7.0.9/statefulset/ns/web/0');
    assert.deepEqual(parseStoreKey(use), {
      kind: 'use',
      rangePool: range.pool,
      address: '10.7.0.9',
      holder: 'statefulset/ns/web/0',
    });
    assert.deepEqual(useLedgerOf(use), { rangePool: range.pool, address: '10.7.0.9', holder: 'statefulset/ns/web/0' });
    assert.deepEqual(parseStoreKey('fd00::/64#fd00::1/128'), {
      kind: 'loan',
      rangePool: 'fd00::/64',
      family: 6,
      address: 1n + (0xfd00n << 112n),
    });
    // One address written otherwise than formatIP writes it is no loan: a part as written.
    assert.deepEqual(parseStoreKey('fd00::/64#fd00:0::1/128'), {
      kind: 'block',
      rangePool: 'fd00::/64',
      cidr: 'fd00:0::1/128',
    });
  });

  it('names the range pool whose blocks a listing prefix asks for, and no other', () => {
    assert.equal(rangePoolListed(blockKeyPrefix('10.0.0.0/24@n')), '10.0.0.0/24@n');
    assert.equal(rangePoolListed('10.0.0.0/24'), undefined);
    assert.equal(rangePoolListed('10.0.0.0/24#10.0.0.0/28'), undefined);
    assert.equal(rangePoolListed(undefined), undefined);
  });
});
