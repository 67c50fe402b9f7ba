/**
 * `warren migrate to-whereabouts`, the way back, on the fake API server serving whereabouts' CRDs
 * and Warren's (test/fixtures/whereabouts/cluster/), with nodes of the Kubernetes tier that lend
 * and adopt (LendingCluster): forward (`migrate whereabouts`), the definitions switched to warren,
 * ADDs on Warren, back; whereabouts' objects, read back by the reader the forward migration uses,
 * hold exactly what Warren held (a second forward migration plans exactly Warren's allocations).
 * Also: a dry run writes nothing; an address whereabouts holds for another live pod is reported
 * and left alone, one a gone pod's record holds is replaced; Warren's bookkeeping is not written
 * as a pod's; and the README's rehearsal ("Migrate from whereabouts", "Rehearse the way back"),
 * step by step.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { collectHoldings } from '../../src/cli/migrate/holdings.ts';
import { KubeReader } from '../../src/cli/migrate/kube-reads.ts';
import { type KubeObjectJson, KubeWriter } from '../../src/cli/migrate/kube-writes.ts';
import { migrateWhereabouts } from '../../src/cli/migrate/migrate.ts';
import { runCli } from '../../src/cli/main.ts';
import { migrateCommand } from '../../src/cli/migrate-command.ts';
import {
  WHEREABOUTS_API_VERSION,
  mergeIpPool,
  mergeReservation,
  reservationNameOf,
} from '../../src/cli/migrate/rollback-plan.ts';
import { type RollbackOptions, rollBackToWhereabouts } from '../../src/cli/migrate/rollback.ts';
import { rollbackExitStatus, rollbackText } from '../../src/cli/migrate/rollback-report.ts';
import { readWarrenHeld } from '../../src/cli/migrate/warren-held.ts';
import { parseAttachmentDefinition } from '../../src/cli/migrate/whereabouts-objects.ts';
import { isPlainObject } from '../../src/core/validate.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { openKubeTier } from '../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, type KubeObject, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { loadWhereaboutsCluster, whereaboutsCrds } from '../helpers/whereabouts-cluster.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';
import { LendingCluster } from '../allocator/lending/lending-nodes.ts';
import { ManualClock } from '../../src/core/clock.ts';

const NODES = ['node-a', 'node-b', 'node-c'];
const WHEREABOUTS_GROUP = '/apis/whereabouts.cni.cncf.io/';
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const NADS = 'network-attachment-definitions';

const opened: Array<{ fake: FakeKubeApi; cluster: LendingCluster }> = [];
after(async () => {
  for (const { fake, cluster } of opened) {
    await cluster.close();
    await fake.stop();
  }
});

/** The fixtures' cluster on a fake API server, and three nodes of the Kubernetes tier on it. */
async function whereaboutsCluster() {
  const fake = await startFakeKubeApi({ crds: 'deploy' });
  for (const crd of whereaboutsCrds()) fake.registerCrd(crd as never);
  const fixtures = loadWhereaboutsCluster();
  fake.preload(NADS, fixtures.definitions.items as KubeObject[]);
  fake.preload('ippools', fixtures.ipPools.items as KubeObject[]);
  fake.preload('overlappingrangeipreservations', fixtures.reservations.items as KubeObject[]);
  for (const pod of fixtures.pods.items) fake.createPod(pod as KubeObject);
  const access = loadKubeConfig(fake.kubeconfigPath);
  const cluster = await LendingCluster.open(NODES, (clock) =>
    openKubeTier({ kubeConfig: access, namespace: 'warren-system', leaseSeconds: 15, clock }),
  );
  opened.push({ fake, cluster });
  const reader = new KubeReader(access);
  const writer = new KubeWriter(access);
  const back = (o: Partial<RollbackOptions> = {}) =>
    rollBackToWhereabouts({
      reader,
      writer,
      tier: cluster.cluster,
      selection: { networks: [], definitions: [] },
      dryRun: false,
      ...o,
    });
  const forward = (tier = cluster.cluster, dryRun = false) => migrateWhereabouts({ reader, tier, dryRun, now: 1_000 });
  return { fake, cluster, reader, back, forward };
}

/** The object's spec; fails when there is no object. */
function specOf<T>(object: KubeObject | undefined): T {
  assert.ok(object !== undefined, 'the object exists');
  return object.spec as T;
}

