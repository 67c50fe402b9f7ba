/**
 * `warren migrate` with nested ranges of one network_name: definition `outer` configures
 * 10.50.0.0/24, definition `inner` 10.50.0.64/26 inside it, both network_name `nest` (whereabouts
 * keeps an address unique across them with its OverlappingRangeIPReservations). Warren serves the
 * /26 from the /24's pool once the /24 is admitted (allocator/range-cover.ts), so:
 * - forward, every address whereabouts holds is recorded once, in the pool that serves it (the
 *   /24's, admitted first), and ADDs through either definition never hand out a migrated address
 *   (MemoryTier nodes that lend and adopt);
 * - back, each allocation Warren made, through either definition, lands in its own definition's
 *   IPPool, and every one in the network_name's reservations (the fake API server, the Kubernetes
 *   tier).
 * Also: an address two nested IPPools hold for two attachments is a problem, held in neither; a
 * range kept apart (`enable_overlapping_ranges: false`) is rolled back without reservations.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { collectHoldings } from '../../src/cli/migrate/holdings.ts';
import { KubeReader } from '../../src/cli/migrate/kube-reads.ts';
import { KubeWriter } from '../../src/cli/migrate/kube-writes.ts';
import { migrateWhereabouts } from '../../src/cli/migrate/migrate.ts';
import { MIGRATION_LENDER } from '../../src/cli/migrate/plan.ts';
import { exitStatusOf } from '../../src/cli/migrate/report.ts';
import { rollbackTargets } from '../../src/cli/migrate/rollback-plan.ts';
import { rollBackToWhereabouts } from '../../src/cli/migrate/rollback.ts';
import { rollbackExitStatus, rollbackText } from '../../src/cli/migrate/rollback-report.ts';
import { parseAttachmentDefinition } from '../../src/cli/migrate/whereabouts-objects.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseIP } from '../../src/ipam/address.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { openKubeTier } from '../../src/store/kubernetes/tier.ts';
import { LendingCluster } from '../allocator/lending/lending-nodes.ts';
import { type KubeObject, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  FixtureReader,
  type KubeList,
  type WhereaboutsCluster,
  whereaboutsCrds,
} from '../helpers/whereabouts-cluster.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';

const OUTER_POOL = '10.50.0.0/24@nest';
const NADS = 'network-attachment-definitions';

/** A definition of CNI network `network` (its object named `name`) with one whereabouts-keyed range. */
function definition(name: string, network: string, range: string, type: 'whereabouts' | 'warren') {
  const config = { cniVersion: '1.0.0', name: network, type: 'macvlan', ipam: { type, range, network_name: 'nest' } };
  return {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: 'default', uid: `uid-nad-${name}` },
    spec: { config: JSON.stringify(config) },
  };
}

/** What whereabouts holds: two addresses of each range, each in its IPPool and in one reservation. */
const HELD = [
  { pod: 'a-0', node: 'node-a', nad: 'outer', address: '10.50.0.10' },
  { pod: 'a-1', node: 'node-b', nad: 'outer', address: '10.50.0.200' },
  { pod: 'b-0', node: 'node-a', nad: 'inner', address: '10.50.0.70' },
  { pod: 'b-1', node: 'node-b', nad: 'inner', address: '10.50.0.71' },
] as const;

const lastOctet = (address: string): number => Number(address.split('/')[0]?.split('.')[3]);
const item = (o: Record<string, unknown>) => o as KubeList['items'][number];

