/**
 * `warren allocations --cluster` (src/cli/cluster-listing.ts, allocation pages of the published
 * view): every node's published allocations come out once each, as the whole list's JSON would
 * print, while the agent reads each published block once across the listing's pages (issue 26:
 * pages of 500 re-read 50-block reads, 658 s at 1,000,000 allocations). Against the agent's API
 * server in process (test/api/harness.ts) over a memory cluster tier's published view, the CLI as
 * an operator runs it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PublishedView } from '../../src/agent/server/allocation-pages.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { blockKey } from '../../src/ipam/blocks.ts';
import { type Harness, harness } from '../api/harness.ts';
import { WARREN_BIN, run } from '../helpers/processes.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';

const BLOCKS = 12;
/** More than one page of the CLI's (MAX_ALLOCATION_PAGE, 5,000) in all; a page ends inside a block. */
const PER_BLOCK = 700;

describe('warren allocations --cluster, streamed', () => {
  let h: Harness;
  const tier = new MemoryTier({ clock: new ManualClock(0) });
  /** Blocks the published view returned, over every read of it. */
  let blocksRead = 0;
  const published: PublishedView = async (filter, page) => {
    const read = await tier.published(filter, page);
    blocksRead += read.items.length;
    return read;
  };
  const expected: Allocation[] = [];

  before(async () => {
    const range = { pool: 'r', space: 's', subnet: '10.50.0.0/16', first: '10.50.0.1', last: '10.50.255.254' };
    for (let b = 0; b < BLOCKS; b++) {
      const key = blockKey('r', `10.50.${b * 4}.0/22`);
      const node = `node-${b % 3}`;
      assert.ok(await tier.claim({ ...range, blockPrefix: 22 }, key, node));
      const allocations = Array.from({ length: PER_BLOCK }, (_, i) => ({
        pool: key,
        address: `10.50.${b * 4 + Math.floor((i + 1) / 256)}.${(i + 1) % 256}`,
        network: 'wide',
        containerID: `c${b}-${i}`,
        ifname: 'eth0',
        podNamespace: 'default',
        podName: `pod-${b}-${i}`,
        node,
        createdAt: 1_000,
      }));
      await tier.publish({ key, node, counts: { allocated: PER_BLOCK, resting: 0 }, allocations, publishedAt: 0 });
    }
    for (let continued: string | undefined, first = true; first || continued !== undefined; first = false) {
      const read = await tier.published(
        {},
        { limit: 100, ...(continued === undefined ? {} : { continue: continued }) },
      );
      expected.push(...read.items.flatMap((block) => block.allocations));
      continued = read.continue;
    }
    h = await harness({ published });
  });
  after(async () => h.close());

  it("prints every node's allocations once, as the whole list's JSON, reading each block once", async () => {
    blocksRead = 0;
    const r = await run(process.execPath, [WARREN_BIN, 'allocations', '--cluster', '--json', '--socket', h.socket]);
    assert.equal(r.code, 0, r.stderr);
    const listed = JSON.parse(r.stdout) as Allocation[];
    assert.equal(listed.length, BLOCKS * PER_BLOCK);
    assert.equal(r.stdout, `${JSON.stringify(listed, null, 2)}\n`, 'byte for byte the JSON of the whole list');
    assert.deepEqual(
      listed.map((a) => `${a.pool} ${a.address}`),
      expected.map((a) => `${a.pool} ${a.address}`),
      'each once, in the order published',
    );
    assert.equal(blocksRead, BLOCKS, 'each published block read once across the pages');
  });

  it('prints the table with a header once, and --container among the matching only', async () => {
    const table = await run(process.execPath, [WARREN_BIN, 'allocations', '--cluster', '--socket', h.socket]);
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.equal(lines.length, BLOCKS * PER_BLOCK + 1);
    assert.match(lines[0] as string, /^ADDRESS\s+POOL\s+NETWORK\s+CONTAINER\s+IF\s+POD\s+HELD BY\s+NODE\s+AGE$/);
    assert.equal(lines.filter((l) => l.startsWith('ADDRESS')).length, 1);
    const one = await run(process.execPath, [
      WARREN_BIN,
      'allocations',
      '--cluster',
      '--json',
      '--container',
      'c7-69',
      '--socket',
      h.socket,
    ]);
    assert.equal(one.code, 0, one.stderr);
    assert.deepEqual(
      (JSON.parse(one.stdout) as Allocation[]).map((a) => a.containerID),
      ['c7-69'],
      'the exact ID wins over the longer ones it begins (c7-690 ...)',
    );
    const ambiguous = await run(process.execPath, [
      WARREN_BIN,
      'allocations',
      '--cluster',
      '--container',
      'c1',
      '--socket',
      h.socket,
    ]);
    assert.notEqual(ambiguous.code, 0);
    assert.match(ambiguous.stderr, /is the beginning of \d+ container IDs/);
    const none = await run(process.execPath, [
      WARREN_BIN,
      'allocations',
      '--cluster',
      '--network',
      'nothing-here',
      '--socket',
      h.socket,
    ]);
    assert.equal(none.stdout, 'no allocations\n');
  });
});
