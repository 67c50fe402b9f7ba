/**
 * Where a node claims when its blocks are full (src/allocator/range-placer.ts): in a large range it
 * probes the blocks it knows from a block its name picks, instead of reading every claim of the
 * range (issue 36: first claims listed every WarrenBlock, 22.5 pages a node at 5,000 nodes); a lost
 * probe is probed past; after MAX_PROBES lost in a row the range is read whole; and a partial
 * picture never reports the range full.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OwnBlocks } from '../../src/allocator/own-blocks.ts';
import { probeStart } from '../../src/allocator/placement.ts';
import { MAX_PROBES, RangePlacer } from '../../src/allocator/range-placer.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { alignedBlock } from '../../src/ipam/blocks.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import type { LedgerSummary } from '../../src/store/store.ts';

function rangeOf(ipam: Record<string, unknown>): RangeSpec {
  const [range] = parseIpamConfig({ type: 'warren', ...ipam }).ranges;
  assert.ok(range);
  return range;
}

/** A /16 of /28 blocks: 4,096 of them, more than a page of claims. */
const wide = rangeOf({ range: '10.0.0.0/16', block_size: 28 });

/** A placer over owners that count their reads: `known` for probing (undefined: a range of one page), `all` for the whole range. */
function placer(known: LedgerSummary[] | undefined, all: LedgerSummary[]) {
  const reads = { known: 0, whole: 0 };
  const placer = new RangePlacer({
    node: 'node-7',
    own: new OwnBlocks(),
    assigner: { reserved: undefined },
    owners: {
      knownBlocks: async () => {
        reads.known += 1;
        return known;
      },
      rangeBlocks: async () => {
        reads.whole += 1;
        return all;
      },
    },
  });
  return { placer, reads };
}

/** Block `key` held by `node`, with room for 8 more addresses. */
const held = (key: string, node: string): LedgerSummary => ({
  ledger: key,
  revision: 0,
  allocated: 8,
  resting: 0,
  affinity: node,
});

describe('claims placed by probing a large range (range-placer.ts)', () => {
  it('probes the block the node name picks, reading no claim of other nodes', async () => {
    const { placer: p, reads } = placer([], []);
    const placement = await p.place(wide);
    assert.equal(placement.kind, 'claim');
    assert.equal(placement.kind === 'claim' && placement.block.span.first, probeStart(wide, 'node-7', 28));
    assert.deepEqual(reads, { known: 1, whole: 0 });
  });

  it('probes past a block a lost probe found taken, then reads the range whole after MAX_PROBES lost in a row', async () => {
    const { placer: p, reads } = placer([], []);
    const tried: string[] = [];
    for (let k = 0; k < MAX_PROBES; k++) {
      const placement = await p.place(wide);
      assert.ok(placement.kind === 'claim');
      assert.ok(!tried.includes(placement.block.key), `probe ${k} tried ${placement.block.key} again`);
      tried.push(placement.block.key);
      p.claimed(wide.pool, placement.block.key, false);
    }
    assert.equal(reads.whole, 0, 'probes read nothing whole');
    await p.place(wide);
    assert.equal(reads.whole, 1, `after ${MAX_PROBES} lost probes the range is read whole`);
    // The read whole starts the probes over.
    await p.place(wide);
    assert.equal(reads.whole, 1);
  });

  it('starts the probes over once a claim wins', async () => {
    const { placer: p, reads } = placer([], []);
    for (let k = 0; k < MAX_PROBES - 1; k++) {
      const placement = await p.place(wide);
      assert.ok(placement.kind === 'claim');
      p.claimed(wide.pool, placement.block.key, false);
    }
    const won = await p.place(wide);
    assert.ok(won.kind === 'claim');
    p.claimed(wide.pool, won.block.key, true);
    await p.place(wide);
    assert.equal(reads.whole, 0);
  });

  it('never reports a range full or borrows from what it knows: only from the range read whole', async () => {
    const tiny = rangeOf({ range: '10.0.0.0/27', block_size: 28 });
    const both = [0n, 16n].map((offset) => alignedBlock(tiny, tiny.first + offset, 28).key);
    // What the node knows shows both blocks taken; the range read whole shows one free.
    const { placer: p, reads } = placer(
      both.map((key) => held(key, 'node-1')),
      [held(both[0] as string, 'node-1')],
    );
    const placement = await p.place(tiny);
    assert.equal(reads.whole, 1, 'read whole when the known blocks leave none free');
    assert.ok(placement.kind === 'claim' && placement.block.key === both[1]);
  });

  it('reads a range found with no block free whole again, not by probes that would lose', async () => {
    const tiny = rangeOf({ range: '10.0.0.0/27', block_size: 28 });
    const both = [0n, 16n].map((offset) => held(alignedBlock(tiny, tiny.first + offset, 28).key, 'node-1'));
    const { placer: p, reads } = placer([], both);
    const first = await p.place(tiny);
    assert.ok(first.kind === 'claim', 'probed: the node knows of no block taken');
    p.claimed(tiny.pool, first.block.key, false);
    const second = await p.place(tiny);
    assert.ok(second.kind === 'claim');
    p.claimed(tiny.pool, second.block.key, false);
    assert.equal((await p.place(tiny)).kind, 'borrow', 'read whole: every block held by another node');
    const known = reads.known;
    assert.equal((await p.place(tiny)).kind, 'borrow');
    assert.equal(reads.known, known, 'no probe of a range read whole with no block free');
  });

  it('reads a range of one page whole, as before (knownBlocks answers undefined)', async () => {
    const { placer: p, reads } = placer(undefined, []);
    const placement = await p.place(wide);
    assert.ok(placement.kind === 'claim' && placement.block.span.first === wide.first, 'the lowest free block');
    assert.deepEqual(reads, { known: 1, whole: 1 });
  });
});