function nestedCluster(): WhereaboutsCluster {
  const record = (h: (typeof HELD)[number]) => ({ id: `sandbox-${h.pod}`, podref: `default/${h.pod}`, ifname: 'net1' });
  const ipPool = (name: string, range: string, base: number, nad: string) =>
    item({
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'IPPool',
      metadata: { name, namespace: 'kube-system' },
      spec: {
        range,
        allocations: Object.fromEntries(
          HELD.filter((h) => h.nad === nad).map((h) => [String(lastOctet(h.address) - base), record(h)]),
        ),
      },
    });
  return {
    definitions: {
      items: [
        item(definition('outer', 'net-outer', '10.50.0.0/24', 'whereabouts')),
        item(definition('inner', 'net-inner', '10.50.0.64/26', 'whereabouts')),
      ],
    },
    ipPools: {
      items: [
        ipPool('nest-10.50.0.0-24', '10.50.0.0/24', 0, 'outer'),
        ipPool('nest-10.50.0.64-26', '10.50.0.64/26', 64, 'inner'),
      ],
    },
    reservations: {
      items: HELD.map((h) =>
        item({
          apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
          kind: 'OverlappingRangeIPReservation',
          metadata: { name: `nest-${h.address}`, namespace: 'kube-system' },
          spec: { containerid: `sandbox-${h.pod}`, podref: `default/${h.pod}`, ifname: 'net1' },
        }),
      ),
    },
    pods: {
      items: HELD.map((h) =>
        item({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: h.pod,
            namespace: 'default',
            uid: `uid-${h.pod}`,
            annotations: {
              'k8s.v1.cni.cncf.io/network-status': JSON.stringify([
                { name: `default/${h.nad}`, interface: 'net1', ips: [h.address] },
              ]),
            },
          },
          spec: { nodeName: h.node },
          status: { phase: 'Running' },
        }),
      ),
    },
  };
}

/** The range of definition `nad` as the agent reads it. */
function rangeOf(cluster: WhereaboutsCluster, nad: string): RangeSpec {
  const object = cluster.definitions.items.find((d) => d.metadata.name === nad);
  const range = parseAttachmentDefinition(object)?.ipam.ranges[0];
  assert.ok(range, nad);
  return range;
}

const clusters: LendingCluster[] = [];
const fakes: Array<{ stop(): Promise<void> }> = [];
after(async () => {
  for (const c of clusters) await c.close();
  for (const f of fakes) await f.stop();
});

describe('warren migrate whereabouts, nested ranges of one network_name', () => {
  it("records each address once, in the /24's pool that serves the /26 too, with no problem", async () => {
    // Before, the /26's addresses were granted in the /26's own pool, which the /24's pool, once
    // admitted, never looks in (a duplicate), and each of their reservations was a problem
    // ("its name reads as addresses of several ranges").
    const tier = new MemoryTier({ clock: new ManualClock(1_000) });
    const report = await migrateWhereabouts({
      reader: new FixtureReader(nestedCluster()),
      tier,
      dryRun: false,
      now: 1,
    });
    assert.deepEqual(report.problems, []);
    assert.deepEqual(
      report.entries.map((e) => `${e.pool} ${e.address} ${e.pod} ${e.outcome}`).sort(),
      HELD.map((h) => `${OUTER_POOL} ${h.address} default/${h.pod} recorded`).sort(),
    );
    assert.equal(exitStatusOf(report), 0);
    const granted = (await tier.requestsLentBy(MIGRATION_LENDER)).flatMap((r) =>
      r.grants.map((g) => `${r.pool} ${r.node} ${g.address} ${g.holder?.network}`),
    );
    assert.deepEqual(granted.sort(), HELD.map((h) => `${OUTER_POOL} ${h.node} ${h.address} net-${h.nad}`).sort());
    assert.deepEqual((await tier.spaces.read('v4@nest')).admitted, [OUTER_POOL], 'the /24 admitted, the /26 not');
  });

  it('a dry run plans the same pools and admits nothing', async () => {
    const tier = new MemoryTier({ clock: new ManualClock(1_000) });
    const report = await migrateWhereabouts({ reader: new FixtureReader(nestedCluster()), tier, dryRun: true, now: 1 });
    assert.deepEqual(report.problems, []);
    assert.deepEqual([...new Set(report.entries.map((e) => `${e.pool} ${e.outcome}`))], [`${OUTER_POOL} record`]);
    assert.deepEqual((await tier.spaces.read('v4@nest')).admitted, []);
    assert.deepEqual(await tier.requestsLentBy(MIGRATION_LENDER), []);
  });

  for (const first of ['inner', 'outer'] as const) {
    it(`ADDs through either definition, the ${first} first, until both are full, never hand out a migrated address`, async () => {
      // Before, the /26's addresses were granted in the /26's own pool, apart from the /24's that
      // serves the rest of the span: node-a's lending round refused .70 there (a one-address block
      // of another node), and the ADD finding the /26 full failed with that instead of POOL_EXHAUSTED.
      const fixtures = nestedCluster();
      const c = new LendingCluster(['node-a', 'node-b']);
      clusters.push(c);
      await migrateWhereabouts({ reader: new FixtureReader(fixtures), tier: c.tier, dryRun: false, now: 1 });
      await c.lendAll();
      const ranges = { outer: [rangeOf(fixtures, 'outer')], inner: [rangeOf(fixtures, 'inner')] };
      const handedOut: string[] = [];
      let i = 0;
      /** ADDs through `nad`, from each node in turn, `count` of them or until it is full (true). */
      const add = async (nad: 'outer' | 'inner', count: number): Promise<boolean> => {
        for (let n = 0; n < count; n++, i++) {
          const node = c.nodes[i % c.nodes.length];
          assert.ok(node);
          const owner = { network: `net-${nad}`, containerID: `new-${i}`, ifname: 'net1' };
          const outcome = await c.settle(node.allocator.allocate({ owner, ranges: ranges[nad] })).then(
            (a) => a,
            (error: unknown) => error,
          );
          if (isWarrenError(outcome) && outcome.code === 'POOL_EXHAUSTED') return true;
          const why = isWarrenError(outcome) ? `${outcome.code} ${outcome.message}` : String(outcome);
          assert.ok(
            Array.isArray(outcome) && outcome[0] !== undefined,
            `ADD ${i} through ${nad} on ${node.name}: ${why}`,
          );
          handedOut.push(outcome[0].allocation.address);
        }
        return false;
      };
      // One definition until it is full, then the other: 254 in all, 4 of them migrated. (Through the
      // /24 first, the /26 is full at once.) Before the claim took a migrated address over in one
      // transaction (454af76), the /24 first failed with TRY_AGAIN ("kept changing") part-way. The
      // /26 first, the /24 stops at its last address, not the ADD after: with the range split into
      // one-address blocks, a lending round then reports a migrated address it may not adopt
      // (allocator/lending/migrated.ts), which lendAll takes for an error.
      if (first === 'inner') {
        assert.equal(await add('inner', 100), true, 'the /26 filled up');
        assert.equal(await add('outer', 254 - HELD.length - handedOut.length), false);
      } else {
        assert.equal(await add('outer', 300), true, 'the /24 filled up');
        assert.equal(await add('inner', 10), true, 'the /26 is full at once');
      }
      for (const h of HELD) assert.ok(!handedOut.includes(h.address), `${h.address} handed out while ${h.pod} lives`);
      assert.equal(new Set(handedOut).size, handedOut.length, 'no address handed out twice');
      assert.equal(handedOut.length, 254 - HELD.length);
      await c.assertNoDuplicate(OUTER_POOL);
    });
  }
});