/** Switches the IPAM type of every definition named (`kubectl edit`: only `"type"` changes). */
function switchType(fake: FakeKubeApi, names: readonly string[], type: 'warren' | 'whereabouts'): void {
  for (const nad of fake.objects(NADS).filter((o) => names.includes(o.metadata.name ?? ''))) {
    const spec = nad.spec as { config: string };
    const config = JSON.parse(spec.config) as Record<string, unknown>;
    const plugins = Array.isArray(config.plugins) ? config.plugins : [config];
    for (const p of plugins) if (isPlainObject(p) && isPlainObject(p.ipam)) p.ipam.type = type;
    fake.deleteObject(NADS, nad.metadata.name ?? '', nad.metadata.namespace ?? 'default');
    fake.preload(NADS, [{ ...nad, spec: { config: JSON.stringify(config, null, 2) } } as KubeObject]);
  }
}

/** The ranges of `network` as the agent reads them from its definition on the fake. */
function rangesOfNetwork(fake: FakeKubeApi, network: string): readonly RangeSpec[] {
  for (const object of fake.objects(NADS)) {
    const d = parseAttachmentDefinition(object);
    if (d?.network === network) return d.ipam.ranges;
  }
  assert.fail(`no definition of ${network}`);
}

/** The definitions the fixtures' whereabouts serves (the fourth, already-warren, is Warren's already). */
const SWITCHED = ['macvlan-a', 'blue', 'dual'];

/** ADDs on Warren, each a pod created on the fake (running, on its node): answers the addresses. */
async function runPods(
  fake: FakeKubeApi,
  c: LendingCluster,
  pods: ReadonlyArray<{ name: string; namespace: string; network: string; node: string }>,
): Promise<string[]> {
  const addresses: string[] = [];
  for (const p of pods) {
    const uid = `uid-${p.name}`;
    fake.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: p.name, namespace: p.namespace, uid },
      spec: { nodeName: p.node, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      status: { phase: 'Running' },
    } as unknown as KubeObject);
    const owner = { network: p.network, containerID: `sandbox-${p.name}`, ifname: 'net1' };
    const ranges = rangesOfNetwork(fake, p.network);
    const request = { owner, ranges, podNamespace: p.namespace, podName: p.name, podUID: uid };
    const got = await c.settle(c.node(p.node).allocator.allocate(request));
    addresses.push(...got.map((a) => a.allocation.address));
  }
  // The owners publish what they hold (the agents' publication interval).
  for (const n of c.nodes) await n.store.flush();
  return addresses;
}

const NEW_PODS = [
  { name: 'new-web-0', namespace: 'default', network: 'macvlan-a', node: 'node-a' },
  { name: 'new-web-1', namespace: 'default', network: 'macvlan-a', node: 'node-b' },
  { name: 'new-web-2', namespace: 'default', network: 'macvlan-a', node: 'node-c' },
  { name: 'new-app-0', namespace: 'team-b', network: 'dual', node: 'node-c' },
  { name: 'new-db-0', namespace: 'team-b', network: 'blue-net', node: 'node-b' },
];

/** What Warren holds for containers in every network of the definitions (switched or not): `pool address pod node container ifname`. */
async function warrenHolds(c: LendingCluster, fake: FakeKubeApi): Promise<string[]> {
  const pools = new Set(
    fake
      .objects(NADS)
      .flatMap((o) => parseAttachmentDefinition(o) ?? [])
      .flatMap((d) => d.ipam.ranges.map((r) => r.pool)),
  );
  const held = await readWarrenHeld(c.cluster, pools);
  return held.holders
    .map((h) => {
      const a = h.allocation;
      return `${h.pool} ${a.address} ${a.podNamespace}/${a.podName} ${a.node} ${a.containerID} ${a.ifname}`;
    })
    .sort();
}

/**
 * Whereabouts' format read back by the forward migration's reader: the addresses a second forward
 * migration (onto an empty Warren) would record, with the container and interface whereabouts
 * holds each for; and the leftovers it would not (pod gone or not holding it).
 */
