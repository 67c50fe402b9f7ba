/**
 * The chore ending sticky holdings (src/agent/kubernetes/sticky-release.ts) on a memory cluster of
 * three nodes, on the injected clock: a StatefulSet scaled below an ordinal ends its holding after
 * the grace, not before; a scale-down undone within the grace keeps it; a StatefulSet deleted ends
 * them all; nothing ends before the StatefulSets were listed, nor while a live node reports a pod
 * using the address, nor on an agent that does not hold the chore. The address then goes back to
 * its owner's block (its upkeep releases the placeholder).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { StickyRelease } from '../../../src/agent/kubernetes/sticky-release.ts';
import { isHeldPlaceholder } from '../../../src/allocator/holdings/holdings.ts';
import { type TieredCluster, type TieredNode, rangesOf, tieredCluster } from '../../store/tiered/nodes.ts';

const GRACE_MS = 300_000;
const ranges = rangesOf({ range: '10.60.0.0/24' });

const statefulSet = (name: string, replicas: number, extra: Record<string, unknown> = {}) => ({
  metadata: { namespace: 'db', name, uid: `uid-${name}`, resourceVersion: '1' },
  spec: { replicas, ...extra },
});

async function hold(node: TieredNode, set: string, ordinal: number, release = true) {
  const owner = { network: 'net', containerID: `${set}-${ordinal}-${node.name}`, ifname: 'eth0' };
  const key = `statefulset/db/${set}/${ordinal}`;
  const [got] = await node.allocator.allocate({ owner, ranges, holding: key, podUID: `u-${set}-${ordinal}` });
  if (release) await node.allocator.release(owner); // the pod is gone; the holding stays
  return got?.allocation.address;
}

describe('ending the holdings of ordinals a StatefulSet no longer covers', () => {
  const clusters: TieredCluster[] = [];
  after(async () => {
    for (const c of clusters) await c.close();
  });
  const setup = async (announce = true) => {
    const c = tieredCluster(['a', 'b', 'c']);
    clusters.push(c);
    const [a] = c.nodes as [TieredNode];
    if (announce)
      for (const n of c.nodes) await n.store.tier.membership.announce(n.name, { since: 0, version: 'test' });
    const release = new StickyRelease({
      records: c.tier.holdings,
      endHolding: (key) => a.allocator.holdings.endHolding(key),
      membership: a.store.tier.membership,
      clock: c.clock,
      logger: pino({ level: 'silent' }),
      graceMs: GRACE_MS,
    });
    // Time passes for agents that keep renewing their leases (as the cluster upkeep does).
    const advance = async (ms: number) => {
      c.clock.advance(ms);
      if (announce) for (const n of c.nodes) await n.store.tier.membership.renew();
    };
    return { c, a, release, advance, keys: async () => (await c.tier.holdings.list({})).map((r) => r.key).sort() };
  };

  it("reads the StatefulSets' holdings from a watch while it holds the chore: no listing per round", async () => {
    const { c, release, advance } = await setup();
    const b = c.nodes[1] as TieredNode;
    for (const i of [0, 1]) await hold(b, 'web', i);
    release.observe({ kind: 'listed', objects: [statefulSet('web', 1)] });
    const listed = () => c.tier.calls.get('holdings.list') ?? 0;
    const before = listed();
    for (let round = 0; round < 5; round++) {
      assert.deepEqual(await release.round(), []);
      await advance(10_000);
    }
    assert.equal(listed(), before, 'no listing of the holdings in five rounds');
    await advance(GRACE_MS);
    assert.deepEqual(await release.round(), ['statefulset/db/web/1'], 'judged from the watch all the same');
  });

  it('ends the holding of an ordinal scaled below after the grace, not before, and its address goes back', async () => {
    const { c, a, release, advance, keys } = await setup();
    const b = c.nodes[1] as TieredNode;
    for (const i of [0, 1, 2]) await hold(b, 'web', i);
    release.observe({ kind: 'listed', objects: [statefulSet('web', 3)] });
    assert.deepEqual(await release.round(), []);
    release.observe({ kind: 'modified', object: statefulSet('web', 2) });
    assert.deepEqual(await release.round(), []);
    await advance(GRACE_MS - 1);
    assert.deepEqual(await release.round(), []);
    await advance(1);
    assert.deepEqual(await release.round(), ['statefulset/db/web/2']);
    assert.deepEqual(await keys(), ['statefulset/db/web/0', 'statefulset/db/web/1']);
    // The owner (b) releases its placeholder at its upkeep, after its grace.
    await b.allocator.holdings.run(0);
    assert.equal((await b.store.list()).filter(isHeldPlaceholder).length, 2);
    assert.ok(a !== undefined);
  });

  it('keeps the holding when the scale-down is undone within the grace', async () => {
    const { c, release, advance, keys } = await setup();
    await hold(c.nodes[0] as TieredNode, 'web', 1);
    release.observe({ kind: 'listed', objects: [statefulSet('web', 1)] });
    await release.round();
    await advance(GRACE_MS / 2);
    release.observe({ kind: 'modified', object: statefulSet('web', 2) });
    await release.round();
    await advance(GRACE_MS);
    assert.deepEqual(await release.round(), []);
    assert.deepEqual(await keys(), ['statefulset/db/web/1']);
  });

  it('ends every holding of a StatefulSet deleted, and honours spec.ordinals.start', async () => {
    const { c, release, advance, keys } = await setup();
    const a = c.nodes[0] as TieredNode;
    for (const i of [0, 5]) await hold(a, 'web', i);
    await hold(a, 'shifted', 4);
    release.observe({
      kind: 'listed',
      objects: [statefulSet('web', 6), statefulSet('shifted', 2, { ordinals: { start: 3 } })],
    });
    release.observe({ kind: 'deleted', object: statefulSet('web', 6) });
    await release.round();
    await advance(GRACE_MS);
    assert.deepEqual((await release.round()).sort(), ['statefulset/db/web/0', 'statefulset/db/web/5']);
    assert.deepEqual(await keys(), ['statefulset/db/shifted/4']);
  });

  it('ends nothing before the StatefulSets were listed', async () => {
    const { c, release, advance, keys } = await setup();
    await hold(c.nodes[0] as TieredNode, 'web', 0);
    await release.round();
    await advance(GRACE_MS * 2);
    assert.deepEqual(await release.round(), []);
    assert.deepEqual(await keys(), ['statefulset/db/web/0']);
  });

  it('keeps a holding a live node reports a pod using, until that use ends', async () => {
    const { c, release, advance, keys } = await setup();
    const b = c.nodes[1] as TieredNode;
    await hold(b, 'web', 3, false);
    await b.allocator.holdings.run(GRACE_MS); // reports the use
    release.observe({ kind: 'listed', objects: [statefulSet('web', 3)] });
    await release.round();
    await advance(GRACE_MS);
    assert.deepEqual(await release.round(), [], 'a pod still uses it');
    await b.allocator.release({ network: 'net', containerID: 'web-3-b', ifname: 'eth0' });
    await b.allocator.holdings.run(GRACE_MS);
    assert.deepEqual(await release.round(), ['statefulset/db/web/3']);
    assert.deepEqual(await keys(), []);
  });

  it('ends nothing on an agent that does not hold the chore', async () => {
    const { c, release, advance, keys } = await setup(false);
    await hold(c.nodes[0] as TieredNode, 'web', 0);
    release.observe({ kind: 'listed', objects: [] });
    await release.round();
    await advance(GRACE_MS);
    assert.deepEqual(await release.round(), []);
    assert.deepEqual(await keys(), ['statefulset/db/web/0']);
  });
});
