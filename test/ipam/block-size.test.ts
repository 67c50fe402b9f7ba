/**
 * Block sizes that adapt to the range (ipam/range.ts adaptiveBlockPrefix): enough blocks for
 * several nodes, never a block larger than the family's default nor smaller than one address.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { bitsOf } from '../../src/ipam/address.ts';
import { DEFAULT_BLOCK_PREFIX, MIN_BLOCKS_PER_RANGE, adaptiveBlockPrefix } from '../../src/ipam/range.ts';

function prefixFor(ipam: Record<string, unknown>): number {
  const [range] = parseIpamConfig({ type: 'warren', ...ipam }).ranges;
  assert.ok(range);
  return adaptiveBlockPrefix(range.family, range.first, range.last);
}

describe('adaptiveBlockPrefix', () => {
  it('sizes blocks to the range', () => {
    const cases: Array<[Record<string, unknown>, number]> = [
      [{ range: '10.0.0.0/16' }, 26], // large: the default, 1024 blocks
      [{ range: '10.0.0.0/19' }, 26], // 8190 addresses: 127 blocks of 64
      [{ range: '10.0.0.0/20' }, 27], // 4094 addresses: 63 blocks of 64 would be too few
      [{ range: '10.0.0.0/24' }, 31], // 254 addresses: 127 blocks of two
      [{ range: '192.168.2.224/28' }, 32], // whereabouts' /28: one address per block
      [{ range: '10.0.0.0/30' }, 32],
      [{ range: '10.0.0.0/16', range_start: '10.0.0.1', range_end: '10.0.0.200' }, 31], // the span counts: 200
      [{ range: 'fd00::/64' }, 122],
      [{ range: 'fd00::/116' }, 123],
      [{ range: 'fd00::/122' }, 128],
    ];
    for (const [ipam, expected] of cases) assert.equal(prefixFor(ipam), expected, JSON.stringify(ipam));
  });

  it('gives the largest block that leaves MIN_BLOCKS_PER_RANGE blocks, within the bounds (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(4 as const, 6 as const), fc.bigInt({ min: 1n, max: 1n << 40n }), (family, span) => {
        const prefix = adaptiveBlockPrefix(family, 0n, span - 1n);
        const hostBits = BigInt(bitsOf(family) - prefix);
        const min = BigInt(MIN_BLOCKS_PER_RANGE);
        assert.ok(prefix >= DEFAULT_BLOCK_PREFIX[family] && hostBits >= 0n, 'within the bounds');
        if (hostBits > 0n) assert.ok(span >> hostBits >= min, 'enough blocks');
        if (prefix > DEFAULT_BLOCK_PREFIX[family]) assert.ok(span >> (hostBits + 1n) < min, 'the largest such block');
      }),
      { numRuns: 300 },
    );
  });

  it('leaves a block_size the config set alone, and says the config set it', () => {
    const [set] = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24', block_size: 28 }).ranges;
    const [unset] = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24' }).ranges;
    assert.equal(set?.blockSizeSet, true);
    assert.equal(set?.blockPrefix, 28);
    assert.equal(unset?.blockSizeSet, undefined);
  });
});