describe('warren migrate to-whereabouts, nested ranges of one network_name (fake API server)', () => {
  it("writes each allocation into its own definition's IPPool, and every one into the reservations", async () => {
    // Before, the rollback read Warren's holders by each definition's own range pool: the
    // allocations made through `inner` (served from the /24's pool) were written into `outer`'s
    // IPPool, and `inner`'s IPPool got nothing.
    const fake = await startFakeKubeApi({ crds: 'deploy' });
    fakes.push(fake);
    for (const crd of whereaboutsCrds()) fake.registerCrd(crd as never);
    fake.preload(NADS, [
      definition('outer', 'net-outer', '10.50.0.0/24', 'warren') as unknown as KubeObject,
      definition('inner', 'net-inner', '10.50.0.64/26', 'warren') as unknown as KubeObject,
    ]);
    const access = loadKubeConfig(fake.kubeconfigPath);
    const c = await LendingCluster.open(['node-a', 'node-b'], (clock) =>
      openKubeTier({ kubeConfig: access, namespace: 'warren-system', leaseSeconds: 15, clock }),
    );
    clusters.push(c);
    const fixtures = { definitions: { items: fake.objects(NADS) } } as unknown as WhereaboutsCluster;
    const ranges = { outer: [rangeOf(fixtures, 'outer')], inner: [rangeOf(fixtures, 'inner')] };
    // The /24 first (admitted whole), then the /26 (served from the /24's pool); one of outer's pods
    // asks for an address inside the /26's span: its definition, not the span, decides its IPPool.
    const pods = [
      { pod: 'a-0', nad: 'outer', node: 'node-a' },
      { pod: 'a-1', nad: 'outer', node: 'node-b', requested: '10.50.0.100' },
      { pod: 'b-0', nad: 'inner', node: 'node-a' },
      { pod: 'b-1', nad: 'inner', node: 'node-b' },
    ] as const;
    const got = new Map<string, string>();
    for (const p of pods) {
      const owner = { network: `net-${p.nad}`, containerID: `sandbox-${p.pod}`, ifname: 'net1' };
      const requested = 'requested' in p ? [parseIP(p.requested) ?? assert.fail()] : undefined;
      const request = { owner, ranges: ranges[p.nad], podNamespace: 'default', podName: p.pod, podUID: `uid-${p.pod}` };
      const [one] = await c.settle(
        c.node(p.node).allocator.allocate({ ...request, ...(requested ? { requested } : {}) }),
      );
      assert.ok(one !== undefined);
      assert.equal(one.allocation.pool.split('#')[0], OUTER_POOL, `${p.pod}'s address lives in the /24's pool`);
      got.set(p.pod, one.allocation.address);
    }
    assert.equal(got.get('a-1'), '10.50.0.100');
    for (const n of c.nodes) await n.store.flush();

    const report = await rollBackToWhereabouts({
      reader: new KubeReader(access),
      writer: new KubeWriter(access),
      tier: c.cluster,
      selection: { networks: [], definitions: [] },
      dryRun: false,
    });
    assert.equal(rollbackExitStatus(report), 0, rollbackText(report));
    const podsIn = (name: string) => {
      const spec = fake.object('ippools', name, 'kube-system')?.spec as
        | { range: string; allocations: Record<string, { podref: string }> }
        | undefined;
      const base = lastOctet(spec?.range ?? '0.0.0.0');
      return Object.entries(spec?.allocations ?? {})
        .map(([offset, r]) => `${r.podref} 10.50.0.${base + Number(offset)}`)
        .sort();
    };
    const expected = (nad: string) =>
      pods
        .filter((p) => p.nad === nad)
        .map((p) => `default/${p.pod} ${got.get(p.pod)}`)
        .sort();
    assert.deepEqual(podsIn('nest-10.50.0.0-24'), expected('outer'));
    assert.deepEqual(podsIn('nest-10.50.0.64-26'), expected('inner'));
    for (const p of pods) {
      const reservation = fake.object('overlappingrangeipreservations', `nest-${got.get(p.pod)}`, 'kube-system');
      assert.equal((reservation?.spec as { podref?: string } | undefined)?.podref, `default/${p.pod}`);
    }
    assert.deepEqual(
      report.entries.map((e) => `${e.ipPool} ${e.address} ${e.outcome}`).sort(),
      pods
        .map((p) => `${p.nad === 'outer' ? 'nest-10.50.0.0-24' : 'nest-10.50.0.64-26'} ${got.get(p.pod)} written`)
        .sort(),
    );
  });
});

