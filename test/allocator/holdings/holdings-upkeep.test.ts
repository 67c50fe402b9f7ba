/**
 * The upkeep of holdings (src/allocator/holdings/holdings-upkeep.ts) on three nodes of a memory
 * cluster, on the injected clock: uses reported into the records and taken out when released; a
 * placeholder whose record is gone released after the grace and not before (a holding ended on
 * another node, a first ADD that died between placeholder and record); a lost placeholder held again.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isHeldPlaceholder, placeholderOwner } from '../../../src/allocator/holdings/holdings.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { type IPAddress, parseIP } from '../../../src/ipam/address.ts';
import { type TieredCluster, type TieredNode, rangesOf, tieredCluster } from '../../store/tiered/nodes.ts';

const KEY = 'ipamclaim/vms/vm-a';
const GRACE_MS = 60_000;
const ranges = rangesOf({ range: '10.41.0.0/24' });

const add = (node: TieredNode, pod: string, holding = KEY) =>
  node.allocator.allocate({
    owner: { network: 'net', containerID: `sandbox-${pod}`, ifname: 'eth0' },
    ranges,
    podNamespace: 'vms',
    podName: `virt-launcher-${pod}`,
    podUID: `uid-${pod}`,
    holding,
  });
const placeholders = async (node: TieredNode) => (await node.store.list()).filter(isHeldPlaceholder);

describe('the upkeep of holdings', () => {
  const clusters: TieredCluster[] = [];
  const cluster = () => {
    const c = tieredCluster(['a', 'b', 'c']);
    clusters.push(c);
    return c;
  };
  after(async () => {
    for (const c of clusters) await c.close();
  });

  it("reports each node's uses into the record (both launcher pods of a migration) and takes released ones out", async () => {
    const { nodes, tier } = cluster();
    const [a, b] = nodes as [TieredNode, TieredNode];
    const [source] = await add(a, 'src');
    const [target] = await add(b, 'dst');
    assert.equal(target?.allocation.address, source?.allocation.address);
    for (const n of [a, b]) assert.deepEqual((await n.allocator.holdings.run(GRACE_MS)).errors, []);
    const uses = async () =>
      ((await tier.holdings.ofHolder(KEY))[0]?.uses ?? []).map((u) => [u.node, u.podName, u.podUID]).sort();
    assert.deepEqual(await uses(), [
      ['a', 'virt-launcher-src', 'uid-src'],
      ['b', 'virt-launcher-dst', 'uid-dst'],
    ]);
    await a.allocator.release({ network: 'net', containerID: 'sandbox-src', ifname: 'eth0' });
    await a.allocator.holdings.run(GRACE_MS);
    assert.deepEqual(await uses(), [['b', 'virt-launcher-dst', 'uid-dst']]);
    // Nothing changed: nothing written.
    assert.equal((await b.allocator.holdings.run(GRACE_MS)).reported, 0);
  });

  it('releases the owner placeholder of a holding ended on another node after the grace, not before', async () => {
    const { nodes, clock } = cluster();
    const [a, b] = nodes as [TieredNode, TieredNode];
    await add(a, 'p1');
    await b.allocator.holdings.endHolding(KEY);
    assert.equal((await placeholders(a)).length, 1, 'only the owner releases its placeholder');
    assert.deepEqual((await a.allocator.holdings.run(GRACE_MS)).released, []);
    clock.advance(GRACE_MS - 1);
    assert.deepEqual((await a.allocator.holdings.run(GRACE_MS)).released, []);
    clock.advance(1);
    assert.equal((await a.allocator.holdings.run(GRACE_MS)).released.length, 1);
    assert.deepEqual(await placeholders(a), []);
  });

  it('releases a placeholder whose record was never made (an ADD died in between) after the grace only', async () => {
    const { nodes, clock } = cluster();
    const [a] = nodes as [TieredNode];
    const [orphan] = await a.allocator.allocate({ owner: placeholderOwner('statefulset/x/web/3'), ranges });
    assert.ok(orphan);
    await a.allocator.holdings.run(GRACE_MS);
    assert.equal((await placeholders(a)).length, 1);
    clock.advance(GRACE_MS);
    assert.deepEqual((await a.allocator.holdings.run(GRACE_MS)).released, [
      `${orphan.allocation.address} (held for statefulset/x/web/3)`,
    ]);
  });

  it("keeps a forgotten owner's held address held by the block's next holder, which then owns the holding", async () => {
    const { nodes, tier, clock } = cluster();
    const [a, b, c] = nodes as [TieredNode, TieredNode, TieredNode];
    const [held] = await add(a, 'p1');
    const address = held?.allocation.address as string;
    const [record] = await tier.holdings.ofHolder(KEY);
    assert.ok(record);
    // Node a is gone for good: b forgets it, freeing its blocks in the cluster.
    assert.ok((await b.allocator.forgetNode('a')).blocks.includes(record.block));
    // A plain ADD on b asking for the held address claims the block first: the claim holds it.
    const asked = b.allocator.allocate({
      owner: { network: 'net', containerID: 'intruder', ifname: 'eth0' },
      ranges,
      requested: [parseIP(address) as IPAddress],
    });
    await assert.rejects(asked, (e) => isWarrenError(e) && e.code === 'ADDRESS_UNAVAILABLE');
    assert.deepEqual(
      (await placeholders(b)).map((p) => p.address),
      [address],
    );
    assert.equal((await tier.holdings.ofHolder(KEY))[0]?.owner, 'b', 'b owns the holding now');
    // Had that write been lost, b's upkeep makes it so; it never takes the placeholder for an orphan.
    const [adopted] = await tier.holdings.ofHolder(KEY);
    assert.ok(adopted && (await tier.holdings.setOwner(adopted, 'a')));
    await b.allocator.holdings.run(GRACE_MS);
    clock.advance(GRACE_MS);
    assert.deepEqual((await b.allocator.holdings.run(GRACE_MS)).released, []);
    assert.equal((await tier.holdings.ofHolder(KEY))[0]?.owner, 'b');
    const [next] = await add(c, 'p2');
    assert.equal(next?.allocation.address, address);
  });

  it('holds the address again when the owner lost its placeholder while the record stands', async () => {
    const { nodes, tier } = cluster();
    const [a] = nodes as [TieredNode];
    await add(a, 'p1');
    const [record] = await tier.holdings.ofHolder(KEY);
    assert.ok(record);
    assert.ok(await a.allocator.holdings.releasePlaceholder(KEY, record.block, record.address));
    assert.deepEqual((await a.allocator.holdings.run(GRACE_MS)).held, [`${record.address} for ${KEY}`]);
    assert.deepEqual(
      (await placeholders(a)).map((p) => p.address),
      [record.address],
    );
  });
});
