/**
 * KubeTier (src/store/kubernetes/) through the fake API server, which speaks the real wire protocol
 * and serves the CRDs of deploy/crds/ and Leases: the ClusterTier contract, what each operation
 * costs in requests, and how failures to reach or to be allowed by the API server read.
 */
import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { blockKey } from '../../../src/ipam/blocks.ts';
import type { AddressRequest, RangeRecord } from '../../../src/store/tiered/cluster-tier.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { blockName } from '../../../src/store/kubernetes/names.ts';
import { blockObject } from '../../../src/store/kubernetes/objects.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';
import { holdingsConformance } from '../tiered/holdings-conformance.ts';
import { tierConformance } from '../tiered/tier-conformance.ts';
import { tierLoanConformance } from '../tiered/tier-loans.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 15;

function kubeConfigOf(fake: FakeKubeApi, server?: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(fake.kubeconfigPath);
  if (server !== undefined) config.clusters = config.clusters.map((c) => ({ ...c, server }));
  return config;
}

let serial = 0;
function range(): RangeRecord {
  serial += 1;
  const pool = `10.9.0.0/24@kube-tier-${serial}`;
  return {
    pool,
    space: `v4@kube-tier-${serial}`,
    subnet: '10.9.0.0/24',
    first: '10.9.0.1',
    last: '10.9.0.254',
    blockPrefix: 28,
  };
}

