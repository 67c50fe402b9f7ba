/**
 * Blocks that grow (issue 36's claims, amortised), as pure functions: the bounds a range pins
 * (ipam/range.ts growthBlockPrefix), aligned blocks of several sizes that never overlap
 * (ipam/blocks.ts), where placement puts a claim of a wanted size (allocator/placement.ts) and how
 * large a block a node asks for (block-assigner.ts wantedBlockPrefix).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { wantedBlockPrefix } from '../../src/allocator/block-assigner.ts';
import { placeInBlocks, spreadStart } from '../../src/allocator/placement.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import {
  type Block,
  blockKey,
  blockKeysOverlap,
  blockOfKey,
  blocksHolding,
  blocksOverlap,
  enclosingBlockKey,
  firstFreeBlock,
  overlappingBlockKeys,
} from '../../src/ipam/blocks.ts';
import { type RangeSpec, adaptiveBlockPrefix, growthBlockPrefix } from '../../src/ipam/range.ts';

function rangeOf(ipam: Record<string, unknown>): RangeSpec {
  const [range] = parseIpamConfig({ type: 'warren', ...ipam }).ranges;
  assert.ok(range);
  return range;
}

/** A range split as a store pins it where the config sets no block_size: its blocks grow. */
function growing(ipam: Record<string, unknown>): RangeSpec {
  const r = rangeOf(ipam);
  const blockPrefix = adaptiveBlockPrefix(r.family, r.first, r.last);
  const largest = growthBlockPrefix(r.family, r.first, r.last, blockPrefix);
  return { ...r, blockPrefix, ...(largest === undefined ? {} : { largestBlockPrefix: largest }) };
}

const slash24 = growing({ range: '10.0.0.0/24' });
const key = (cidr: string) => blockKey(slash24.pool, cidr);
const block = (cidr: string): Block => blockOfKey(slash24, key(cidr)) as Block;

describe('growthBlockPrefix', () => {
  it('bounds a grown block to an eighth of its range and the default block, never one address', () => {
    const cases: Array<[Record<string, unknown>, number, number | undefined]> = [
      [{ range: '10.0.0.0/24' }, 31, 27],
      [{ range: '10.0.0.0/23' }, 30, 26],
      [{ range: '10.0.0.0/20' }, 27, 26],
      [{ range: '10.0.0.0/16' }, 26, undefined], // the default block already
      [{ range: '192.168.2.224/28' }, 32, undefined], // one-address blocks are lent, never grown
      [{ range: 'fd00::/120' }, 127, 123],
    ];
    for (const [ipam, smallest, largest] of cases) {
      const r = growing(ipam);
      assert.equal(r.blockPrefix, smallest, JSON.stringify(ipam));
      assert.equal(r.largestBlockPrefix, largest, JSON.stringify(ipam));
    }
  });
});

