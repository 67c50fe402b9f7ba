/**
 * Issue 36's idle budget, asserted per node at 50 nodes: simulated nodes (bench/scale/: each the
 * agent's own two-tier store with its own client and SQLite file, its allocator and cluster upkeep)
 * against the in-process fake API server, one ManualClock for all, each holding a block of one
 * shared range. After start-up, 1,000 s of clock with nothing to do cost each node no LIST at all,
 * and no write at all but for a node that holds a cluster chore, whose Lease renewals (at most one
 * per 100 s) are the cluster's only writes (liveness on demand: an idle agent renews nothing, a
 * lapsed Lease is pinged when it matters; src/store/kubernetes/lease-ping.ts). The counts are the
 * fake's, attributed to each node by its own token, so they are exact and the same on every
 * machine. On failure the message is the window's breakdown per node per minute by verb and
 * resource, and the nodes over the budget.
 *
 * Before issue 36's watches this test fails (an idle node polls: ~54 requests a minute, 42 of them
 * LISTs, and renews its Lease every 10 s); before liveness on demand, every node wrote its Lease
 * once per 100 s (50 nodes: 0.5 writes/s; 5,000 nodes: 50/s). BENCHMARKS.md has the figures.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { SCALE_NAMESPACE } from '../../../bench/scale/simulated-node.ts';
import { nodeLeaseName } from '../../../src/store/kubernetes/names.ts';
import { DEFAULT_SETTLE_MS } from '../../../src/store/tiered/publisher.ts';
import { holdBlocks, idleWindow } from '../../../bench/scale/scenarios.ts';
import { type WindowCounts, describeWindow, idleBudgetBreaches, listsIn } from '../../../bench/scale/window-counts.ts';

const NODES = 50;
const IDLE_SECONDS = 1000;
/** A chore one node holds through the window: its holder renews its Lease, the others write nothing. */
const CHORE = 'idle-budget-chore';
const WRITES = /^(create|update|patch|delete|deletecollection) /;

describe(`${NODES} idle nodes on one shared range (issue 36's idle budget)`, () => {
  let cluster: ScaleCluster;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: NODES, range: '10.0.0.0/16', blockSize: 28 });
    await holdBlocks(cluster, 2);
    // Start-up's own requests (first claims, publications, the first chores) end before the window,
    // and so does the write naming the first ADDs' containers: their addresses were announced with
    // the claim (tiered/claim-announcements.ts), so they are named once the settle interval is over.
    await cluster.advance(30_000, 1000);
    await cluster.advance(DEFAULT_SETTLE_MS, 10_000);
    const holder = cluster.nodes[0]?.store.cluster?.membership;
    assert.equal(await holder?.claimTask(CHORE), true, 'the first node holds a chore');
  });
  after(async () => {
    await cluster?.stop();
  });

  let idle: WindowCounts | undefined;

  it('an idle node makes no LIST and at most one write per 100 s of clock', async (t) => {
    idle = await idleWindow(cluster, IDLE_SECONDS);
    const table = describeWindow(idle);
    t.diagnostic(table);
    assert.equal(cluster.unsettled, 0, 'every request of the window was answered');
    const breaches = idleBudgetBreaches(idle);
    const shown = breaches.slice(0, 5).join('\n');
    assert.equal(listsIn(idle), 0, `LISTs in the idle window:\n${table}\nnodes over the budget:\n${shown}`);
    assert.deepEqual(breaches, [], `nodes over the idle budget:\n${shown}\n${table}`);
  });

  it('no node writes but the chore holder, which renews its Lease at most once per 100 s', () => {
    const holders = new Set(
      (cluster.api.fake?.objects('leases') ?? [])
        .filter((l) => l.metadata.labels?.['warren.dev/lease'] === 'task')
        .map((l) => String((l.spec as { holderIdentity?: string } | undefined)?.holderIdentity)),
    );
    assert.deepEqual([...holders], [cluster.nodes[0]?.name], 'one chore, one holder');
    const writers = [...(idle?.perNode ?? [])].flatMap(([node, counts]) => {
      const writes = [...counts].filter(([kind]) => WRITES.test(kind));
      const total = writes.reduce((n, [, count]) => n + count, 0);
      const allowed = holders.has(node) ? Math.floor(IDLE_SECONDS / 100) : 0;
      return total > allowed ? [`${node}: ${writes.map(([k, n]) => `${n} ${k}`).join(', ')} (budget ${allowed})`] : [];
    });
    assert.deepEqual(writers, [], 'nodes holding no chore write nothing; the holder renews at most once per 100 s');
    const renewals = idle?.perNode.get(cluster.nodes[0]?.name ?? '')?.get('update leases') ?? 0;
    assert.ok(renewals >= 1, `the chore holder's upkeep runs: it renewed its Lease (${renewals} times)`);
  });

  it('keeps every node announced through the window: silence is not a lost name', () => {
    // Nothing renews an idle node's Lease: it stays held by its instance, lapsed, and the node serves.
    const lost = cluster.nodes.flatMap((node) => {
      const lease = cluster.api.fake?.object('leases', nodeLeaseName(node.name), SCALE_NAMESPACE);
      const holder = (lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
      const problem = node.problem();
      return holder !== undefined && problem === undefined ? [] : [`${node.name}: held by ${holder}, ${problem}`];
    });
    assert.deepEqual(lost, [], 'nodes whose announcement was not kept');
  });

  it('no address is held twice across every node', async () => {
    const { held, duplicates } = await cluster.audit();
    assert.deepEqual(duplicates, []);
    assert.equal(held, NODES * 2);
  });
});