async function readBack(s: Awaited<ReturnType<typeof whereaboutsCluster>>) {
  const plan = await s.forward(new MemoryTier({ clock: new ManualClock(1_000) }), true);
  const { holdings, problems } = collectHoldings({
    definitions: await s.reader.list('definitions'),
    ipPools: await s.reader.list('ipPools'),
    reservations: await s.reader.list('reservations'),
  });
  assert.deepEqual(problems, [], 'whereabouts agrees with itself');
  const held = (pool: string, address: string) => holdings.find((h) => h.pool === pool && h.address === address);
  const recorded = plan.entries
    .filter((e) => e.outcome === 'record')
    .map((e) => {
      const h = held(e.pool, e.address);
      return `${e.pool} ${e.address} ${e.pod} ${e.node} ${h?.containerID} ${h?.ifname}`;
    })
    .sort();
  const free = plan.entries.filter((e) => e.outcome !== 'record').map((e) => `${e.address} ${e.outcome}`);
  return { recorded, free, problems: plan.problems };
}

describe('warren migrate to-whereabouts (fake API server)', () => {
  it("the round trip: forward, switch, ADDs on Warren, back: whereabouts' objects read back hold what Warren held", async () => {
    const s = await whereaboutsCluster();
    const c = s.cluster;
    assert.equal((await s.forward()).entries.filter((e) => e.outcome === 'conflict').length, 0);
    switchType(s.fake, SWITCHED, 'warren');
    await c.lendAll(); // each node adopts what was granted to it
    const added = await runPods(s.fake, c, NEW_PODS);
    assert.equal(added.length, NEW_PODS.length + 1, 'the dual network gives two');

    const report = await s.back();
    assert.equal(rollbackExitStatus(report), 0, rollbackText(report));
    assert.equal(report.namespace, 'kube-system', "whereabouts' own, where its objects are");
    const warren = await warrenHolds(c, s.fake);
    assert.equal(warren.length, 7 + added.length, warren.join('\n'));
    const back = await readBack(s);
    assert.deepEqual(back.recorded, warren);
    assert.deepEqual(back.problems, []);
    // Whereabouts' own leftovers, never Warren's, stay free: web-1's pod is gone, db-1 does not hold .9.
    for (const f of back.free) assert.match(f, /^(192\.168\.2\.226 pod-gone|10\.20\.0\.9 stale)$/);
    for (const a of added)
      assert.ok(
        warren.some((w) => w.split(' ')[1] === a),
        `${a} written`,
      );

    // Each address is in its IPPool at its offset and in its reservation, as whereabouts writes them.
    const pool = s.fake.object('ippools', '192.168.2.224-28', 'kube-system');
    const allocations = specOf<{ allocations: Record<string, { id: string; podref: string; ifname: string }> }>(
      pool,
    ).allocations;
    const web = added.find((a) => a.startsWith('192.168.2.'));
    assert.ok(web !== undefined);
    const offset = String(Number(web.split('.')[3]) - 224);
    assert.deepEqual(allocations[offset], { id: 'sandbox-new-web-0', podref: 'default/new-web-0', ifname: 'net1' });
    const v6 = added.find((a) => a.includes(':'));
    assert.ok(v6 !== undefined);
    const reservation = s.fake.object('overlappingrangeipreservations', v6.replaceAll(':', '-'), 'kube-system');
    assert.deepEqual(reservation?.spec, {
      containerid: 'sandbox-new-app-0',
      ifname: 'net1',
      podref: 'team-b/new-app-0',
    });
    const blue = s.fake.object(
      'overlappingrangeipreservations',
      `blue-${added.find((a) => a.startsWith('10.20.'))}`,
      'kube-system',
    );
    assert.equal(specOf<{ podref: string }>(blue).podref, 'team-b/new-db-0', 'named after network_name');

    // Running it again writes nothing.
    s.fake.clearRequests();
    const again = await s.back();
    assert.deepEqual(
      again.entries.map((e) => e.outcome).filter((o) => o !== 'present' && o !== 'not-written'),
      [],
    );
    assert.deepEqual(
      s.fake.requests.filter((r) => WRITES.has(r.method)),
      [],
    );
  });

  it('--dry-run says what it would write and writes nothing', async () => {
    const s = await whereaboutsCluster();
    await s.forward();
    switchType(s.fake, SWITCHED, 'warren');
    await s.cluster.lendAll();
    await runPods(s.fake, s.cluster, NEW_PODS.slice(0, 2));
    s.fake.clearRequests();
    const before = JSON.stringify([s.fake.objects('ippools'), s.fake.objects('overlappingrangeipreservations')]);
    const report = await s.back({ dryRun: true });
    assert.equal(rollbackExitStatus(report), 0);
    assert.equal(report.entries.filter((e) => e.outcome === 'write').length >= 2, true);
    assert.match(rollbackText(report), /dry run: nothing is written/);
    assert.match(rollbackText(report), /default\/new-web-0 +sandbox-new- +would write/);
    assert.deepEqual(
      s.fake.requests.filter((r) => WRITES.has(r.method) && r.path.startsWith(WHEREABOUTS_GROUP)),
      [],
    );
    assert.deepEqual(
      s.fake.requests.filter((r) => WRITES.has(r.method)),
      [],
      'nor anything else',
    );
    assert.equal(JSON.stringify([s.fake.objects('ippools'), s.fake.objects('overlappingrangeipreservations')]), before);
  });

  it("reports an address whereabouts holds for another live pod as a conflict and leaves that record alone; a gone pod's record is replaced", async () => {
    const s = await whereaboutsCluster();
    await s.forward();
    switchType(s.fake, SWITCHED, 'warren');
    await s.cluster.lendAll();
    const [address] = await runPods(s.fake, s.cluster, NEW_PODS.slice(0, 1));
    assert.ok(address !== undefined);
    // Meanwhile whereabouts (still serving some node) gave the same address to a live pod of its own.
    const name = address.includes(':') ? address.replaceAll(':', '-') : address;
    s.fake.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'theirs', namespace: 'default', uid: 'uid-theirs' },
      spec: { nodeName: 'node-b', containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      status: { phase: 'Running' },
    } as unknown as KubeObject);
    const theirs = { containerid: 'their-sandbox', podref: 'default/theirs', ifname: 'net1' };
    s.fake.preload('overlappingrangeipreservations', [
      { metadata: { name, namespace: 'kube-system' }, spec: theirs } as unknown as KubeObject,
    ]);
    const report = await s.back();
    const conflict = report.entries.find((e) => e.address === address);
    assert.equal(conflict?.outcome, 'conflict');
    assert.match(conflict?.detail ?? '', /Reservation .* holds it for pod default\/theirs, container their-sandbo/);
    assert.equal(rollbackExitStatus(report), 1);
    assert.match(rollbackText(report), /do not switch the definitions back/);
    // Left alone, and written to neither object.
    assert.deepEqual(s.fake.object('overlappingrangeipreservations', name, 'kube-system')?.spec, theirs);
    const pool = s.fake.object('ippools', '192.168.2.224-28', 'kube-system');
    const ids = Object.values(specOf<{ allocations: Record<string, { id: string }> }>(pool).allocations).map(
      (a) => a.id,
    );
    assert.ok(!ids.includes('sandbox-new-web-0'));
    // The others are written all the same.
    assert.ok(report.entries.some((e) => e.outcome === 'written'));

    // Their pod gone, its record is whereabouts' leftover: the next run replaces it, and says whose.
    s.fake.deletePod('default', 'theirs', { force: true });
    const next = await s.back();
    const replaced = next.entries.find((e) => e.address === address);
    assert.equal(replaced?.outcome, 'written');
    assert.match(replaced?.detail ?? '', /replaces .* pod default\/theirs.*no longer exists/);
    assert.equal(rollbackExitStatus(next), 0);
  });

  it("writes no address Warren holds for no container as a pod's, and says so", async () => {
    const s = await whereaboutsCluster();
    const c = s.cluster;
    await s.forward();
    switchType(s.fake, SWITCHED, 'warren');
    await c.lendAll();
    // A StatefulSet ordinal's held address, its pod gone: bookkeeping only.
    const ranges = rangesOfNetwork(s.fake, 'blue-net');
    const owner = { network: 'blue-net', containerID: 'sandbox-db-9', ifname: 'net1' };
    const holding = 'statefulset/team-b/db/9';
    const [got] = await c.settle(
      c.node('node-b').allocator.allocate({ owner, ranges, podNamespace: 'team-b', podName: 'db-9', holding }),
    );
    assert.ok(got !== undefined);
    await c.node('node-b').allocator.release(owner);
    for (const n of c.nodes) await n.store.flush();
    const report = await s.back({ selection: { networks: ['blue-net'], definitions: [] } });
    const entry = report.entries.find((e) => e.address === got.allocation.address);
    assert.equal(entry?.outcome, 'not-written', JSON.stringify(report.entries));
    assert.match(entry?.detail ?? '', /no container \(held/);
    assert.equal(rollbackExitStatus(report), 0);
    const pool = s.fake.object('ippools', 'blue-10.20.0.0-24', 'kube-system');
    const offset = String(Number(got.allocation.address.split('.')[3]));
    const record = specOf<{ allocations: Record<string, { id: string }> }>(pool).allocations[offset];
    assert.notEqual(record?.id, 'sandbox-db-9');
    const reservation = s.fake.object(
      'overlappingrangeipreservations',
      `blue-${got.allocation.address}`,
      'kube-system',
    );
    assert.notEqual((reservation?.spec as { containerid?: string } | undefined)?.containerid, 'sandbox-db-9');
  });

  it('the rehearsal in the README: migrate, switch, run pods, roll back, switch back, and whereabouts holds what Warren held', async () => {
    const s = await whereaboutsCluster();
    const c = s.cluster;
    // The command line, as the operator runs it, on the nodes' cluster (closed by the test, not the command).
    const tier = new Proxy(c.cluster, {
      get: (target, key) => {
        if (key === 'close') return async () => {};
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const warren = async (...argv: string[]) => {
      const out: string[] = [];
      const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t), env: {} };
      const code = await migrateCommand([...argv, '--kubeconfig', s.fake.kubeconfigPath], io, {
        openTier: async () => tier,
      });
      return { code, out: out.join('') };
    };
    const network = ['--network', 'macvlan-a'];

    // 1. Migrate: see the plan, then record.
    assert.equal((await warren('whereabouts', '--dry-run')).code, 0);
    assert.equal((await warren('whereabouts')).code, 0);
    // 2. Switch the definition's type to warren; its agents adopt what was recorded.
    switchType(s.fake, ['macvlan-a'], 'warren');
    await c.lendAll();
    // 3. Run pods: they get Warren's addresses.
    const added = await runPods(s.fake, c, NEW_PODS.slice(0, 3));
    // 4. Roll back: see what would be written, then write it.
    const dry = await warren('to-whereabouts', ...network, '--dry-run');
    assert.equal(dry.code, 0, dry.out);
    assert.match(dry.out, /dry run: nothing is written/);
    for (const a of added) assert.match(dry.out, new RegExp(`${a.replaceAll('.', '\\.')} .*would write`));
    const back = await warren('to-whereabouts', ...network);
    assert.equal(back.code, 0, back.out);
    assert.match(back.out, /IPPool kube-system\/192\.168\.2\.224-28/);
    // 5. Switch back to whereabouts; once more, to catch a pod Warren served in between: nothing to write.
    switchType(s.fake, ['macvlan-a'], 'whereabouts');
    const again = await warren('to-whereabouts', ...network, '--json');
    assert.equal(again.code, 0, again.out);
    const counts = (JSON.parse(again.out) as { counts: Record<string, number> }).counts;
    assert.equal(counts.written, 0);
    assert.equal(counts.present, 2 + added.length, 'web-0 and web-2, migrated, and the pods run on Warren');

    // Whereabouts' records of the range are Warren's, each for the container, pod and interface Warren held it for.
    const held = (await warrenHolds(c, s.fake)).filter((h) => h.startsWith('192.168.2.224/28 '));
    const readBackOf = (await readBack(s)).recorded.filter((h) => h.startsWith('192.168.2.224/28 '));
    assert.deepEqual(readBackOf, held);
  });
});

