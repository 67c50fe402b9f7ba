/**
 * Sticky StatefulSet addresses through the CNI service of three nodes of a memory cluster (each a
 * real allocator on its own SQLite file, two-tier), with the holdings planner reading the real pod
 * directory fed as the pod watch feeds it: a StatefulSet pod deleted and re-created (new UID) on
 * another node gets its old address; a pod of no StatefulSet, or a network not sticky, is not held;
 * a WarrenPool's `sticky` makes its pods' addresses sticky; a pod named unlike its StatefulSet's is
 * refused with code 7.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ManualClock } from '../../../src/core/clock.ts';
import { PodDirectory } from '../../../src/agent/kubernetes/pod-directory.ts';
import { isSticky, ordinalOf, stickyPlanner } from '../../../src/agent/kubernetes/sticky-planner.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { parseNetConf } from '../../../src/cni/netconf.ts';
import { PoolCatalog } from '../../../src/sources/kubernetes/pool-catalog.ts';
import { type TieredCluster, type TieredNode, tieredCluster } from '../../store/tiered/nodes.ts';

export const statefulSetPod = (namespace: string, name: string, uid: string, set = name.replace(/-\d+$/, '')) => ({
  metadata: {
    namespace,
    name,
    uid,
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: set, uid: `uid-${set}`, controller: true }],
  },
  spec: { nodeName: 'n' },
});

function node(n: TieredNode, catalog: PoolCatalog, clock: ManualClock) {
  const directory = new PodDirectory({ fetchPod: async () => undefined, fetchNamespace: async () => undefined });
  const service = new CniService({
    allocator: n.allocator,
    readiness: async () => undefined,
    clock,
    planners: [stickyPlanner({ directory, catalog })],
  });
  let serial = 0;
  const add = async (pod: { metadata: { namespace: string; name: string; uid: string } }, ipam: object) => {
    directory.observePods({ kind: 'added', object: pod });
    serial += 1;
    const { namespace, name, uid } = pod.metadata;
    const outcome = await service.handle({
      command: 'ADD',
      containerID: `${n.name}-c${serial}`,
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      args: `K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_UID=${uid}`,
      config: { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', ...ipam } },
    });
    if (outcome.kind !== 'result') return outcome.kind === 'error' ? outcome.output : outcome;
    return (outcome.output as { ips: Array<{ address: string }> }).ips.map((ip) => ip.address);
  };
  const del = (containerID: string) =>
    service.handle({
      command: 'DEL',
      containerID,
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      args: '',
      config: { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', range: '10.50.0.0/24' } },
    });
  return { add, del, directory };
}

const STICKY = { range: '10.50.0.0/24', sticky: true };

describe('sticky StatefulSet addresses, through the CNI service', () => {
  const clusters: TieredCluster[] = [];
  after(async () => {
    for (const c of clusters) await c.close();
  });
  const setup = () => {
    const c = tieredCluster(['a', 'b', 'c']);
    clusters.push(c);
    const catalog = new PoolCatalog();
    catalog.observe({ kind: 'listed', objects: [] });
    return { c, nodes: c.nodes.map((n) => node(n, catalog, c.clock)), catalog };
  };

  it('gives a StatefulSet pod deleted and re-created (new UID) on another node its old address', async () => {
    const { nodes, c } = setup();
    const [a, b] = nodes as [ReturnType<typeof node>, ReturnType<typeof node>];
    const first = await a.add(statefulSetPod('db', 'web-0', 'uid-1'), STICKY);
    const other = await a.add(statefulSetPod('db', 'web-1', 'uid-2'), STICKY);
    assert.ok(Array.isArray(first) && Array.isArray(other));
    assert.notDeepEqual(first, other);
    await a.del('a-c1');
    const again = await b.add(statefulSetPod('db', 'web-0', 'uid-3'), STICKY);
    assert.deepEqual(again, first);
    const held = await c.tier.holdings.ofHolder('statefulset/db/web/0');
    assert.equal(held[0]?.owner, 'a');
  });

  it('holds nothing for a pod of no StatefulSet, nor on a network that is not sticky', async () => {
    const { nodes, c } = setup();
    const [a] = nodes as [ReturnType<typeof node>];
    const plain = { metadata: { namespace: 'db', name: 'web-0', uid: 'u1' }, spec: { nodeName: 'n' } };
    assert.ok(Array.isArray(await a.add(plain, STICKY)));
    assert.ok(Array.isArray(await a.add(statefulSetPod('db', 'web-1', 'u2'), { range: '10.50.0.0/24' })));
    assert.deepEqual(await c.tier.holdings.list({}), []);
  });

  it("makes a WarrenPool's pods sticky when the pool says so", () => {
    const catalog = new PoolCatalog();
    catalog.observe({
      kind: 'listed',
      objects: [
        { metadata: { name: 'db', uid: 'p1' }, spec: { ranges: [{ range: '10.51.0.0/24' }], sticky: true } },
        { metadata: { name: 'web', uid: 'p2' }, spec: { ranges: [{ range: '10.52.0.0/24' }] } },
      ],
    });
    const conf = parseNetConf({ cniVersion: '1.1.0', name: 'n', ipam: { type: 'warren', pools: [] } }, 'ADD');
    const spec = (name: string) => catalog.entry(name)?.spec;
    const rangesOf = (name: string) => {
      const s = spec(name);
      return s === undefined || s instanceof Error ? [] : s.ranges;
    };
    assert.equal(isSticky(conf, { ranges: rangesOf('db'), requested: [] }, catalog), true);
    assert.equal(isSticky(conf, { ranges: rangesOf('web'), requested: [] }, catalog), false);
  });

  it('refuses (code 7) a pod of a StatefulSet not named <StatefulSet>-<ordinal>', async () => {
    const { nodes } = setup();
    const [a] = nodes as [ReturnType<typeof node>];
    const refused = await a.add(statefulSetPod('db', 'odd-name', 'u1', 'web'), STICKY);
    assert.equal((refused as { code?: number }).code, 7, JSON.stringify(refused));
    assert.deepEqual(
      [ordinalOf('web-12', 'web'), ordinalOf('web-012', 'web'), ordinalOf('web-x-1', 'web')],
      [12, undefined, undefined],
    );
  });
});