describe('blocks of several sizes', () => {
  it('reads a grown block of the range by its key, and refuses sizes out of bounds or unaligned', () => {
    assert.equal(block('10.0.0.32/27').span.first, 32n + (10n << 24n));
    assert.equal(block('10.0.0.32/27').prefix, 27);
    assert.equal(blockOfKey(slash24, key('10.0.0.0/26')), undefined, 'larger than the range allows');
    assert.equal(blockOfKey(slash24, key('10.0.0.2/30')), undefined, 'not aligned');
    assert.equal(blockOfKey(rangeOf({ range: '10.0.0.0/24', block_size: 31 }), key('10.0.0.0/27')), undefined);
  });

  it('says which blocks may hold an address, the smallest first, and which block keys overlap', () => {
    assert.deepEqual(
      blocksHolding(slash24, (10n << 24n) + 41n).map((b) => b.cidr),
      ['10.0.0.40/31', '10.0.0.40/30', '10.0.0.40/29', '10.0.0.32/28', '10.0.0.32/27'],
    );
    assert.ok(blockKeysOverlap(key('10.0.0.32/27'), key('10.0.0.40/31')));
    assert.ok(!blockKeysOverlap(key('10.0.0.32/27'), key('10.0.0.64/31')));
    assert.equal(enclosingBlockKey(key('10.0.0.40/31'), 27), key('10.0.0.32/27'));
  });

  it('names every block overlapping one, and only those (property)', () => {
    const all = [27, 28, 29, 30, 31].flatMap((p) =>
      Array.from({ length: 2 ** (p - 24) }, (_, i) => key(`10.0.0.${i * 2 ** (32 - p)}/${p}`)),
    );
    fc.assert(
      fc.property(fc.constantFrom(...all), (k) => {
        const expected = all.filter((o) => o !== k && blockKeysOverlap(o, k)).sort();
        assert.deepEqual(overlappingBlockKeys(k, 27, 31).sort(), expected);
      }),
      { numRuns: 100 },
    );
  });

  it('finds the lowest free aligned block of a size, past every claimed block inside a candidate', () => {
    assert.equal(firstFreeBlock(slash24, [], 27)?.cidr, '10.0.0.0/27');
    assert.equal(firstFreeBlock(slash24, [block('10.0.0.0/31')], 27)?.cidr, '10.0.0.32/27');
    assert.equal(firstFreeBlock(slash24, [block('10.0.0.0/31')], 31)?.cidr, '10.0.0.2/31');
    assert.equal(firstFreeBlock(slash24, [block('10.0.0.0/31'), block('10.0.0.32/27')], 29)?.cidr, '10.0.0.8/29');
    const everyEighth = Array.from({ length: 8 }, (_, i) => block(`10.0.0.${i * 32 + 4}/31`));
    assert.equal(firstFreeBlock(slash24, everyEighth, 27), undefined, 'no /27 is free');
    assert.equal(firstFreeBlock(slash24, everyEighth, 28)?.cidr, '10.0.0.16/28');
  });

  it('never places a block over a claimed one, whatever was claimed (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 27, max: 31 }), fc.integer({ min: 0, max: 255 })), { maxLength: 20 }),
        fc.integer({ min: 27, max: 31 }),
        (asks, wanted) => {
          const claimed: Block[] = [];
          for (const [prefix, at] of asks) {
            const size = 2 ** (32 - prefix);
            const b = block(`10.0.0.${Math.floor(at / size) * size}/${prefix}`);
            if (!claimed.some((c) => blocksOverlap(b, c))) claimed.push(b);
          }
          const free = firstFreeBlock(slash24, claimed, wanted);
          if (free !== undefined) {
            assert.equal(free.prefix, wanted);
            assert.ok(!claimed.some((c) => blocksOverlap(free, c)), `${free.cidr} overlaps a claimed block`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('placement of a block of the wanted size', () => {
  const summary = (cidr: string, affinity: string) => ({
    ledger: key(cidr),
    revision: 0,
    allocated: 0,
    resting: 0,
    affinity,
  });

  it('claims the wanted size where one is free, else the largest smaller one', () => {
    const taken = [summary('10.0.0.0/31', 'n2')];
    const grown = placeInBlocks({ range: slash24, node: 'n1', summaries: taken, known: [], wantedPrefix: 27 });
    assert.equal(grown.placement.kind === 'claim' ? grown.placement.block.cidr : grown.placement.kind, '10.0.0.32/27');
    const crowded = Array.from({ length: 8 }, (_, i) => summary(`10.0.0.${i * 32}/31`, 'n2'));
    const smaller = placeInBlocks({ range: slash24, node: 'n1', summaries: crowded, known: [], wantedPrefix: 27 });
    assert.equal(
      smaller.placement.kind === 'claim' ? smaller.placement.block.cidr : smaller.placement.kind,
      '10.0.0.16/28',
    );
  });

  it('asks for a block holding the ADDs under way, and twice what the node holds, within the bounds', () => {
    assert.equal(wantedBlockPrefix(slash24, 1, 0n), 31, 'a first ADD: the smallest block');
    assert.equal(wantedBlockPrefix(slash24, 30, 0n), 27, 'a burst of 30: one block of 32');
    assert.equal(wantedBlockPrefix(slash24, 1, 3n), 29, 'full blocks of 3: a block of 8');
    assert.equal(wantedBlockPrefix(slash24, 1, 100n), 27, 'never beyond the largest');
    assert.equal(wantedBlockPrefix(rangeOf({ range: '10.0.0.0/24', block_size: 31 }), 30, 0n), 31, 'no growth');
  });
});

describe('nodes that lost a race for a block spread over the range (placement.ts spread)', () => {
  const wide = rangeOf({ range: '10.64.0.0/14', block_size: 28 });

  it('searches from the start given, and wraps to the range start when nothing is free after it', () => {
    const claimed = [firstFreeBlock(wide, [], 28) as Block];
    const start = wide.first + 4096n;
    assert.equal(firstFreeBlock(wide, claimed, 28, start)?.cidr, '10.64.16.0/28');
    const lastBlock = firstFreeBlock(wide, [], 28, wide.last) as Block;
    assert.equal(firstFreeBlock(wide, [lastBlock, ...claimed], 28, wide.last)?.cidr, '10.64.0.16/28', 'wrapped');
  });

  it('starts each node at an aligned block of its own, inside the range, the same for one name', () => {
    const starts = new Set<bigint>();
    for (let i = 0; i < 200; i++) {
      const start = spreadStart(wide, `node-${i}`);
      assert.ok(start >= wide.first && start <= wide.last, `node-${i} inside the range`);
      assert.equal(start % 16n, 0n, 'aligned to a block');
      assert.equal(spreadStart(wide, `node-${i}`), start, 'the same for one name');
      starts.add(start);
    }
    assert.ok(starts.size >= 195, `200 nodes start at ${starts.size} places`);
    const grown = spreadStart(slash24, 'node-7');
    assert.equal(grown % 32n, 0n, 'where blocks grow: aligned to the largest block (/27)');
  });

  it('claims from there once it lost a race, and from the lowest free block before', () => {
    const input = { range: wide, node: 'node-3', summaries: [], known: [] };
    const lowest = placeInBlocks(input).placement;
    assert.equal(lowest.kind === 'claim' && lowest.block.cidr, '10.64.0.0/28');
    const spread = placeInBlocks({ ...input, spread: true }).placement;
    assert.ok(spread.kind === 'claim');
    assert.equal(spread.block.span.first, spreadStart(wide, 'node-3'));
  });
});