describe("merging into whereabouts' objects (pure)", () => {
  const target = {
    ipPool: '10.9.0.0-24',
    rangeText: '10.9.0.0/24',
    networkName: '',
    pools: ['10.9.0.0/24'],
    reservations: true,
  };
  const holder = (address: string, containerID: string, pod: string) => ({
    pool: '10.9.0.0/24',
    address,
    network: 'n',
    containerID,
    ifname: 'net1',
    podNamespace: 'default',
    podName: pod,
    node: 'node-a',
    createdAt: 0,
  });
  const never = () => undefined;
  const allocationsOf = (object: KubeObjectJson | undefined): unknown => {
    assert.ok(object !== undefined, 'an object to write');
    return (object.spec as { allocations: unknown }).allocations;
  };

  it('keys a new IPPool by the offset from the network address, and leaves one of the same container alone', () => {
    const made = mergeIpPool(target, 'kube-system', undefined, [holder('10.9.0.12', 'c1', 'p1')], never);
    assert.deepEqual(made.object?.spec, {
      range: '10.9.0.0/24',
      allocations: { '12': { id: 'c1', podref: 'default/p1', ifname: 'net1' } },
    });
    assert.deepEqual(made.object?.metadata, { name: '10.9.0.0-24', namespace: 'kube-system' });
    const existing = {
      ...made.object,
      metadata: { name: '10.9.0.0-24', namespace: 'kube-system', resourceVersion: '7' },
    };
    const again = mergeIpPool(target, 'kube-system', existing as never, [holder('10.9.0.12', 'c1', 'p1')], never);
    assert.equal(again.object, undefined, 'nothing to write');
    assert.equal(again.verdicts.get('10.9.0.12')?.outcome, 'present');
  });

  it("counts offsets from the address an existing IPPool's range is written with, keeps its other records and its version", () => {
    const existing = {
      apiVersion: WHEREABOUTS_API_VERSION,
      kind: 'IPPool',
      metadata: { name: '10.9.0.0-24', namespace: 'kube-system', resourceVersion: '42' },
      spec: { range: '10.9.0.5/24', allocations: { '1': { id: 'theirs', podref: 'default/other', ifname: 'net1' } } },
    };
    const merged = mergeIpPool(target, 'kube-system', existing, [holder('10.9.0.12', 'c1', 'p1')], never);
    assert.equal(merged.object?.metadata.resourceVersion, '42');
    assert.deepEqual(allocationsOf(merged.object), {
      '1': { id: 'theirs', podref: 'default/other', ifname: 'net1' },
      '7': { id: 'c1', podref: 'default/p1', ifname: 'net1' },
    });
    // 10.9.0.6 is the record of another container: a conflict unless its pod is judged gone.
    const conflict = mergeIpPool(target, 'kube-system', existing, [holder('10.9.0.6', 'c2', 'p2')], never);
    assert.equal(conflict.verdicts.get('10.9.0.6')?.outcome, 'conflict');
    assert.equal(conflict.object, undefined);
    const replaced = mergeIpPool(target, 'kube-system', existing, [holder('10.9.0.6', 'c2', 'p2')], () => 'gone');
    assert.deepEqual(allocationsOf(replaced.object), {
      '1': { id: 'c2', podref: 'default/p2', ifname: 'net1' },
    });
  });

  it('gives a record of the same container its interface when whereabouts recorded none', () => {
    const existing = {
      metadata: { name: '10.9.0.3', namespace: 'kube-system', resourceVersion: '3' },
      spec: { containerid: 'c1', podref: 'default/p1' },
    };
    const { object, verdict } = mergeReservation(
      target,
      'kube-system',
      existing,
      holder('10.9.0.3', 'c1', 'p1'),
      never,
    );
    assert.equal(verdict.outcome, 'write');
    assert.deepEqual(object?.spec, { containerid: 'c1', podref: 'default/p1', ifname: 'net1' });
    assert.equal(object?.metadata.resourceVersion, '3');
  });

  it('names a reservation as whereabouts does, after network_name and with ":" written "-"', () => {
    assert.equal(reservationNameOf({ ...target, networkName: 'blue' }, 'fd00:30::10'), 'blue-fd00-30--10');
    assert.equal(reservationNameOf(target, '10.9.0.3'), '10.9.0.3');
  });
});

describe('warren migrate to-whereabouts: the command line', () => {
  it("refuses the way back's flags on the way in, and a --nad that is no namespace/name", async () => {
    for (const argv of [
      ['migrate', 'whereabouts', '--network', 'x'],
      ['migrate', 'to-whereabouts', '--nad', 'no-slash'],
    ]) {
      const err: string[] = [];
      const io = { out: () => {}, err: (t: string) => err.push(t), env: {} };
      assert.equal(await runCli(argv, io), 2, argv.join(' '));
      assert.match(err.join(''), /--network|--nad/);
    }
  });
});
