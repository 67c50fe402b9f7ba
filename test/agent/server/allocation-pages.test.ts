/**
 * GET /v1/allocations a page at a time (server/allocation-pages.ts, issue 26 item 6): through the
 * agent's real API server and typed client over SQLite, and over a memory cluster's published view.
 * Every allocation comes once across the pages, no page holds more than its limit, and the agent
 * never lists the whole store to make one (the store's whole listing is made to fail meanwhile).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  BLOCKS_PER_READ,
  RECENT_READ_MS,
  clusterPage,
  localPage,
  recentReads,
} from '../../../src/agent/server/allocation-pages.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { blockKey } from '../../../src/ipam/blocks.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Store } from '../../../src/store/store.ts';
import { type Harness, harness } from '../../api/harness.ts';
import { MemoryTier } from '../../store/tiered/memory-tier.ts';

const keyOf = (a: Allocation): string => `${a.pool} ${a.address}`;

describe('allocation pages through the API', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
    for (let i = 0; i < 23; i++) {
      const network = i % 3 === 0 ? 'odd' : 'main';
      const range = network === 'odd' ? '10.31.0.0/24' : '10.30.0.0/24';
      const outcome = await h.client.cni({
        command: 'ADD',
        containerID: `c${i}`,
        netns: `/var/run/netns/c${i}`,
        ifname: 'eth0',
        config: { cniVersion: '1.0.0', name: network, ipam: { type: 'warren', range } },
      });
      assert.equal(outcome.kind, 'result', JSON.stringify(outcome));
    }
  });
  after(async () => h.close());

  it('answers each allocation once across pages of at most `limit`, never listing the whole store', async () => {
    const whole = await h.client.allocations();
    h.store.listFault = new Error('the whole store was listed for a page');
    try {
      const seen: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const page = await h.client.allocationsPage(
          {},
          { limit: 7, ...(token === undefined ? {} : { continue: token }) },
        );
        assert.ok(page.items.length <= 7);
        seen.push(...page.items.map(keyOf));
        token = page.continue;
        pages += 1;
      } while (token !== undefined);
      assert.equal(pages, 4, '23 allocations in pages of 7');
      assert.deepEqual(seen.slice().sort(), whole.map(keyOf).sort());
      assert.equal(new Set(seen).size, seen.length, 'none twice');
      const filtered: Allocation[] = [];
      for await (const a of h.client.allAllocations({ network: 'odd' }, { pageSize: 3 })) filtered.push(a);
      assert.deepEqual(
        filtered.map(keyOf).sort(),
        whole
          .filter((a) => a.network === 'odd')
          .map(keyOf)
          .sort(),
      );
    } finally {
      h.store.listFault = undefined;
    }
  });

  it('refuses a bad limit, a token it did not give, and --cluster on a store that publishes nothing', async () => {
    await assert.rejects(h.client.allocationsPage({}, { limit: 0 }), /BAD_REQUEST|limit must be a whole number/);
    await assert.rejects(h.client.allocationsPage({}, { limit: 5001 }), /limit must be a whole number from 1 to 5000/);
    await assert.rejects(h.client.allocationsPage({}, { limit: 5, continue: 'bm9wZQ' }), /not a token this agent gave/);
    await assert.rejects(
      h.client.allocationsPage({}, { limit: 5, cluster: true }),
      /--cluster needs --store kubernetes/,
    );
  });
});

describe('allocation pages of a store that cannot page, and of the published view', () => {
  it('slices a store without listPage in the same order, each allocation once', async () => {
    const sqlite = new SqliteStore({ path: ':memory:' });
    try {
      for (let i = 0; i < 9; i++) {
        const allocation = {
          pool: 'p',
          address: `10.0.0.${i + 1}`,
          network: 'n',
          containerID: `c${i}`,
          ifname: 'eth0',
          node: 'n1',
          createdAt: i,
        };
        assert.equal(
          (await sqlite.commit('p', (await sqlite.readLedger('p')).revision, [{ op: 'allocate', allocation }])).kind,
          'committed',
        );
      }
      const bare = { list: (filter: never) => sqlite.list(filter) } as unknown as Store;
      const read = async (store: Store): Promise<string[]> => {
        const out: string[] = [];
        let token: string | undefined;
        do {
          const page = await localPage(store, {}, { limit: 4, ...(token === undefined ? {} : { continue: token }) });
          assert.ok(page.items.length <= 4);
          out.push(...page.items.map(keyOf));
          token = page.continue;
        } while (token !== undefined);
        return out;
      };
      assert.deepEqual(await read(bare), await read(sqlite), 'the same pages with or without listPage');
      assert.equal((await read(sqlite)).length, 9);
    } finally {
      await sqlite.close();
    }
  });

  it("reads every node's published allocations, more blocks than one read holds, each once, filtered", async () => {
    const tier = new MemoryTier({ clock: new ManualClock(0) });
    const range = {
      pool: 'r',
      space: 's',
      subnet: '10.40.0.0/16',
      first: '10.40.0.1',
      last: '10.40.255.254',
      blockPrefix: 28,
    };
    const blocks = BLOCKS_PER_READ + 13;
    for (let b = 0; b < blocks; b++) {
      const key = blockKey('r', `10.40.${b}.0/28`);
      const node = `node-${b % 3}`;
      assert.ok(await tier.claim(range, key, node));
      const allocations = ['x', 'y'].map((network, i) => ({
        pool: key,
        address: `10.40.${b}.${i + 1}`,
        network,
        containerID: `c${b}-${i}`,
        ifname: 'eth0',
        node,
        createdAt: 0,
      }));
      await tier.publish({ key, node, counts: { allocated: 2, resting: 0 }, allocations, publishedAt: 0 });
    }
    const published = (filter: { pool?: string; node?: string }, page: { limit: number; continue?: string }) =>
      tier.published(filter, page);
    const seen: Allocation[] = [];
    let token: string | undefined;
    do {
      const page = await clusterPage(
        published,
        { network: 'x' },
        { limit: 7, ...(token === undefined ? {} : { continue: token }) },
      );
      assert.ok(page.items.length <= 7);
      seen.push(...page.items);
      token = page.continue;
    } while (token !== undefined);
    assert.equal(seen.length, blocks, 'one of network x per block');
    assert.equal(new Set(seen.map(keyOf)).size, blocks, 'none twice');
    assert.ok(seen.every((a) => a.network === 'x'));
    const ofNode = await clusterPage(published, { node: 'node-1' }, { limit: 1000 });
    assert.ok(ofNode.items.length > 0 && ofNode.items.every((a) => a.node === 'node-1'));
  });

  it('reads about a page of blocks at a time, each block once across pages, afresh for each listing', async () => {
    const clock = new ManualClock(0);
    const tier = new MemoryTier({ clock });
    const range = { pool: 'w', space: 's', subnet: '10.41.0.0/16', first: '10.41.0.1', last: '10.41.255.254' };
    const perBlock = 300;
    for (let b = 0; b < 8; b++) {
      const key = blockKey('w', `10.41.${b * 4}.0/22`);
      assert.ok(await tier.claim({ ...range, blockPrefix: 22 }, key, 'n'));
      const allocations = Array.from({ length: perBlock }, (_, i) => ({
        pool: key,
        address: `10.41.${b * 4 + Math.floor((i + 1) / 256)}.${(i + 1) % 256}`,
        network: 'x',
        containerID: `c${b}-${i}`,
        ifname: 'eth0',
        node: 'n',
        createdAt: 0,
      }));
      await tier.publish({ key, node: 'n', counts: { allocated: perBlock, resting: 0 }, allocations, publishedAt: 0 });
    }
    const widths: number[] = [];
    const view = recentReads(async (filter, page) => {
      const read = await tier.published(filter, page);
      widths.push(read.items.length);
      return read;
    }, clock);
    const listing = async (): Promise<number> => {
      let n = 0;
      let token: string | undefined;
      do {
        const request = { limit: 500, ...(token === undefined ? {} : { continue: token }) };
        const page = await clusterPage(view.forPage(request), {}, request);
        n += page.items.length;
        token = page.continue;
      } while (token !== undefined);
      return n;
    };
    assert.equal(await listing(), 8 * perBlock);
    assert.equal(
      widths.reduce((s, w) => s + w, 0),
      8,
      'each block read once: a page stopping inside a read takes the kept read up',
    );
    assert.ok(
      widths.every((w) => w <= 2),
      `reads of about a page (500 at 300 a block: 2 blocks), not ${BLOCKS_PER_READ}: ${widths}`,
    );
    // A new listing reads the view again, at once or later.
    widths.length = 0;
    assert.equal(await listing(), 8 * perBlock);
    assert.equal(
      widths.reduce((s, w) => s + w, 0),
      8,
    );
    widths.length = 0;
    clock.advance(RECENT_READ_MS + 1);
    assert.equal(await listing(), 8 * perBlock);
    assert.equal(
      widths.reduce((s, w) => s + w, 0),
      8,
    );
  });
  it('never answers a new listing from a read kept for another: what was published since shows at once', async () => {
    // Issue 34: a listing made just before an owner published kept its read 30 s, and every listing
    // after it was answered from that read: the new allocation missed for ~25 s, not the 2 s interval.
    const clock = new ManualClock(0);
    const tier = new MemoryTier({ clock });
    const range = { pool: 'v', space: 's', subnet: '10.42.0.0/24', first: '10.42.0.1', last: '10.42.0.254' };
    const key = blockKey('v', '10.42.0.0/26');
    assert.ok(await tier.claim({ ...range, blockPrefix: 26 }, key, 'n'));
    const allocation = (i: number): Allocation => ({
      pool: key,
      address: `10.42.0.${i}`,
      network: 'x',
      containerID: `c${i}`,
      ifname: 'eth0',
      node: 'n',
      createdAt: 0,
    });
    const publish = (count: number) =>
      tier.publish({
        key,
        node: 'n',
        counts: { allocated: count, resting: 0 },
        allocations: Array.from({ length: count }, (_, i) => allocation(i + 1)),
        publishedAt: clock.now(),
      });
    await publish(1);
    const view = recentReads((filter, page) => tier.published(filter, page), clock);
    const listed = async (): Promise<string[]> =>
      (await clusterPage(view.forPage({ limit: 100 }), {}, { limit: 100 })).items.map((a) => a.containerID);
    assert.deepEqual(await listed(), ['c1']);
    await publish(2); // the owner publishes its next ADD; no time passes on the clock
    assert.deepEqual(await listed(), ['c1', 'c2'], 'the next listing shows what was published since');
  });
});
