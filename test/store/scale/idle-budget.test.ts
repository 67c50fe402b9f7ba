/**
 * Issue 36's idle budget, asserted per node at 50 nodes: simulated nodes (bench/scale/: each the
 * agent's own two-tier store with its own client and SQLite file, its allocator and cluster upkeep)
 * against the in-process fake API server, one ManualClock for all, each holding a block of one
 * shared range. After start-up, 200 s of clock with nothing to do cost each node no LIST at
 * all and at most one write per 100 s; the counts are the fake's, attributed to each node by its
 * own token, so they are exact and the same on every machine. On failure the message is the
 * window's breakdown per node per minute by verb and resource, and the nodes over the budget.
 *
 * Before issue 36's watches this test fails (an idle node polls: ~54 requests a minute, 42 of them
 * LISTs, and renews its Lease every 10 s); BENCHMARKS.md has the figures.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { SCALE_NAMESPACE } from '../../../bench/scale/simulated-node.ts';
import { nodeLeaseName } from '../../../src/store/kubernetes/names.ts';
import { holdBlocks, idleWindow } from '../../../bench/scale/scenarios.ts';
import { describeWindow, idleBudgetBreaches, listsIn } from '../../../bench/scale/window-counts.ts';

const NODES = 50;
const IDLE_SECONDS = 200;

describe(`${NODES} idle nodes on one shared range (issue 36's idle budget)`, () => {
  let cluster: ScaleCluster;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: NODES, range: '10.0.0.0/16', blockSize: 28 });
    await holdBlocks(cluster, 2);
    // Start-up's own requests (first claims, publications, the first chores) end before the window.
    await cluster.advance(30_000, 1000);
  });
  after(async () => {
    await cluster?.stop();
  });

  it('an idle node makes no LIST and at most one write per 100 s of clock', async (t) => {
    const idle = await idleWindow(cluster, IDLE_SECONDS);
    const table = describeWindow(idle);
    t.diagnostic(table);
    assert.equal(cluster.unsettled, 0, 'every request of the window was answered');
    const breaches = idleBudgetBreaches(idle);
    const shown = breaches.slice(0, 5).join('\n');
    assert.equal(listsIn(idle), 0, `LISTs in the idle window:\n${table}\nnodes over the budget:\n${shown}`);
    assert.deepEqual(breaches, [], `nodes over the idle budget:\n${shown}\n${table}`);
  });

  it('keeps every node announced through the window: silence is not a stopped upkeep', async () => {
    // The budget is a ceiling; a node that wrote nothing because its upkeep hung would meet it. Each
    // node renews its Lease once a third of the lease has passed, so each was renewed within that
    // (and one upkeep interval) of the window's end, and none is refused or halted.
    const now = cluster.clock.now();
    const late = cluster.nodes.flatMap((node) => {
      const lease = cluster.api.fake?.object('leases', nodeLeaseName(node.name), SCALE_NAMESPACE);
      const spec = lease?.spec as { renewTime?: string; leaseDurationSeconds?: number } | undefined;
      const renewed = spec?.renewTime === undefined ? Number.NaN : Date.parse(spec.renewTime);
      const third = ((spec?.leaseDurationSeconds ?? 0) * 1000) / 3;
      const problem = node.problem();
      return renewed >= now - third - 10_000 && problem === undefined
        ? []
        : [`${node.name}: renewed ${(now - renewed) / 1000} s ago${problem === undefined ? '' : `, ${problem}`}`];
    });
    assert.deepEqual(late, [], 'nodes whose announcement was not kept');
  });

  it('no address is held twice across every node', async () => {
    const { held, duplicates } = await cluster.audit();
    assert.deepEqual(duplicates, []);
    assert.equal(held, NODES * 2);
  });
});
