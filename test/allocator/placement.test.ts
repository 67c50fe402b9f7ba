/**
 * Block placement as a pure function: no store, no clock. Each case is the store's block summaries
 * of one range as a node sees them after its own blocks turned out full, and the decision.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blockKey } from '../../src/ipam/blocks.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { ownBlocks, placeInBlocks } from '../../src/allocator/placement.ts';
import type { LedgerSummary } from '../../src/store/store.ts';

function rangeOf(ipam: Record<string, unknown>): RangeSpec {
  const [range] = parseIpamConfig({ type: 'warren', ...ipam }).ranges;
  assert.ok(range);
  return range;
}

// 10.1.0.0/26 in /28 blocks: .0/28 holds .1-.15 (15), .16/28 .32/28 hold 16, .48/28 holds .48-.62 (15).
const range = rangeOf({ range: '10.1.0.0/26', block_size: 28 });
const key = (cidr: string) => blockKey(range.pool, cidr);

function block(
  cidr: string,
  affinity: string | undefined,
  allocated = 0,
  extra: Partial<LedgerSummary> = {},
): LedgerSummary {
  return {
    ledger: key(cidr),
    revision: 7,
    allocated,
    resting: 0,
    ...(affinity === undefined ? {} : { affinity }),
    ...extra,
  };
}

describe('placeInBlocks', () => {
  it('claims the lowest block nobody holds, at the revision its summary shows', () => {
    const { mine, placement } = placeInBlocks({
      range,
      node: 'n1',
      summaries: [block('10.1.0.0/28', 'n2', 3), block('10.1.0.16/28', undefined, 0, { revision: 12 })],
      known: [],
    });
    assert.deepEqual(mine, []);
    assert.equal(placement.kind, 'claim');
    if (placement.kind !== 'claim') return;
    assert.equal(placement.block.key, key('10.1.0.16/28'), 'a block given back is free again');
    assert.equal(placement.revision, 12);
  });

  it('claims a block the store has never seen at revision 0', () => {
    const { placement } = placeInBlocks({ range, node: 'n1', summaries: [], known: [] });
    assert.deepEqual(placement.kind === 'claim' && [placement.block.key, placement.revision], [key('10.1.0.0/28'), 0]);
  });

  it('sends the node back to its own blocks when one turned up that it did not know of', () => {
    const summaries = [block('10.1.0.0/28', 'n1', 15), block('10.1.0.16/28', 'n1', 2)];
    const { mine, placement } = placeInBlocks({ range, node: 'n1', summaries, known: [key('10.1.0.0/28')] });
    assert.deepEqual(mine, [key('10.1.0.0/28'), key('10.1.0.16/28')]);
    assert.equal(placement.kind, 'own');
  });

  it('drops from its list a block it knew of that is no longer its own', () => {
    const { mine, placement } = placeInBlocks({
      range,
      node: 'n1',
      summaries: [block('10.1.0.0/28', 'n2', 1)],
      known: [key('10.1.0.0/28')],
    });
    assert.deepEqual(mine, []);
    assert.equal(placement.kind, 'claim');
  });

  it('borrows when every block is claimed, from the block with the most room first', () => {
    const summaries = [
      block('10.1.0.0/28', 'n1', 15),
      block('10.1.0.16/28', 'n2', 10),
      block('10.1.0.32/28', 'n3', 4, { resting: 2 }),
      block('10.1.0.48/28', 'n2', 15),
    ];
    const { mine, placement } = placeInBlocks({ range, node: 'n1', summaries, known: [key('10.1.0.0/28')] });
    assert.deepEqual(mine, [key('10.1.0.0/28')]);
    assert.equal(placement.kind, 'borrow');
    if (placement.kind !== 'borrow') return;
    // .32/28: 16 - 4 - 2 = 10 free; .16/28: 16 - 10 = 6; .48/28 is full (resting counts as taken).
    assert.deepEqual(
      placement.from.map((b) => b.key),
      [key('10.1.0.32/28'), key('10.1.0.16/28')],
    );
  });

  it('keeps the key order between blocks with the same room', () => {
    // Every block has 10 free: the edge blocks hold 15 addresses, the middle ones 16.
    const summaries = [
      block('10.1.0.0/28', 'n3', 5),
      block('10.1.0.16/28', 'n2', 6),
      block('10.1.0.32/28', 'n2', 6),
      block('10.1.0.48/28', 'n4', 5),
    ];
    const { placement } = placeInBlocks({ range, node: 'n1', summaries, known: [] });
    assert.deepEqual(
      placement.kind === 'borrow' && placement.from.map((b) => b.key),
      summaries.map((s) => s.ledger),
    );
  });

  it('reports the range full when every block is claimed and none has room', () => {
    const summaries = [
      block('10.1.0.0/28', 'n1', 15),
      block('10.1.0.16/28', 'n2', 16),
      block('10.1.0.32/28', 'n2', 10, { resting: 6 }),
      block('10.1.0.48/28', 'n3', 15),
    ];
    assert.equal(placeInBlocks({ range, node: 'n1', summaries, known: [key('10.1.0.0/28')] }).placement.kind, 'full');
  });

  it('ignores summaries that are not blocks of this range (the range pool itself, another block size, another range)', () => {
    const other = rangeOf({ range: '10.2.0.0/26', block_size: 28 });
    const summaries: LedgerSummary[] = [
      { ledger: range.pool, revision: 3, allocated: 0, resting: 0 },
      block('10.1.0.0/27', 'n2', 0),
      { ledger: blockKey(other.pool, '10.2.0.0/28'), revision: 1, allocated: 0, resting: 0, affinity: 'n1' },
    ];
    const { mine, placement } = placeInBlocks({ range, node: 'n1', summaries, known: [] });
    assert.deepEqual(mine, []);
    assert.deepEqual(placement.kind === 'claim' && placement.block.key, key('10.1.0.0/28'));
  });

  it('skips wholly excluded blocks when it claims', () => {
    const excluded = rangeOf({ range: '10.1.0.0/26', block_size: 28, exclude: ['10.1.0.16/28'] });
    const summaries = [
      { ledger: blockKey(excluded.pool, '10.1.0.0/28'), revision: 2, allocated: 15, resting: 0, affinity: 'n2' },
    ];
    const { placement } = placeInBlocks({ range: excluded, node: 'n1', summaries, known: [] });
    assert.deepEqual(placement.kind === 'claim' && placement.block.key, blockKey(excluded.pool, '10.1.0.32/28'));
  });
});

describe('ownBlocks', () => {
  it('lists the blocks of this range the node holds, in key order', () => {
    const summaries = [
      block('10.1.0.0/28', 'n1'),
      block('10.1.0.16/28', 'n2'),
      block('10.1.0.32/28', 'n1'),
      block('10.1.0.48/28', undefined),
    ];
    assert.deepEqual(ownBlocks(range, 'n1', summaries), [key('10.1.0.0/28'), key('10.1.0.32/28')]);
    assert.deepEqual(ownBlocks(range, 'n9', summaries), []);
  });
});