describe('KubeTier', () => {
  let fake: FakeKubeApi;
  const clock = new ManualClock(Date.now());
  const opened: KubeTier[] = [];
  const tier = async (o: { server?: string; requestTimeoutMs?: number; notice?: (m: string) => void } = {}) => {
    const t = await openKubeTier({
      kubeConfig: kubeConfigOf(fake, o.server),
      namespace: NAMESPACE,
      leaseSeconds: LEASE_SECONDS,
      pingSeconds: 2,
      clock,
      ...(o.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: o.requestTimeoutMs }),
      ...(o.notice === undefined ? {} : { notice: o.notice }),
    });
    opened.push(t);
    return t;
  };

  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const t of opened) await t.close();
    await fake.stop();
  });

  tierConformance('kubernetes (fake API server)', {
    create: () => tier(),
    clock,
    leaseSeconds: LEASE_SECONDS,
    // kubectl delete warrenblock: the WarrenBlock alone, its WarrenBlockPublication stays.
    removeClaimByHand: async (key) => {
      fake.deleteObject('warrenblocks', blockName(key));
    },
    // kubectl delete warrenblockpublication: the publication alone.
    removePublicationByHand: async (key) => {
      fake.deleteObject('warrenblockpublications', blockName(key));
    },
    // Its watch, which answers pings, ends with it; its Lease stays, as a kill -9 leaves it.
    crash: async (t) => {
      await (t as KubeTier).close();
    },
  });
  tierLoanConformance('kubernetes (fake API server)', { create: () => tier() });
  holdingsConformance('kubernetes (fake API server)', { create: () => tier(), clock, leaseSeconds: LEASE_SECONDS });

  it('claims a block in at most two requests (the range read once, then one create), and publishes it in one after the first', async () => {
    const r = range();
    await (await tier()).pinRange(r);
    const t = await tier();
    fake.clearRequests();
    const key = blockKey(r.pool, '10.9.0.16/28');
    assert.deepEqual(await t.pinRange({ ...r, blockPrefix: 26 }), r);
    const claim = await t.claim(r, key, 'n1');
    assert.ok(claim);
    assert.equal(fake.requests.length, 2, "a node's first claim in a range: the range's record, the block's");
    fake.clearRequests();
    await t.pinRange(r);
    assert.ok(await t.claim(r, blockKey(r.pool, '10.9.0.128/28'), 'n1'));
    assert.equal(fake.requests.length, 1, 'a later claim: the block alone');
    fake.clearRequests();
    await t.publish({ key, node: 'n1', counts: { allocated: 0, resting: 0 }, publishedAt: 1, allocations: [] });
    await t.publish({ key, node: 'n1', counts: { allocated: 0, resting: 0 }, publishedAt: 2, allocations: [] });
    assert.equal(fake.requests.length, 3, 'the first publication reads the claim and creates; each later one, one PUT');
    assert.equal(await t.claim(r, key, 'n2'), undefined);
  });

  it('watches requests with one watch however many listen, and none once none listen or the tier closes', async () => {
    const requests = () => fake.watchCount('warrenaddressrequests');
    await waitFor('no watch of requests left from before', () => (requests() === 0 ? true : undefined));
    const t = await tier();
    const views = [t.watchRequests({ node: 'w1' }, () => {}), t.watchRequests({ node: 'w1' }, () => {})];
    await waitFor('the watch open', () => (requests() === 1 ? true : undefined));
    views[0]?.close();
    assert.equal(requests(), 1, 'still listened to');
    views[1]?.close();
    await waitFor('the watch closed', () => (requests() === 0 ? true : undefined));
    t.watchRequests({ node: 'w1' }, () => {});
    await waitFor('opened again', () => (requests() === 1 ? true : undefined));
    await t.close();
    await waitFor('closed with the tier', () => (requests() === 0 ? true : undefined));
  });

  it('opens the watch of requests again after it is cut, listing again after its version expired, and tells on', async () => {
    const [t, other] = [await tier(), await tier()];
    const r = range();
    const told: AddressRequest[] = [];
    const view = t.watchRequests({ open: [r.pool] }, ({ request: q }) => {
      if (q.pool === r.pool) told.push(q);
    });
    try {
      await other.ask(r.pool, 'watched-1', 1);
      await waitFor('the ask told', () => told.find((q) => q.node === 'watched-1'));
      told.length = 0;
      // Cut; the watch opened again (after its 1 s pause on the clock) from the version reached is
      // answered 410 Expired, so the requests are listed again: the one there, unchanged, is kept
      // in the view and not told again (collection-watch.ts tells differences only).
      const lists = () => fake.requests.filter((q) => q.verb === 'list' && q.resource === 'warrenaddressrequests');
      const before = lists().length;
      fake.expireNextWatch();
      fake.breakWatches();
      await waitFor('listed again', () => {
        clock.advance(1_000);
        return lists().length > before ? true : undefined;
      });
      assert.ok(
        view.values().some((q) => q.node === 'watched-1'),
        'kept across the listing again',
      );
      await other.ask(r.pool, 'watched-2', 1);
      await waitFor('a later ask told', () => told.find((q) => q.node === 'watched-2'));
      assert.deepEqual(
        told.map((q) => q.node),
        ['watched-2'],
        'nothing told twice',
      );
    } finally {
      view.close();
    }
  });

  it("selects on the server: a node's claims by its label, a range's by its label, a page at a time", async () => {
    const t = await tier();
    const r = range();
    await t.pinRange(r);
    assert.ok(await t.claim(r, blockKey(r.pool, '10.9.0.96/28'), 'selected-node'));
    fake.clearRequests();
    await t.claimsOf('selected-node');
    await t.claimsIn(r.pool, { limit: 3 });
    await t.published({ node: 'selected-node' }, { limit: 2 });
    const queries = fake.requests.map((q) => q.query);
    assert.equal(queries.length, 3);
    assert.equal(queries[0]?.labelSelector, 'warren.dev/node=selected-node');
    assert.match(queries[1]?.labelSelector ?? '', /^warren\.dev\/range=/);
    assert.equal(queries[1]?.limit, '3');
    assert.equal(queries[2]?.labelSelector, 'warren.dev/node=selected-node');
    assert.equal(queries[2]?.limit, '2');
  });

  it('admits nothing that retires a range which claimed a block since the reading', async () => {
    const t = await tier();
    const [mine, other] = [range(), range()];
    await t.pinRange(mine);
    await t.pinRange(other);
    const reading = await t.spaces.read(mine.space);
    assert.equal(reading.held.get(other.pool), 0);
    assert.ok(await t.claim(other, blockKey(other.pool, '10.9.0.0/28'), 'n2'));
    assert.equal(await t.spaces.admit(reading, mine.pool, [other.pool]), undefined);
    const again = await t.spaces.read(mine.space);
    assert.ok((again.held.get(other.pool) ?? 0) > 0);
  });

  it('refuses to publish a block whose object someone deleted, and reads it as unclaimed', async () => {
    const t = await tier();
    const r = range();
    await t.pinRange(r);
    const key = blockKey(r.pool, '10.9.0.112/28');
    const claim = await t.claim(r, key, 'n1');
    assert.ok(claim);
    assert.ok(fake.deleteObject('warrenblocks', blockName(key)));
    const block = { key, node: 'n1', counts: { allocated: 0, resting: 0 }, publishedAt: 1, allocations: [] };
    await assert.rejects(t.publish(block), /its object is gone/);
    assert.equal(await t.claimOf(key), undefined);
    assert.equal(await t.unclaim(claim), 'gone');
  });

  it('gives back a grown claim its maker left beside an earlier one it overlaps, once its maker reads it', async () => {
    // The maker died between its create and its listing: the claim stands beside the one made first.
    const t = await tier();
    const r: RangeRecord = { ...range(), blockPrefix: 31, largestBlockPrefix: 27 };
    await t.pinRange(r);
    assert.ok(await t.claim(r, blockKey(r.pool, '10.9.0.40/31'), 'n1'));
    const large = blockKey(r.pool, '10.9.0.32/27');
    const object = blockObject(blockName(large), large, 'n2', large);
    const leftBehind = () => fake.preload('warrenblocks', [JSON.parse(JSON.stringify(object))]);
    leftBehind();
    assert.deepEqual(await t.claimsOf('n2', r.pool), [], 'its listing of its claims gives it back');
    assert.equal(fake.object('warrenblocks', blockName(large)), undefined);
    leftBehind();
    assert.equal(await t.claim(r, large, 'n2'), undefined, 'claimed again as its own, it is given back');
    assert.equal(fake.object('warrenblocks', blockName(large)), undefined);
    assert.deepEqual(
      (await t.claimsOf('n1', r.pool)).map((c) => c.key),
      [blockKey(r.pool, '10.9.0.40/31')],
      'the claim made first stands',
    );
  });

  it('gives a published block back at the version it was claimed at, and its publication with it', async () => {
    const t = await tier();
    const r = range();
    await t.pinRange(r);
    const key = blockKey(r.pool, '10.9.0.32/28');
    const claim = await t.claim(r, key, 'n1');
    assert.ok(claim);
    await t.publish({ key, node: 'n1', counts: { allocated: 0, resting: 0 }, publishedAt: 1, allocations: [] });
    const current = await t.claimOf(key);
    assert.deepEqual(current, claim, 'a publication leaves the claim as it was');
    const publications = () =>
      fake.objects('warrenblockpublications').filter((o) => o.metadata.name === blockName(key)).length;
    assert.equal(publications(), 1);
    const before = fake.requests.length;
    assert.equal(await t.unclaim(claim), 'released');
    assert.deepEqual(
      fake.requests.slice(before).map((q) => `${q.method} ${q.resource}`),
      ['DELETE warrenblocks', 'DELETE warrenblockpublications'],
      'a give-back costs the two deletes',
    );
    assert.equal(publications(), 0);
    assert.equal((await t.published({ pool: r.pool })).items.length, 0);
  });

  it("never deletes another node's publication when it gives back a claim edited to name it (soak, kubernetes seed 3839 step 27685)", async () => {
    // n1 published the block and lost its claim (deleted by hand); n2 claimed it and took the publication
    // over in place (its uid kept); the claim was edited to name n1, which gave it back. n1's give-back
    // deleted n2's publication by the uid n1 had written: a third node could then claim the block, its
    // publication gone, and hand out an address n2's container held.
    const [t1, t2] = [await tier(), await tier()];
    const r = range();
    await t1.pinRange(r);
    await t2.pinRange(r);
    const key = blockKey(r.pool, '10.9.0.48/28');
    const base = { key, counts: { allocated: 1, resting: 0 }, publishedAt: 1 };
    assert.ok(await t1.claim(r, key, 'n1'));
    await t1.publish({ ...base, node: 'n1', allocations: [] });
    assert.ok(fake.deleteObject('warrenblocks', blockName(key)));
    assert.ok(await t2.claim(r, key, 'n2'));
    const held = {
      address: '10.9.0.49',
      containerID: 'c-n2',
      ifname: 'eth0',
      network: 'kube-tier',
      pool: key,
      node: 'n2',
      createdAt: 1,
    };
    await t2.publish({ ...base, node: 'n2', allocations: [held] });
    assert.ok(
      fake.editObject('warrenblocks', blockName(key), (o) => {
        (o.spec as Record<string, unknown>).node = 'n1';
      }),
    );
    const edited = await t1.claimOf(key);
    assert.equal(edited?.node, 'n1');
    assert.equal(await t1.unclaim(edited as NonNullable<typeof edited>), 'released');
    const left = await t2.publicationOf(key);
    assert.equal(left?.node, 'n2', "n2's publication stands");
    assert.deepEqual(
      left?.allocations.map((a) => a.address),
      ['10.9.0.49'],
    );
  });

  it('answers TRY_AGAIN naming the API server while it is away', async () => {
    const t = await tier();
    const r = range();
    await t.pinRange(r);
    for (const how of ['refuse', '503'] as const) {
      await fake.setUnavailable(true, how);
      try {
        await assert.rejects(t.claim(r, blockKey(r.pool, '10.9.0.48/28'), 'n1'), (e) => {
          assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
          assert.ok(e.message.includes(fake.url), e.message);
          return true;
        });
        await assert.rejects(t.ping(), (e) => isWarrenError(e, 'TRY_AGAIN'));
      } finally {
        await fake.setUnavailable(false);
      }
    }
    assert.ok(await t.claim(r, blockKey(r.pool, '10.9.0.48/28'), 'n1'), 'and works when it is back');
  });

  it('bounds a request the server never answers by its deadline', async () => {
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const t = await tier({ server: `https://127.0.0.1:${port}`, requestTimeoutMs: 300 });
      await assert.rejects(t.ping(), (e) => {
        assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
        assert.match(e.message, /no answer within 300 ms/);
        return true;
      });
    } finally {
      silent.close();
    }
  });

  it('names the missing permission when RBAC refuses, and the CRDs when they are not installed', async () => {
    const t = await tier();
    const r = range();
    await t.pinRange(r);
    fake.forbid('create', 'warrenblocks');
    try {
      await assert.rejects(t.claim(r, blockKey(r.pool, '10.9.0.64/28'), 'n1'), (e) => {
        assert.ok(isWarrenError(e, 'IO_FAILURE'), String(e));
        assert.match(e.message, /create warrenblocks\.warren\.dev/);
        return true;
      });
    } finally {
      fake.allow('create', 'warrenblocks');
    }
    const bare = await startFakeKubeApi();
    try {
      const config = new KubeConfig();
      config.loadFromFile(bare.kubeconfigPath);
      const lone = await openKubeTier({ kubeConfig: config, namespace: NAMESPACE, leaseSeconds: 15, clock });
      await assert.rejects(lone.ping(), (e) => {
        assert.ok(isWarrenError(e, 'IO_FAILURE'), String(e));
        assert.match(e.message, /CustomResourceDefinitions of warren\.dev/);
        return true;
      });
      await lone.close();
    } finally {
      await bare.stop();
    }
  });

  it('says so when a block holds more than its object can publish', async () => {
    const notices: string[] = [];
    const t = await tier({ notice: (m) => notices.push(m) });
    const r = { ...range(), blockPrefix: 20 };
    await t.pinRange(r);
    const key = blockKey(r.pool, '10.9.0.0/20');
    assert.ok(await t.claim(r, key, 'n1'));
    const allocations = Array.from({ length: 4096 }, (_, i) => ({
      pool: key,
      address: `10.9.${i >> 8}.${i & 255}`,
      network: 'n'.repeat(250),
      containerID: 'c'.repeat(250),
      ifname: 'eth0',
      podName: 'p'.repeat(250),
      node: 'n1',
      createdAt: 1,
    }));
    await t.publish({ key, node: 'n1', counts: { allocated: 4096, resting: 0 }, publishedAt: 3, allocations });
    assert.equal(notices.length, 1);
    const [block] = (await t.published({ pool: r.pool })).items;
    assert.equal(block?.counts.allocated, 4096);
    assert.ok((block?.allocations.length ?? 0) < 4096);
  });
});