describe('nested ranges in the plans (pure)', () => {
  it('reports an address two nested IPPools hold for two attachments, and holds it in neither', () => {
    // Before, each IPPool's record was held in its own range pool: both were granted, in two pools.
    const cluster = nestedCluster();
    const outer = cluster.ipPools.items[0]?.spec as { allocations: Record<string, unknown> };
    outer.allocations['70'] = { id: 'sandbox-other', podref: 'default/other', ifname: 'net1' };
    const { holdings, problems } = collectHoldings({
      definitions: cluster.definitions.items,
      ipPools: cluster.ipPools.items,
      reservations: cluster.reservations.items,
    });
    assert.ok(!holdings.some((h) => h.address === '10.50.0.70'));
    assert.ok(
      problems.some((p) => /10\.50\.0\.70 is also held by/.test(p.message)),
      JSON.stringify(problems),
    );
  });

  it('gives a range kept apart (enable_overlapping_ranges false) no reservations', () => {
    // Before, the key was read as "ignored" to decide this; Warren reads it now, so every range got them.
    const apart = definition('apart', 'net-apart', '10.60.0.0/24', 'warren');
    const config = JSON.parse(apart.spec.config) as { ipam: Record<string, unknown> };
    config.ipam.enable_overlapping_ranges = false;
    apart.spec.config = JSON.stringify(config);
    const { targets } = rollbackTargets([apart, definition('outer', 'net-outer', '10.50.0.0/24', 'warren')], {
      networks: [],
      definitions: [],
    });
    assert.deepEqual(
      targets.map((t) => `${t.ipPool} ${t.reservations}`),
      ['nest-10.60.0.0-24 false', 'nest-10.50.0.0-24 true'],
    );
  });
});
