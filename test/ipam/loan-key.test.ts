/**
 * Loan ledger keys (src/ipam/loan-key.ts): a loan is never taken for one of its range's blocks, nor a
 * block for a loan, and the key gives back the address it was made of.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { blockAt, blockOfKey } from '../../src/ipam/blocks.ts';
import { isLoanKey, loanAddressOf, loanKey } from '../../src/ipam/loan-key.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';

const rangesOf = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

describe('loan ledger keys', () => {
  it('give back the address they were made of, in either family', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: (1n << 32n) - 1n }),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        (v4, v6) => {
          assert.equal(loanAddressOf({ pool: 'p', family: 4 }, loanKey('p', 4, v4)), v4);
          assert.equal(loanAddressOf({ pool: 'p@n', family: 6 }, loanKey('p@n', 6, v6)), v6);
        },
      ),
    );
  });

  it('are never read as a block of a range whose blocks are larger, and blocks never as loans', () => {
    const [range] = rangesOf({ range: '10.3.0.0/24', block_size: 28 });
    assert.ok(range);
    const key = loanKey(range.pool, 4, range.first + 5n);
    assert.equal(blockOfKey(range, key), undefined);
    assert.ok(isLoanKey(key, range.blockPrefix));
    const block = blockAt(range, range.first + 5n);
    assert.equal(loanAddressOf(range, block.key), undefined);
    assert.ok(!isLoanKey(block.key, range.blockPrefix));
  });

  it('are not loans where the blocks are one address each: there the key is a block', () => {
    const [range] = rangesOf({ range: '10.3.0.0/28', block_size: 32 });
    assert.ok(range);
    const key = loanKey(range.pool, 4, range.first);
    assert.ok(!isLoanKey(key, range.blockPrefix));
    assert.equal(blockOfKey(range, key)?.key, key);
  });

  it('belong to their range only', () => {
    assert.equal(loanAddressOf({ pool: '10.3.0.0/24', family: 4 }, loanKey('10.4.0.0/24', 4, 1n)), undefined);
    assert.equal(loanAddressOf({ pool: '10.3.0.0/24', family: 6 }, loanKey('10.3.0.0/24', 4, 1n)), undefined);
  });
});
