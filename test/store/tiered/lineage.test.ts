/**
 * Which history of a node's file is the newer (src/store/tiered/lineage.ts), and a succession read
 * back from a publication or a file (src/store/succession.ts): the orderings the soak met, each
 * played through as the file check would, and a parser that takes nothing malformed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { PublishedBlock } from '../../../src/store/cluster.ts';
import { NO_SUCCESSION, SUCCESSION_LIMIT, type Succession, successionOf } from '../../../src/store/succession.ts';
import { succeeded, supersedesFile } from '../../../src/store/tiered/lineage.ts';

/** A publication of lineage `lineage` at `succession` (its other fields do not matter here). */
function published(lineage: string, succession: Succession = NO_SUCCESSION): PublishedBlock {
  return {
    key: '10.0.0.0/28',
    node: 'n1',
    counts: { allocated: 0, resting: 0 },
    allocations: [],
    publishedAt: 0,
    revision: 1,
    lineage,
    ...(succession === NO_SUCCESSION ? {} : { succession }),
  };
}

/** A file of lineage `lineage` taking `blocks` over: its succession after. */
const takeOver = (lineage: string, mine: Succession, blocks: PublishedBlock[]) =>
  succeeded(lineage, mine, blocks) ?? mine;

describe('lineage: which history of a file is the newer', () => {
  it('ranks what a file after a loss published above the copy from before it, and the copy above it once taken back', () => {
    const lost = takeOver('L2', NO_SUCCESSION, [published('L1')]); // the new file adopts the old one's
    assert.deepEqual(lost, { generation: 1, supersedes: ['L1'] });
    assert.equal(supersedesFile(published('L2', lost), 'L1', NO_SUCCESSION), true, 'the copy put back takes it over');
    const copy = takeOver('L1', NO_SUCCESSION, [published('L2', lost)]);
    assert.deepEqual(copy, { generation: 2, supersedes: ['L2'] });
    // A restore of the cluster's data brings the lost file's publication back: the copy, which took it over, stays.
    assert.equal(supersedesFile(published('L2', lost), 'L1', copy), false);
    // A copy of the lost file's era put back now finds the copy's publications newer.
    assert.equal(supersedesFile(published('L1', copy), 'L2', lost), true);
  });

  it('never ranks a history that took nothing of the file over above it, whatever its generation', () => {
    const oldMachine = takeOver('L2', NO_SUCCESSION, [published('L1')]);
    // A new machine under the forgotten node's name took nothing over: generation 0.
    assert.equal(supersedesFile(published('L2', oldMachine), 'L3', NO_SUCCESSION), false);
    assert.equal(supersedesFile(published('L1'), 'L1', NO_SUCCESSION), false, 'its own history is judged by revision');
    assert.equal(supersedesFile(published('L2', oldMachine), undefined, NO_SUCCESSION), false);
  });

  it("follows its own history's succession without moving up, and stays when nothing changes", () => {
    const ahead = { generation: 4, supersedes: ['L9'] };
    assert.deepEqual(succeeded('L1', NO_SUCCESSION, [published('L1', ahead)]), ahead);
    assert.equal(succeeded('L1', ahead, [published('L1', ahead)]), undefined);
    assert.equal(succeeded('L1', ahead, []), undefined);
  });

  it('names the latest histories first, never itself, and at most the limit', () => {
    let mine: Succession = NO_SUCCESSION;
    for (let i = 0; i < SUCCESSION_LIMIT + 5; i++)
      mine = takeOver('me', mine, [published(`L${i}`, { generation: 0, supersedes: ['me'] })]);
    assert.equal(mine.supersedes.length, SUCCESSION_LIMIT);
    assert.equal(mine.supersedes[0], `L${SUCCESSION_LIMIT + 4}`);
    assert.ok(!mine.supersedes.includes('me'));
    assert.equal(mine.generation, 1, 'above each of theirs (all 0): a takeover moves no further than it must');
  });
});

describe('successionOf', () => {
  it('reads back every succession it could have written', () => {
    const lineage = fc.string({ minLength: 1, maxLength: 64 });
    const succession = fc.record({
      generation: fc.nat(),
      supersedes: fc.array(lineage, { maxLength: SUCCESSION_LIMIT }),
    });
    fc.assert(
      fc.property(succession, (s) => {
        assert.deepEqual(successionOf(JSON.parse(JSON.stringify(s))), {
          generation: s.generation,
          supersedes: [...s.supersedes],
        });
      }),
    );
  });

  it('takes nothing malformed for a succession, and never throws', () => {
    const malformed = [
      null,
      'L1',
      [],
      { generation: -1, supersedes: [] },
      { generation: 1.5, supersedes: [] },
      { generation: '1', supersedes: [] },
      { generation: 1 },
      { generation: 1, supersedes: [''] },
      { generation: 1, supersedes: ['x'.repeat(65)] },
      { generation: 1, supersedes: [7] },
      { generation: 1, supersedes: Array.from({ length: SUCCESSION_LIMIT + 1 }, (_, i) => `L${i}`) },
    ];
    for (const m of malformed) assert.equal(successionOf(m), undefined, JSON.stringify(m));
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const s = successionOf(v);
        if (s !== undefined) assert.ok(Number.isSafeInteger(s.generation) && s.supersedes.length <= SUCCESSION_LIMIT);
      }),
    );
  });
});
