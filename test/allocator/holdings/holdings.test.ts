/**
 * Holdings on the two-tier store (src/allocator/holdings/holdings.ts), three nodes of one memory
 * cluster: the held address follows its holder from node to node, a pod's release (DEL, GC, its
 * UID gone) takes only that pod's use, never the holding, whatever order the old pod's cleanup and
 * the new pod's ADD come in (whereabouts#176/#182 in a new form), and a holding ends on request.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { isHeldPlaceholder } from '../../../src/allocator/holdings/holdings.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { parseIP } from '../../../src/ipam/address.ts';
import { isUseKey } from '../../../src/ipam/holding-key.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { tempDir } from '../../helpers/processes.ts';
import { type TieredCluster, type TieredNode, rangesOf, tieredCluster } from '../../store/tiered/nodes.ts';

const KEY = 'statefulset/db/web/0';
const ranges = rangesOf({ range: '10.40.0.0/24' });

function add(node: TieredNode, pod: string, holding: string | null = KEY, extra: Record<string, unknown> = {}) {
  return node.allocator.allocate({
    owner: { network: 'net', containerID: `sandbox-${pod}`, ifname: 'eth0' },
    ranges,
    podNamespace: 'db',
    podName: 'web-0',
    podUID: `uid-${pod}`,
    ...(holding === null ? {} : { holding }),
    ...extra,
  });
}

const del = (node: TieredNode, pod: string) =>
  node.allocator.release({ network: 'net', containerID: `sandbox-${pod}`, ifname: 'eth0' });

/** The pod-gone release: whatever the node holds for the pod's UID, released by owner. */
async function podGone(node: TieredNode, pod: string) {
  for (const a of await node.store.list({ podUID: `uid-${pod}` })) await node.allocator.release(a);
}

/** The runtime's delete of the pod's sandbox: whatever the node holds for the container, released by owner. */
async function containerGone(node: TieredNode, pod: string) {
  for (const a of await node.store.list({ containerID: `sandbox-${pod}`, node: node.name }))
    await node.allocator.release(a);
}

const uses = async (node: TieredNode) => (await node.store.list()).filter((a) => isUseKey(a.pool));
const placeholders = async (node: TieredNode) => (await node.store.list()).filter(isHeldPlaceholder);

