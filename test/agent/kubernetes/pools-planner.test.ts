/**
 * Which WarrenPool serves a pod, through the CNI service in process (a real allocator on SQLite),
 * with the pools planner reading the real pod directory and pool catalog fed as their watches feed
 * them: the order pod annotation > namespace annotation > config, the node selector choosing among
 * the pools named, the namespace selector refusing with code 7 naming itself, a config with inline
 * ranges untouched by annotations, and no GET for a pod and namespace the watches hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { PodDirectory } from '../../../src/agent/kubernetes/pod-directory.ts';
import { POOLS_ANNOTATION, poolsPlanner } from '../../../src/agent/kubernetes/pools-planner.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { PoolCatalog } from '../../../src/sources/kubernetes/pool-catalog.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';

const warrenPool = (name: string, range: string, spec: Record<string, unknown> = {}) => ({
  metadata: { name, uid: `uid-${name}`, generation: 1 },
  spec: { ranges: [{ range }], ...spec },
});

const namespaceObject = (name: string, labels: Record<string, string>, annotations?: Record<string, string>) => ({
  metadata: { name, labels, ...(annotations === undefined ? {} : { annotations }) },
});

const podObject = (namespace: string, name: string, annotations?: Record<string, string>) => ({
  metadata: { namespace, name, uid: `uid-${namespace}-${name}`, ...(annotations === undefined ? {} : { annotations }) },
  spec: { nodeName: 'n1' },
});

function setup(nodeLabels: Record<string, string> = { rack: 'r1' }, listed = true) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const gets = { pods: 0, namespaces: 0 };
  const pods: unknown[] = [];
  const namespaces: unknown[] = [];
  const directory = new PodDirectory({
    fetchPod: async (namespace, name) => {
      gets.pods += 1;
      return pods.find((p) => JSON.stringify(p).includes(`"uid":"uid-${namespace}-${name}"`));
    },
    fetchNamespace: async (name) => {
      gets.namespaces += 1;
      return namespaces.find((n) => (n as { metadata: { name: string } }).metadata.name === name);
    },
  });
  const catalog = new PoolCatalog();
  if (listed)
    catalog.observe({
      kind: 'listed',
      objects: [
        warrenPool('cfg', '10.70.1.0/24'),
        warrenPool('ns', '10.70.2.0/24'),
        warrenPool('pod', '10.70.3.0/24'),
        warrenPool('rack1', '10.71.1.0/24', { nodeSelector: { matchLabels: { rack: 'r1' } } }),
        warrenPool('rack2', '10.71.2.0/24', { nodeSelector: { matchLabels: { rack: 'r2' } } }),
        warrenPool('tenant', '10.72.0.0/24', { namespaceSelector: { matchLabels: { tenant: 'blue' } } }),
        warrenPool('broken', '10.73.0.0/33'),
      ],
    });
  const service = new CniService({
    allocator,
    readiness: async () => undefined,
    clock,
    planners: [poolsPlanner({ directory, catalog, nodeLabels: () => nodeLabels, node: 'n1' })],
  });
  let n = 0;
  const add = async (namespace: string, pod: string, ipam: Record<string, unknown> = { pools: ['cfg'] }) => {
    n += 1;
    const outcome = await service.handle({
      command: 'ADD',
      containerID: `c${n}`,
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      args: `K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${pod};K8S_POD_UID=uid-${namespace}-${pod}`,
      config: { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', ...ipam } },
    });
    if (outcome.kind !== 'result') return outcome.kind === 'error' ? outcome.output : outcome;
    return (outcome.output as { ips: Array<{ address: string }> }).ips.map((ip) => ip.address);
  };
  /** The pod and namespace as the watches bring them (listed). */
  const watched = (pod: unknown, namespace: unknown) => {
    directory.observePods({ kind: 'added', object: pod });
    directory.observeNamespaces({ kind: 'added', object: namespace });
  };
  return { add, watched, gets, pods, namespaces, directory, catalog };
}

