/**
 * `warren migrate whereabouts`, planned and recorded on a memory cluster tier, from whereabouts'
 * own objects (test/fixtures/whereabouts/cluster/): which addresses are recorded, in which range
 * pool and for which attachment; that a second run records nothing twice; that an address Warren
 * holds for someone else is reported and never overwritten; that a dry run writes nothing.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runCli } from '../../src/cli/main.ts';
import { migrateCommand } from '../../src/cli/migrate-command.ts';
import { collectHoldings } from '../../src/cli/migrate/holdings.ts';
import { migrateWhereabouts } from '../../src/cli/migrate/migrate.ts';
import { MIGRATION_LENDER } from '../../src/cli/migrate/plan.ts';
import { exitStatusOf, reportJson, reportText } from '../../src/cli/migrate/report.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';
import { removeDir, tempDir } from '../helpers/processes.ts';
import { EXPECTED_OUTCOMES, FixtureReader, loadWhereaboutsCluster } from '../helpers/whereabouts-cluster.ts';

const NOW = 1_790_000_000_000;

function newTier(): MemoryTier {
  return new MemoryTier({ clock: new ManualClock(NOW) });
}

function writes(tier: MemoryTier): number {
  return (tier.calls.get('ask') ?? 0) + (tier.calls.get('updateRequest') ?? 0) + (tier.calls.get('publish') ?? 0);
}

async function migrate(tier: ClusterTier, reader = new FixtureReader(), dryRun = false) {
  return await migrateWhereabouts({ reader, tier, dryRun, now: NOW });
}

const outcomes = (report: Awaited<ReturnType<typeof migrate>>) =>
  report.entries
    .map((e) => ({ pool: e.pool, address: e.address, pod: e.pod, node: e.node, outcome: e.outcome }))
    .sort((a, b) => (a.address < b.address ? -1 : 1));

const expected = (outcome?: (o: (typeof EXPECTED_OUTCOMES)[number]) => string) =>
  EXPECTED_OUTCOMES.map((o) => ({
    pool: o.pool,
    address: o.address,
    pod: o.pod,
    node: o.node,
    outcome: outcome?.(o) ?? o.outcome,
  })).sort((a, b) => (a.address < b.address ? -1 : 1));

describe('warren migrate whereabouts: planning', () => {
  it("reads the fixtures' objects with no problem and places every held address in Warren's range pool", () => {
    const cluster = loadWhereaboutsCluster();
    const { holdings, problems, definitions } = collectHoldings({
      definitions: cluster.definitions.items,
      ipPools: cluster.ipPools.items,
      reservations: cluster.reservations.items,
    });
    assert.deepEqual(problems, []);
    // host-local's definition is not whereabouts'; the other four are.
    assert.deepEqual(definitions.map((d) => d.network).sort(), ['blue-net', 'dual', 'macvlan-a', 'warren-net']);
    assert.deepEqual(
      holdings.map((h) => `${h.pool} ${h.address}`).sort(),
      EXPECTED_OUTCOMES.map((o) => `${o.pool} ${o.address}`).sort(),
    );
  });

  it('a dry run plans the grants and writes nothing', async () => {
    const tier = newTier();
    const report = await migrate(tier, new FixtureReader(), true);
    assert.deepEqual(
      outcomes(report),
      expected((o) => (o.outcome === 'recorded' ? 'record' : o.outcome)),
    );
    assert.equal(writes(tier), 0);
    assert.deepEqual(await tier.requestsLentBy(MIGRATION_LENDER), []);
    assert.equal(exitStatusOf(report), 0);
    assert.match(reportText(report), /dry run: nothing is written/);
    assert.match(reportText(report), /192\.168\.2\.225 +default\/web-0 +node-a +would record/);
  });

  it('records each address as a grant in the request of its range and node, for its attachment', async () => {
    const tier = newTier();
    const report = await migrate(tier);
    assert.deepEqual(outcomes(report), expected());
    assert.equal(exitStatusOf(report), 0);
    for (const o of EXPECTED_OUTCOMES) {
      if (o.node === undefined || o.holder === undefined) continue;
      const request = await tier.requestOf(o.pool, o.node);
      const grant = request?.grants.find((g) => g.address === o.address);
      assert.ok(grant !== undefined, `${o.address} granted to ${o.node} in ${o.pool}`);
      assert.equal(grant.lender, MIGRATION_LENDER);
      assert.equal(request?.wanted, 0);
      const pod = loadWhereaboutsCluster().pods.items.find(
        (p) => `${p.metadata.namespace}/${p.metadata.name}` === o.pod,
      );
      assert.deepEqual(
        {
          network: grant.holder?.network,
          ifname: grant.holder?.ifname,
          pod: `${grant.holder?.podNamespace}/${grant.holder?.podName}`,
          uid: grant.holder?.podUID,
          node: grant.holder?.node,
          pool: grant.holder?.pool,
        },
        { ...o.holder, pod: o.pod, uid: pod?.metadata.uid, node: o.node, pool: o.pool },
      );
    }
    // Nothing for the pod that is gone or the address its pod no longer holds.
    const granted = (await tier.requestsLentBy(MIGRATION_LENDER)).flatMap((r) => r.grants.map((g) => g.address));
    assert.ok(!granted.includes('192.168.2.226') && !granted.includes('10.20.0.9'));
  });

  it('running twice records nothing twice', async () => {
    const tier = newTier();
    await migrate(tier);
    const before = await tier.requestsLentBy(MIGRATION_LENDER);
    const updates = tier.calls.get('updateRequest');
    const again = await migrate(tier);
    assert.deepEqual(
      outcomes(again),
      expected((o) => (o.outcome === 'recorded' ? 'already-recorded' : o.outcome)),
    );
    assert.equal(tier.calls.get('updateRequest'), updates);
    assert.deepEqual(await tier.requestsLentBy(MIGRATION_LENDER), before);
    assert.equal(exitStatusOf(again), 0);
  });

  it("reports an address Warren already gave someone else as a conflict and leaves that holder's record alone", async () => {
    const tier = newTier();
    // An agent on node-b already holds 10.40.0.7 (a published allocation of its block)...
    const range = {
      pool: '10.40.0.0/24',
      space: 'space:v4:',
      subnet: '10.40.0.0/24',
      first: '10.40.0.1',
      last: '10.40.0.254',
      blockPrefix: 26,
    };
    await tier.pinRange(range);
    const claim = await tier.claim(range, '10.40.0.0/24#10.40.0.0/26', 'node-b');
    assert.ok(claim !== undefined);
    const theirs = {
      pool: '10.40.0.0/24#10.40.0.0/26',
      address: '10.40.0.7',
      network: 'warren-net',
      containerID: 'c0ffee',
      ifname: 'eth1',
      node: 'node-b',
      createdAt: NOW - 1000,
    };
    await tier.publish({
      key: claim.key,
      node: 'node-b',
      counts: { allocated: 1, resting: 0 },
      allocations: [theirs],
      publishedAt: NOW,
    });
    // ...and node-e lent 10.30.0.10, of its block, to node-d.
    const dual = { ...range, pool: '10.30.0.0/24', subnet: '10.30.0.0/24', first: '10.30.0.1', last: '10.30.0.254' };
    await tier.pinRange(dual);
    assert.ok(await tier.claim(dual, '10.30.0.0/24#10.30.0.0/26', 'node-e'));
    const asked = await tier.ask('10.30.0.0/24', 'node-d', 1);
    await tier.updateRequest(asked, [{ address: '10.30.0.10', lender: 'node-e' }], 0);
    const report = await migrate(tier);
    const conflicts = report.entries.filter((e) => e.outcome === 'conflict');
    assert.deepEqual(conflicts.map((e) => e.address).sort(), ['10.30.0.10', '10.40.0.7']);
    assert.match(conflicts.find((e) => e.address === '10.40.0.7')?.detail ?? '', /container c0ffee.*node node-b/);
    assert.match(conflicts.find((e) => e.address === '10.30.0.10')?.detail ?? '', /node-e to node node-d/);
    assert.equal(exitStatusOf(report), 1);
    assert.match(reportText(report), /do not switch the definitions/);
    // Never overwritten, never granted beside.
    assert.deepEqual((await tier.published({ pool: '10.40.0.0/24' })).items[0]?.allocations, [theirs]);
    assert.deepEqual((await tier.requestOf('10.30.0.0/24', 'node-d'))?.grants, [
      { address: '10.30.0.10', lender: 'node-e' },
    ]);
    assert.equal((await tier.requestOf('10.40.0.0/24', 'node-a'))?.grants.length ?? 0, 0);
    assert.ok(!(await tier.requestOf('10.30.0.0/24', 'node-c'))?.grants.some((g) => g.address === '10.30.0.10'));
    // The other addresses are recorded all the same.
    assert.ok((await tier.requestOf('10.30.0.0/24', 'node-c'))?.grants.some((g) => g.address === '10.30.0.11'));
    const json = JSON.parse(reportJson(report)) as { counts: Record<string, number> };
    assert.equal(json.counts.conflict, 2);
  });

  it("keeps an agent's grants in the same request and its wanted count when it records beside them", async () => {
    const tier = newTier();
    const asked = await tier.ask('10.30.0.0/24', 'node-c', 3);
    await tier.updateRequest(
      asked,
      [{ address: '10.30.0.99', lender: 'node-x', block: '10.30.0.0/24#10.30.0.64/26' }],
      3,
    );
    await migrate(tier);
    const request = await tier.requestOf('10.30.0.0/24', 'node-c');
    assert.equal(request?.wanted, 3);
    assert.deepEqual(request?.grants.map((g) => g.address).sort(), ['10.30.0.10', '10.30.0.11', '10.30.0.99']);
  });

  it('reads each pod once however many addresses it holds', async () => {
    const reader = new FixtureReader();
    await migrate(newTier(), reader, true);
    // web-0, web-1, web-2, db-0, db-1, app-0 (two addresses), app-1, legacy-0.
    assert.equal(reader.podReads, 8);
  });
});

describe('warren migrate: the command line', () => {
  function io() {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t), env: {} } };
  }

  it('refuses to migrate from anything but whereabouts, as a usage error', async () => {
    for (const argv of [['migrate'], ['migrate', 'calico'], ['migrate', 'whereabouts', 'extra']]) {
      const t = io();
      assert.equal(await runCli(argv, t.io), 2, argv.join(' '));
      assert.match(t.err.join(''), /migrate whereabouts/);
    }
  });

  it('prints the report and exits by it, closing the tier', async () => {
    const dir = tempDir('warren-migrate-');
    try {
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
          users: [{ name: 'u', user: { token: 't' } }],
          contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
          'current-context': 'x',
        }),
      );
      const tier = newTier();
      let closed = false;
      tier.close = async () => {
        closed = true;
      };
      const opened: string[] = [];
      const t = io();
      const code = await migrateCommand(
        ['whereabouts', '--kubeconfig', kubeconfig, '--namespace', 'ns-1', '--json'],
        t.io,
        {
          clock: new ManualClock(NOW),
          openTier: async (o) => {
            opened.push(o.namespace);
            return tier;
          },
          reader: () => new FixtureReader(),
        },
      );
      assert.equal(code, 0, t.err.join(''));
      assert.deepEqual(opened, ['ns-1']);
      assert.ok(closed);
      const report = JSON.parse(t.out.join('')) as { dryRun: boolean; counts: Record<string, number> };
      assert.equal(report.dryRun, false);
      assert.equal(report.counts.recorded, EXPECTED_OUTCOMES.filter((o) => o.outcome === 'recorded').length);
    } finally {
      removeDir(dir);
    }
  });
});