describe('a held address', () => {
  const clusters: TieredCluster[] = [];
  const cluster = () => {
    const c = tieredCluster(['a', 'b', 'c']);
    clusters.push(c);
    return c;
  };
  after(async () => {
    for (const c of clusters) await c.close();
  });

  it('is made at the first ADD: the owner keeps a placeholder, the pod a use, the cluster the record', async () => {
    const { nodes, tier } = cluster();
    const [a] = nodes as [TieredNode];
    const [got] = await add(a, 'p1');
    const address = got?.allocation.address as string;
    assert.ok(isUseKey(got?.allocation.pool ?? ''), 'the pod holds a use, not the block address');
    const [record] = await tier.holdings.ofHolder(KEY);
    assert.deepEqual([record?.address, record?.owner, record?.pool], [address, 'a', ranges[0]?.pool]);
    assert.deepEqual(
      (await placeholders(a)).map((p) => [p.address, p.pool]),
      [[address, record?.block]],
    );
    // A retried ADD answers the same use.
    const [again] = await add(a, 'p1');
    assert.deepEqual([again?.allocation.address, again?.fresh], [address, false]);
    assert.equal((await uses(a)).length, 1);
  });

  it('follows a StatefulSet pod re-created (new UID) on another node, and no other pod gets it meanwhile', async () => {
    const { nodes } = cluster();
    const [a, b] = nodes as [TieredNode, TieredNode];
    const [first] = await add(a, 'old');
    const address = first?.allocation.address;
    await del(a, 'old');
    assert.deepEqual(await uses(a), [], 'the DEL took the use');
    // Node a hands out every other address of its block; never the held one.
    for (let i = 0; i < 20; i++) {
      const [other] = await add(a, `plain-${i}`, null);
      assert.notEqual(other?.allocation.address, address);
    }
    const [moved] = await add(b, 'new');
    assert.equal(moved?.allocation.address, address);
    assert.equal(moved?.allocation.podUID, 'uid-new');
  });

  for (const [name, cleanup] of [
    ['its CNI DEL', del],
    ['its pod gone (release by UID)', podGone],
    ["its runtime's sandbox delete (release by container ID)", containerGone],
    ['a CNI GC that no longer lists it', (n: TieredNode) => n.allocator.gc('net', new Set()).then(() => undefined)],
  ] as const) {
    it(`keeps the new pod's address when the old pod's late cleanup (${name}) comes after the new ADD on another node`, async () => {
      const { nodes } = cluster();
      const [a, b] = nodes as [TieredNode, TieredNode];
      const [old] = await add(a, 'old');
      const [fresh] = await add(b, 'new');
      assert.equal(fresh?.allocation.address, old?.allocation.address);
      await cleanup(a, 'old');
      assert.deepEqual(await uses(a), []);
      assert.deepEqual(
        (await uses(b)).map((u) => [u.address, u.podUID]),
        [[old?.allocation.address, 'uid-new']],
      );
      assert.equal((await placeholders(a)).length, 1, 'the holding stays');
      // And b's own cleanup of the new pod leaves the holding for the next one.
      await cleanup(b, 'new');
      const [third] = await add(nodes[2] as TieredNode, 'third');
      assert.equal(third?.allocation.address, old?.allocation.address);
    });

    it(`keeps the new pod's address when the old pod's late cleanup (${name}) comes after the new ADD on the same node`, async () => {
      const { nodes } = cluster();
      const [a] = nodes as [TieredNode];
      const [old] = await add(a, 'old');
      const [fresh] = await add(a, 'new');
      assert.equal(fresh?.allocation.address, old?.allocation.address);
      assert.deepEqual(
        (await uses(a)).map((u) => u.podUID),
        ['uid-new'],
        "the old attachment's use was replaced",
      );
      await cleanup(a, 'old');
      if (name.startsWith('a CNI GC')) return; // a GC listing neither pod takes both uses: correct
      assert.deepEqual(
        (await uses(a)).map((u) => u.podUID),
        ['uid-new'],
      );
    });
  }

  it('refuses a requested address that is not the held one', async () => {
    const { nodes } = cluster();
    const [a, b] = nodes as [TieredNode, TieredNode];
    const [held] = await add(a, 'p1');
    const other = parseIP('10.40.0.200');
    await assert.rejects(
      add(b, 'p2', KEY, { requested: [other] }),
      (e) =>
        isWarrenError(e) && e.code === 'ADDRESS_UNAVAILABLE' && e.message.includes(held?.allocation.address ?? '?'),
    );
  });

  it('ends on request: the record goes, the owner releases its placeholder, uses stay until their release', async () => {
    const { nodes, tier } = cluster();
    const [a, b] = nodes as [TieredNode, TieredNode];
    const [held] = await add(b, 'p1');
    const ended = await b.allocator.holdings.endHolding(KEY);
    assert.deepEqual(
      ended.map((r) => r.address),
      [held?.allocation.address],
    );
    assert.deepEqual(await tier.holdings.ofHolder(KEY), []);
    assert.deepEqual(await placeholders(b), []);
    assert.equal((await uses(b)).length, 1, "the pod's use stays until its own release");
    // The next ADD of the holder makes a new holding (node a: its own block's address).
    const [again] = await add(a, 'p2');
    assert.equal((await tier.holdings.ofHolder(KEY))[0]?.owner, 'a');
    assert.ok(again !== undefined);
  });

  it('is refused (code 7, naming the kubernetes store) on a store that keeps no holdings', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'one.db') });
    const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'solo' });
    await assert.rejects(
      allocator.allocate({ owner: { network: 'net', containerID: 'c', ifname: 'eth0' }, ranges, holding: KEY }),
      (e) => isWarrenError(e) && e.code === 'INVALID_CONFIG' && /kubernetes store/.test(e.message),
    );
    await store.close();
  });

  it('refuses, by name, an attachment that holds an address of the range without the holding', async () => {
    const { nodes } = cluster();
    const [a] = nodes as [TieredNode];
    const [plain] = await add(a, 'p1', null);
    await assert.rejects(
      add(a, 'p1'),
      (e) =>
        isWarrenError(e) && e.code === 'ADDRESS_UNAVAILABLE' && e.message.includes(plain?.allocation.address ?? '?'),
    );
  });

  it("moves a retried ADD's use to the holding made again since, releasing the old use", async () => {
    const { nodes } = cluster();
    const [a, , c] = nodes as [TieredNode, TieredNode, TieredNode];
    const [before] = await add(a, 'p1');
    await a.allocator.holdings.endHolding(KEY);
    const [elsewhere] = await add(c, 'p2');
    assert.notEqual(elsewhere?.allocation.address, before?.allocation.address);
    const [retried] = await add(a, 'p1');
    assert.equal(retried?.allocation.address, elsewhere?.allocation.address);
    assert.deepEqual(
      (await uses(a)).map((u) => u.address),
      [elsewhere?.allocation.address],
    );
  });

  it('refuses a holding key that is none', async () => {
    const { nodes } = cluster();
    await assert.rejects(
      add(nodes[0] as TieredNode, 'p', 'deployment/x/y'),
      (e) => isWarrenError(e) && e.code === 'INVALID_CONFIG',
    );
  });
});
