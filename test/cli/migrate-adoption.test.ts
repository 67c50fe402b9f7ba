/**
 * What the migration is for, on real parts: after `warren migrate whereabouts` recorded the
 * fixtures' addresses (test/fixtures/whereabouts/cluster/), nodes of a two-tier cluster (each a
 * TieredStore on its own SQLite file, one MemoryTier, the allocator with lending, a ManualClock)
 * hold each migrated address as its pod's allocation on the pod's node once their lending round
 * adopted it, never hand it out to anyone else while the pod lives, and hand it out again once the
 * pod's release frees it.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { collectHoldings } from '../../src/cli/migrate/holdings.ts';
import { migrateWhereabouts } from '../../src/cli/migrate/migrate.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { LendingCluster } from '../allocator/lending/lending-nodes.ts';
import { EXPECTED_OUTCOMES, FixtureReader, loadWhereaboutsCluster } from '../helpers/whereabouts-cluster.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

/** The range `subnet` of the fixtures' definition of `network`, as the agent reads it. */
function rangeOf(network: string, subnet: string): RangeSpec {
  const cluster = loadWhereaboutsCluster();
  const { definitions } = collectHoldings({ definitions: cluster.definitions.items, ipPools: [], reservations: [] });
  const range = definitions.find((d) => d.network === network)?.ipam.ranges.find((r) => r.subnet === subnet);
  assert.ok(range, `${network} ${subnet}`);
  return range;
}

/** The container ID whereabouts recorded for `pod` (the fixtures' IPPools and reservations). */
function containerOf(pod: string): string {
  const cluster = loadWhereaboutsCluster();
  for (const p of cluster.ipPools.items) {
    const allocations = (p.spec as { allocations: Record<string, { id: string; podref: string }> }).allocations;
    const found = Object.values(allocations).find((a) => a.podref === pod);
    if (found !== undefined) return found.id;
  }
  const reservation = cluster.reservations.items.find((r) => (r.spec as { podref: string }).podref === pod);
  assert.ok(reservation, `whereabouts holds nothing for ${pod}`);
  return (reservation.spec as { containerid: string }).containerid;
}

const CASES = [
  {
    // /31 blocks: a loan ledger of one address is no block.
    name: "a /24 (the dual network's IPv4 range), its two migrated addresses on node-c's pods",
    network: 'dual',
    subnet: '10.30.0.0/24',
    nodes: ['node-c', 'node-a'],
    capacity: 254,
  },
  {
    // One-address blocks (ipam/range.ts adaptiveBlockPrefix): a migrated address's loan ledger key
    // is also its block's key; adopted, its block is claimed for the pod's node (allocator/lending/migrated.ts).
    name: "whereabouts' /28 shared by two nodes, one migrated address on each",
    network: 'macvlan-a',
    subnet: '192.168.2.224/28',
    nodes: ['node-a', 'node-b'],
    capacity: 14,
  },
] as const;

