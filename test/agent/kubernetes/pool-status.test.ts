/**
 * The WarrenPools' status: written by the one agent holding the chore, from the blocks the agents
 * published (on the memory cluster tier, with its real chore election), only when what it shows
 * changed, with the problem of a pool that cannot be used instead of figures, and at the interval on
 * the injected clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { POOL_STATUS_TASK, PoolStatusWriter } from '../../../src/agent/kubernetes/pool-status.ts';
import { PoolCatalog } from '../../../src/sources/kubernetes/pool-catalog.ts';
import { MemoryTier } from '../../store/tiered/memory-tier.ts';
import { silentLogger } from '../../helpers/logger.ts';

const RANGE = { space: 's', first: '', last: '', blockPrefix: 28 };

async function setup() {
  const clock = new ManualClock(1_700_000_000_000);
  const tier = new MemoryTier({ clock });
  const other = tier.session();
  await tier.membership.announce('n1', { since: clock.now(), version: 'test' });
  await other.membership.announce('n2', { since: clock.now(), version: 'test' });
  const catalog = new PoolCatalog();
  catalog.observe({
    kind: 'listed',
    objects: [
      {
        metadata: { name: 'gold', uid: 'u-gold', generation: 3, resourceVersion: '7' },
        spec: { ranges: [{ range: '10.80.0.0/24' }] },
      },
      { metadata: { name: 'bad', uid: 'u-bad', generation: 1 }, spec: { ranges: [{ range: 'nope' }] } },
    ],
  });
  const pool = '10.80.0.0/24@warrenpool:gold';
  const range = { ...RANGE, pool, subnet: '10.80.0.0/24' };
  // Two nodes' blocks, as they publish them.
  for (const [node, cidr, allocated] of [
    ['n1', '10.80.0.0/28', 3],
    ['n2', '10.80.0.16/28', 2],
  ] as const) {
    const key = `${pool}#${cidr}`;
    await tier.claim(range, key, node);
    await tier.publish({ key, node, counts: { allocated, resting: 0 }, allocations: [], publishedAt: clock.now() });
  }
  const writes: Array<Record<string, unknown>> = [];
  const writer = (t: MemoryTier) =>
    new PoolStatusWriter({
      catalog,
      tier: t,
      write: async (object) => {
        writes.push(object);
        return true;
      },
      clock,
      logger: silentLogger,
      intervalMs: 30_000,
    });
  return { clock, tier, other, catalog, writes, writer };
}

describe('PoolStatusWriter', () => {
  it("writes each pool's capacity and use from the published blocks, once, by the chore's holder only", async () => {
    const t = await setup();
    const mine = t.writer(t.tier);
    assert.equal(await t.other.membership.claimTask(POOL_STATUS_TASK), true, 'n2 holds the chore');
    assert.equal(await mine.round(), 0, 'not the holder: writes nothing');
    assert.equal(t.writes.length, 0);

    const theirs = t.writer(t.other);
    assert.equal(await theirs.round(), 2);
    const byName = new Map(t.writes.map((w) => [(w.metadata as { name: string }).name, w.status]));
    assert.deepEqual(byName.get('gold'), {
      capacity: '254',
      capacityText: '254',
      used: 5,
      resting: 0,
      lent: 0,
      free: '249',
      freeText: '249',
      blocks: 2,
      nodes: 2,
      observedGeneration: 3,
      updatedAt: new Date(t.clock.now()).toISOString(),
    });
    assert.match(String((byName.get('bad') as { problem: string }).problem), /^WarrenPool bad: spec.ranges\[0\].range/);
    const gold = t.writes.find((w) => (w.metadata as { name: string }).name === 'gold');
    assert.equal(
      (gold?.metadata as { resourceVersion?: string } | undefined)?.resourceVersion,
      '7',
      'at the version seen',
    );

    // The watch brings the statuses back: nothing changed, nothing written.
    t.catalog.observe({ kind: 'listed', objects: t.writes.map((w) => ({ ...w })) });
    t.writes.length = 0;
    t.clock.advance(30_000);
    assert.equal(await theirs.round(), 0);
    assert.equal(t.writes.length, 0);
  });

  it("counts a lent address once in use (the lender's placeholder, not the borrower's loan publication too), and says it is lent", async () => {
    const t = await setup();
    // n1 lent one of its three addresses (its placeholder is one of the three); n2 publishes the loan.
    const pool = '10.80.0.0/24@warrenpool:gold';
    const key = `${pool}#10.80.0.5/32`;
    assert.ok(t.tier.publishLoan);
    await t.other.publishLoan?.({
      key,
      node: 'n2',
      loan: true,
      counts: { allocated: 1, resting: 0 },
      allocations: [],
      publishedAt: t.clock.now(),
    });
    const theirs = t.writer(t.other);
    assert.equal(await t.other.membership.claimTask(POOL_STATUS_TASK), true);
    await theirs.round();
    const gold = t.writes.find((w) => (w.metadata as { name: string }).name === 'gold');
    assert.deepEqual(
      { ...(gold?.status as Record<string, unknown>), updatedAt: undefined },
      {
        capacity: '254',
        capacityText: '254',
        used: 5,
        resting: 0,
        lent: 1,
        free: '249',
        freeText: '249',
        blocks: 2,
        nodes: 2,
        observedGeneration: 3,
        updatedAt: undefined,
      },
    );
  });

  it('asks for nothing, not even the chore, while the cluster has no pools', async () => {
    const t = await setup();
    t.catalog.observe({ kind: 'listed', objects: [] });
    const calls = new Map(t.tier.calls);
    assert.equal(await t.writer(t.tier).round(), 0);
    assert.deepEqual(new Map(t.tier.calls), calls);
    assert.equal(await t.other.membership.claimTask(POOL_STATUS_TASK), true, 'nobody took the chore');
  });

  it('runs a round per interval on the injected clock until aborted', async () => {
    const t = await setup();
    const w = t.writer(t.tier);
    const abort = new AbortController();
    const running = w.run(abort.signal);
    assert.equal(w.status().rounds, 0, 'the first round waits an interval');
    t.clock.advance(30_000);
    const deadline = Date.now() + 5_000;
    // Until the round ended (it starts when the clock fires; its writes come after its reads).
    while (w.status().chore.lastRunAt === undefined && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    assert.equal(w.status().rounds, 1);
    assert.equal(w.status().written, 2);
    abort.abort();
    await running;
  });
});
