/**
 * The one codec of block keys (`<range pool>#<block CIDR>`, ipam/blocks.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  blockAt,
  blockCidrOfKey,
  blockKey,
  blockKeyPrefix,
  inRangePool,
  isBlockKey,
  rangePoolOfKey,
} from '../../src/ipam/blocks.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { networkNameProblem, parsePoolKey } from '../../src/ipam/pool-key.ts';

describe('block keys', () => {
  it('round-trips the range pool and the CIDR of every block key', () => {
    for (const [pool, cidr] of [
      ['10.0.0.0/24', '10.0.0.16/28'],
      ['10.0.0.0/24@blue', '10.0.0.0/28'],
      ['fd00::/64@net.a-b_c', 'fd00::1:0:0:0/122'],
    ] as const) {
      const key = blockKey(pool, cidr);
      assert.ok(isBlockKey(key));
      assert.equal(rangePoolOfKey(key), pool);
      assert.equal(blockCidrOfKey(key), cidr);
      assert.ok(key.startsWith(blockKeyPrefix(pool)));
      assert.ok(inRangePool(key, pool));
      assert.equal(parsePoolKey(key), undefined, 'a block key is not a range pool key');
    }
  });

  it('reads a key without a block part as its own range pool', () => {
    assert.equal(isBlockKey('10.0.0.0/24@blue'), false);
    assert.equal(rangePoolOfKey('10.0.0.0/24@blue'), '10.0.0.0/24@blue');
    assert.equal(blockCidrOfKey('10.0.0.0/24@blue'), undefined);
    assert.ok(inRangePool('10.0.0.0/24@blue', '10.0.0.0/24@blue'));
  });

  it('never puts a pool in a range whose key is merely a prefix of its own', () => {
    assert.equal(inRangePool('10.0.0.0/24@blue', '10.0.0.0/24'), false);
    assert.equal(inRangePool('10.0.0.0/24@blue#10.0.0.0/28', '10.0.0.0/24'), false);
    assert.equal(inRangePool('10.0.0.0/2', '10.0.0.0/24'), false);
  });

  it('is the key blockAt gives a block', () => {
    const [range] = parseIpamConfig({
      type: 'warren',
      range: '10.1.0.0/24',
      network_name: 'red',
      block_size: 28,
    }).ranges;
    assert.ok(range);
    const block = blockAt(range, range.first + 20n);
    assert.equal(block.key, blockKey(range.pool, '10.1.0.16/28'));
    assert.equal(rangePoolOfKey(block.key), range.pool);
    assert.equal(blockCidrOfKey(block.key), block.cidr);
  });

  it('round-trips for every network name a config may use (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (name) => {
        if (networkNameProblem(name) !== undefined) return;
        const pool = name === '' ? '10.0.0.0/24' : `10.0.0.0/24@${name}`;
        const key = blockKey(pool, '10.0.0.64/26');
        assert.equal(rangePoolOfKey(key), pool);
        assert.equal(blockCidrOfKey(key), '10.0.0.64/26');
      }),
      { numRuns: 300 },
    );
  });
});