describe('after warren migrate whereabouts', () => {
  for (const t of CASES) {
    it(`${t.name}: never handed out while the pod lives, freed by its release`, async () => {
      const c = new LendingCluster(t.nodes);
      clusters.push(c);
      await migrateWhereabouts({ reader: new FixtureReader(), tier: c.tier, dryRun: false, now: 1_000 });
      const range = rangeOf(t.network, t.subnet);
      const ranges = [range];
      const migrated = EXPECTED_OUTCOMES.filter((o) => o.pool === range.pool && o.outcome === 'recorded');
      assert.ok(migrated.length > 0);

      // Each node's lending round adopts what was granted to it, as that pod's allocation.
      await c.lendAll();
      for (const o of migrated) {
        const node = c.node(o.node ?? '');
        const held = await node.allocator.held({ network: t.network, containerID: containerOf(o.pod) });
        assert.deepEqual(
          held.filter((a) => a.address === o.address).map((a) => `${a.podNamespace}/${a.podName} ${a.ifname}`),
          [`${o.pod} ${o.holder?.ifname}`],
          `${o.address} held on ${o.node}`,
        );
      }

      // Every other address is handed out, from every node, and the migrated ones never; then the
      // range is full (an ADD waiting for grants meanwhile holds no lock the lending rounds need).
      const handedOut: string[] = [];
      for (let i = 0; i < t.capacity - migrated.length; i++) {
        const node = c.nodes[i % c.nodes.length];
        assert.ok(node);
        const owner = { network: t.network, containerID: `new-${i}`, ifname: 'net1' };
        const outcome = await c.settle(node.allocator.allocate({ owner, ranges })).then(
          (a) => a,
          (error: unknown) => error,
        );
        assert.ok(
          !isWarrenError(outcome),
          `ADD ${i} on ${node.name}: ${isWarrenError(outcome) ? outcome.message : ''}`,
        );
        assert.ok(Array.isArray(outcome) && outcome[0] !== undefined);
        handedOut.push(outcome[0].allocation.address);
      }
      const extra = { network: t.network, containerID: 'one-too-many', ifname: 'net1' };
      const first = c.nodes[0];
      assert.ok(first);
      await assert.rejects(c.settle(first.allocator.allocate({ owner: extra, ranges })), { code: 'POOL_EXHAUSTED' });
      for (const o of migrated)
        assert.ok(!handedOut.includes(o.address), `${o.address} handed out while ${o.pod} lives`);
      assert.equal(new Set(handedOut).size, t.capacity - migrated.length);
      await c.assertNoDuplicate(range.pool);

      // Once the agents adopted the grants and published their blocks, running the migration again
      // finds every address held for its own attachment: nothing recorded twice, no conflict.
      for (const n of c.nodes) await n.store.flush();
      const again = await migrateWhereabouts({ reader: new FixtureReader(), tier: c.tier, dryRun: false, now: 2_000 });
      assert.deepEqual(
        again.entries.filter((e) => e.outcome !== 'pod-gone' && e.outcome !== 'stale').map((e) => e.outcome),
        EXPECTED_OUTCOMES.filter((o) => o.outcome === 'recorded').map(() => 'already-recorded'),
        JSON.stringify(again.entries.filter((e) => e.outcome !== 'already-recorded')),
      );

      // The first migrated pod goes: its release frees its address, which the next ADD gets.
      const [gone] = migrated;
      assert.ok(gone?.node !== undefined);
      const node = c.node(gone.node);
      const released = await node.allocator.release({ network: t.network, containerID: containerOf(gone.pod) });
      // (Its other addresses, of the network's other ranges, go with it.)
      assert.ok(
        released.some((a) => a.address === gone.address),
        released.map((a) => a.address).join(' '),
      );
      const owner = { network: t.network, containerID: 'after', ifname: 'net1' };
      const [next] = await c.settle(node.allocator.allocate({ owner, ranges }));
      assert.equal(next?.allocation.address, gone.address);
      await c.assertNoDuplicate(range.pool);
    });
  }
});

describe('a migrated address adopted before its node knew how the range is split', () => {
  it('is never handed out again when that node claims the block holding it, and its release frees it once', async () => {
    // node-a's first lending round adopts db-0's 10.20.0.8 into a loan ledger (node-a had not yet
    // served the range, so it did not know the split); its first ADD then claims the block holding
    // 10.20.0.8. The claim used to skip the address (recorded in the loan ledger) and leave it free
    // in the block: the ADD handed it out a second time.
    const c = new LendingCluster(['node-a', 'node-b', 'node-c']);
    clusters.push(c);
    await migrateWhereabouts({ reader: new FixtureReader(), tier: c.tier, dryRun: false, now: 1_000 });
    const ranges = [rangeOf('blue-net', '10.20.0.0/24')];
    await c.lendAll();
    const node = c.node('node-a');
    const handedOut: string[] = [];
    for (let i = 0; i < 4; i++) {
      const owner = { network: 'blue-net', containerID: `new-${i}`, ifname: 'net1' };
      const [one] = await c.settle(node.allocator.allocate({ owner, ranges }));
      assert.ok(one !== undefined);
      handedOut.push(one.allocation.address);
      await c.lendAll();
    }
    assert.ok(!handedOut.includes('10.20.0.8'), `10.20.0.8 handed out while team-b/db-0 lives: ${handedOut.join(' ')}`);
    await c.assertNoDuplicate(ranges[0]?.pool ?? '');
    const db0 = containerOf('team-b/db-0');
    const held = (await node.allocator.held({ network: 'blue-net', containerID: db0 })).map((a) => a.address);
    assert.deepEqual(held, ['10.20.0.8'], "db-0's address recorded once on node-a");
    const released = await node.allocator.release({ network: 'blue-net', containerID: db0 });
    assert.deepEqual(
      released.map((a) => a.address),
      ['10.20.0.8'],
    );
    const owner = { network: 'blue-net', containerID: 'after', ifname: 'net1' };
    const [next] = await c.settle(node.allocator.allocate({ owner, ranges }));
    assert.ok(next !== undefined);
    await c.assertNoDuplicate(ranges[0]?.pool ?? '');
  });
});