describe('the pools planner', () => {
  it('gives the pool the order says for each combination of pod annotation, namespace annotation and config', async () => {
    const t = setup();
    const cases = [
      { podNames: undefined, nsNames: undefined, expect: /^10\.70\.1\./ },
      { podNames: undefined, nsNames: 'ns', expect: /^10\.70\.2\./ },
      { podNames: 'pod', nsNames: undefined, expect: /^10\.70\.3\./ },
      { podNames: 'pod', nsNames: 'ns', expect: /^10\.70\.3\./ },
    ];
    for (const [i, c] of cases.entries()) {
      const ns = `space${i}`;
      t.watched(
        podObject(ns, 'p', c.podNames === undefined ? undefined : { [POOLS_ANNOTATION]: c.podNames }),
        namespaceObject(ns, {}, c.nsNames === undefined ? undefined : { [POOLS_ANNOTATION]: c.nsNames }),
      );
      const got = await t.add(ns, 'p');
      assert.ok(Array.isArray(got), JSON.stringify(got));
      assert.equal(got.length, 1);
      assert.match(got[0] as string, c.expect, `pod ${c.podNames ?? '-'}, namespace ${c.nsNames ?? '-'}`);
    }
    assert.deepEqual(t.gets, { pods: 0, namespaces: 0 }, 'the watches held them: no GET');
  });

  it('gives one pod, re-annotated, the pool the order says under all eight combinations', async () => {
    const t = setup();
    for (const podNames of [undefined, 'pod'])
      for (const nsNames of [undefined, 'ns'])
        for (const configured of [['cfg'], []]) {
          // The watches bring the pod and its namespace as they now are.
          t.watched(
            podObject('same', 'p', podNames === undefined ? undefined : { [POOLS_ANNOTATION]: podNames }),
            namespaceObject('same', {}, nsNames === undefined ? undefined : { [POOLS_ANNOTATION]: nsNames }),
          );
          const expected = podNames ?? nsNames ?? configured[0];
          const got = await t.add('same', 'p', { pools: configured });
          const what = `pod ${podNames ?? '-'}, namespace ${nsNames ?? '-'}, config [${configured.join(',')}]`;
          if (expected === undefined) {
            assert.equal((got as { code: number }).code, 7, what);
            continue;
          }
          assert.ok(Array.isArray(got), `${what}: ${JSON.stringify(got)}`);
          const subnet = { cfg: '10.70.1.', ns: '10.70.2.', pod: '10.70.3.' }[expected as 'cfg' | 'ns' | 'pod'];
          assert.ok((got[0] as string).startsWith(subnet), `${what}: ${got[0]}`);
        }
    assert.deepEqual(t.gets, { pods: 0, namespaces: 0 });
  });

  it('leaves a config with inline ranges as it is, whatever the annotations say', async () => {
    const t = setup();
    t.watched(
      podObject('a', 'p', { [POOLS_ANNOTATION]: 'pod' }),
      namespaceObject('a', {}, { [POOLS_ANNOTATION]: 'ns' }),
    );
    assert.deepEqual(await t.add('a', 'p', { range: '10.79.0.0/24' }), ['10.79.0.1/24']);
  });

  it('chooses among the pools named those whose nodeSelector matches the node, and refuses when none does', async () => {
    const t = setup({ rack: 'r1' });
    t.watched(podObject('a', 'p', { [POOLS_ANNOTATION]: 'rack2, rack1' }), namespaceObject('a', {}));
    const got = await t.add('a', 'p');
    assert.ok(Array.isArray(got));
    assert.match(got[0] as string, /^10\.71\.1\./);
    t.watched(podObject('a', 'q', { [POOLS_ANNOTATION]: 'rack2' }), namespaceObject('a', {}));
    const refused = await t.add('a', 'q');
    assert.equal((refused as { code: number }).code, 7);
    assert.match((refused as { msg: string }).msg, /rack2's nodeSelector \(rack=r2\) does not match the node's labels/);
    assert.match((refused as { msg: string }).msg, /node n1/);
  });

  it("refuses a pod whose namespace the pool's namespaceSelector does not admit, naming the selector", async () => {
    const t = setup();
    t.watched(podObject('red', 'p', { [POOLS_ANNOTATION]: 'tenant' }), namespaceObject('red', { tenant: 'red' }));
    const refused = await t.add('red', 'p');
    assert.equal((refused as { code: number }).code, 7);
    assert.match(
      (refused as { msg: string }).msg,
      /WarrenPool tenant .* is not for namespace red: its namespaceSelector \(tenant=blue\) does not match/,
    );
    t.watched(podObject('blue', 'p', { [POOLS_ANNOTATION]: 'tenant' }), namespaceObject('blue', { tenant: 'blue' }));
    const got = await t.add('blue', 'p');
    assert.ok(Array.isArray(got));
    assert.match(got[0] as string, /^10\.72\.0\./);
  });

  it('refuses a pool that does not exist or cannot be used, an empty config with no annotation, and waits for the listing', async () => {
    const t = setup();
    t.watched(podObject('a', 'p', { [POOLS_ANNOTATION]: 'nope' }), namespaceObject('a', {}));
    const missing = (await t.add('a', 'p')) as { code: number; msg: string };
    assert.equal(missing.code, 7);
    assert.match(missing.msg, /no WarrenPool named nope \(named by pod a\/p's annotation warren.dev\/pools\)/);
    t.watched(podObject('a', 'q', { [POOLS_ANNOTATION]: 'broken' }), namespaceObject('a', {}));
    const broken = (await t.add('a', 'q')) as { code: number; msg: string };
    assert.equal(broken.code, 7);
    assert.match(broken.msg, /WarrenPool broken: spec.ranges\[0\].range/);
    t.watched(podObject('b', 'p'), namespaceObject('b', {}));
    const none = (await t.add('b', 'p', { pools: [] })) as { code: number; msg: string };
    assert.equal(none.code, 7);
    assert.match(none.msg, /names no WarrenPool .* neither pod b\/p nor its namespace/);

    const fresh = setup({}, false);
    fresh.watched(podObject('c', 'p'), namespaceObject('c', {}));
    const early = (await fresh.add('c', 'p')) as { code: number; msg: string };
    assert.equal(early.code, 11, 'before the pools are listed: try again, never a guess');
    assert.match(early.msg, /WarrenPools are not read yet/);
    fresh.catalog.observe({ kind: 'listed', objects: [] });
    const gone = (await fresh.add('c', 'p')) as { code: number; msg: string };
    assert.equal(gone.code, 7, 'a listing without the pool: it does not exist');
  });

  it('reads a pod and namespace the watches have not brought yet with one GET each', async () => {
    const t = setup();
    t.pods.push(podObject('late', 'p'));
    t.namespaces.push(namespaceObject('late', {}, { [POOLS_ANNOTATION]: 'ns' }));
    const got = await t.add('late', 'p');
    assert.ok(Array.isArray(got));
    assert.match(got[0] as string, /^10\.70\.2\./);
    assert.deepEqual(t.gets, { pods: 1, namespaces: 1 });
  });
});
