/**
 * Publications that announce the addresses a node hands out next (src/store/tiered/publisher.ts,
 * publication-need.ts; issue 36: ~0.9 writes per ADD or DEL when churn is spread over many nodes),
 * counted by the fake API server itself on a ManualClock: ADDs and DELs spread over time cost a
 * write per many, an address outside what was announced is written at the next run, and removals
 * are written within the settle interval.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { type IPAddress, parseIP } from '../../../src/ipam/address.ts';
import { openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { TieredStore } from '../../../src/store/tiered/store.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { tempDir } from '../../helpers/processes.ts';
import { owner, rangesOf } from './nodes.ts';

const clock = new ManualClock(Date.now());
const fakeReady: Promise<FakeKubeApi> = startFakeKubeApi({ crds: 'deploy' });
const opened: TieredStore[] = [];

after(async () => {
  for (const store of opened) await store.close();
  await (await fakeReady).stop();
});

async function node(name: string, o: { publishSettleMs?: number } = {}) {
  const fake = await fakeReady;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(fake.kubeconfigPath);
  const tier = await openKubeTier({ kubeConfig, namespace: 'warren-system', leaseSeconds: 15, clock });
  const local = new SqliteStore({ path: join(tempDir(), 'warren.db') });
  const store = new TieredStore({ local, tier, node: name, clock, ...o });
  opened.push(store);
  return { fake, store, allocator: new Allocator({ store, clock, node: name, blocks: true }) };
}

/** Publication writes (create and update) the server counted since the last clear. */
function publicationWrites(fake: FakeKubeApi): number {
  const counts = fake.requestCounts();
  return (counts['create warrenblockpublications'] ?? 0) + (counts['update warrenblockpublications'] ?? 0);
}

/** What node `name` published, container IDs by address. */
async function published(store: TieredStore, name: string): Promise<Map<string, string>> {
  const page = await store.tier.published({ node: name });
  return new Map(page.items.flatMap((b) => b.allocations.map((a) => [a.address, a.containerID] as const)));
}

describe('publications announcing the addresses handed out next (issue 36)', () => {
  it('costs at most 15 writes for 100 ADDs then 100 DELs one second apart (one per change before)', async (t) => {
    const { fake, store, allocator } = await node('ahead-n1');
    const r = rangesOf({ range: '10.81.0.0/16', block_size: 26, network_name: 'ahead' });
    await allocator.allocate({ owner: owner('first'), ranges: r });
    await store.flush();
    fake.clearRequests();
    const tick = () => {
      clock.advance(1_000);
      return store.flush({ due: true }); // what a run on the clock publishes
    };
    for (let i = 0; i < 100; i++) {
      await allocator.allocate({ owner: owner(`c${i}`), ranges: r });
      await tick();
    }
    for (let i = 0; i < 100; i++) {
      await allocator.release(owner(`c${i}`));
      await tick();
    }
    clock.advance(600_000); // the settle interval: the releases are written by then
    await store.flush({ due: true });
    assert.deepEqual([...(await published(store, 'ahead-n1')).values()], ['first']);
    const writes = publicationWrites(fake);
    assert.ok(writes <= 15, `${writes} publication writes for 200 ADDs and DELs`);
    t.diagnostic(`publication writes for 100 ADDs and 100 DELs: ${writes}`);
    assert.equal(fake.requestCounts()['create warrenblocks'], 1, 'the second block claimed');
  });

  it('publishes an address asked for outside what was announced at the next run', async () => {
    const { fake, store, allocator } = await node('ahead-n2');
    const r = rangesOf({ range: '10.82.0.0/16', block_size: 26, network_name: 'ahead' });
    const [first] = await allocator.allocate({ owner: owner('first'), ranges: r });
    await store.flush();
    const far = (first?.allocation.address ?? '').replace(/\.\d+$/, '.60');
    await allocator.allocate({ owner: owner('asked'), ranges: r, requested: [parseIP(far) as IPAddress] });
    // A block claimed for it was published with its claim (tiered/claim-announcements.ts), not listing it.
    fake.clearRequests();
    clock.advance(1_000);
    await store.flush({ due: true });
    assert.equal(publicationWrites(fake), 1);
    assert.equal((await published(store, 'ahead-n2')).get(far), 'asked');
  });

  it('writes nothing for an ADD of an announced address, and names it once the settle interval is over', async () => {
    const { fake, store, allocator } = await node('ahead-n3', { publishSettleMs: 60_000 });
    const r = rangesOf({ range: '10.83.0.0/16', block_size: 26, network_name: 'ahead' });
    await allocator.allocate({ owner: owner('first'), ranges: r });
    await store.flush();
    fake.clearRequests();
    const [next] = await allocator.allocate({ owner: owner('next'), ranges: r });
    const address = next?.allocation.address ?? '';
    clock.advance(30_000);
    await store.flush({ due: true });
    assert.equal(publicationWrites(fake), 0, 'announced: covered');
    assert.equal(store.pendingPublication, 1, 'still to be named');
    clock.advance(30_000);
    await store.flush({ due: true });
    assert.equal(publicationWrites(fake), 1);
    assert.equal((await published(store, 'ahead-n3')).get(address), 'next');
    assert.equal(store.pendingPublication, 0);
  });

  it('publishes a removal within the settle interval, and keeps the address listed until then', async () => {
    const { fake, store, allocator } = await node('ahead-n4', { publishSettleMs: 60_000 });
    const r = rangesOf({ range: '10.84.0.0/16', block_size: 26, network_name: 'ahead' });
    const [gone] = await allocator.allocate({ owner: owner('gone'), ranges: r });
    const address = gone?.allocation.address ?? '';
    await store.flush();
    fake.clearRequests();
    await allocator.release(owner('gone'));
    clock.advance(59_000);
    await store.flush({ due: true });
    assert.equal(publicationWrites(fake), 0);
    assert.equal((await published(store, 'ahead-n4')).get(address), 'gone', 'over-covered meanwhile');
    clock.advance(1_000);
    await store.flush({ due: true });
    assert.equal(publicationWrites(fake), 1);
    assert.equal((await published(store, 'ahead-n4')).has(address), false);
  });

  it('carries the announced addresses on the wire, in pick order, and reads them back', async () => {
    const { store, allocator } = await node('ahead-n5');
    const r = rangesOf({ range: '10.85.0.0/16', block_size: 28, network_name: 'ahead' });
    const [first] = await allocator.allocate({ owner: owner('first'), ranges: r });
    await store.flush();
    const [block] = (await store.tier.published({ node: 'ahead-n5' })).items;
    const base = (first?.allocation.address ?? '').replace(/\.\d+$/, '');
    const next = Number((first?.allocation.address ?? '').split('.').at(-1)) + 1;
    assert.deepEqual(block?.ahead?.slice(0, 3), [`${base}.${next}`, `${base}.${next + 1}`, `${base}.${next + 2}`]);
  });
});
