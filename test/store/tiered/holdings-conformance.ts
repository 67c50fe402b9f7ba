/**
 * The contract of ClusterHoldings (src/store/cluster-holdings.ts), run against every tier that keeps
 * holdings (memory, Kubernetes through the fake API server): one record per (holder, range pool) of
 * two racing creates, reads by holder and by label (owner, user, kind), uses replaced per node only
 * at the version read, removal only of the record read (uid).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterHoldings, HoldingUse, NewHolding } from '../../../src/store/cluster-holdings.ts';
import type { TierFactory } from './tier-conformance.ts';

let serial = 0;
function holding(o: Partial<NewHolding> = {}): NewHolding {
  serial += 1;
  return {
    key: `statefulset/ns-${process.pid % 1000}-${serial}/web/0`,
    pool: `10.77.0.0/24@hold-${serial}`,
    address: '10.77.0.5',
    owner: `owner-${serial}`,
    block: `10.77.0.0/24@hold-${serial}#10.77.0.0/28`,
    ...o,
  };
}

const use = (node: string, pod: string): HoldingUse => ({
  node,
  network: 'net',
  containerID: `sandbox-${pod}`,
  ifname: 'eth0',
  podNamespace: 'ns',
  podName: 'web-0',
  podUID: `uid-${pod}`,
  since: 1_700_000_000_000,
});

export function holdingsConformance(name: string, factory: TierFactory): void {
  const holdings = async (): Promise<ClusterHoldings> => {
    const found = (await factory.create()).holdings;
    assert.ok(found, `${name} keeps holdings`);
    return found;
  };

  describe(`ClusterHoldings contract: ${name}`, () => {
    it('makes one record per holder and range pool: of two racing creates exactly one wins', async () => {
      const [a, b] = [await holdings(), await holdings()];
      const h = holding();
      const results = await Promise.all([a.create(h), b.create({ ...h, address: '10.77.0.9', owner: 'other' })]);
      const made = results.filter((r) => r !== undefined);
      assert.equal(made.length, 1);
      const read = await b.get(h.key, h.pool);
      assert.deepEqual([read?.address, read?.owner, read?.uid], [made[0]?.address, made[0]?.owner, made[0]?.uid]);
      assert.deepEqual(read?.uses, []);
      // The holder's second range pool is another record; ofHolder reads both, no one else's.
      const second = await a.create({ ...h, pool: `${h.pool}-v6`, address: 'fd00::5' });
      assert.ok(second);
      await a.create(holding());
      assert.deepEqual((await b.ofHolder(h.key)).map((r) => r.pool).sort(), [h.pool, `${h.pool}-v6`].sort());
      assert.equal(await a.get(h.key, 'no-such-pool'), undefined);
    });

    it('lists by owner, by user and by kind of holder', async () => {
      const t = await holdings();
      const h = holding();
      const claim = holding({ key: `ipamclaim/ns-${serial}/vm-a`, owner: h.owner });
      const record = await t.create(h);
      await t.create(claim);
      assert.ok(record);
      assert.deepEqual((await t.list({ owner: h.owner })).map((r) => r.key).sort(), [claim.key, h.key].sort());
      const kinds = (await t.list({ owner: h.owner, kind: 'ipamclaim' })).map((r) => r.key);
      assert.deepEqual(kinds, [claim.key]);
      const user = `user-${serial}`;
      assert.deepEqual(await t.list({ user }), []);
      await t.setUses(record, user, [use(user, 'p1')]);
      assert.deepEqual(
        (await t.list({ user })).map((r) => r.key),
        [h.key],
      );
    });

    it("replaces one node's uses at the version read, keeping the other nodes'", async () => {
      const t = await holdings();
      const record = await t.create(holding());
      assert.ok(record);
      const one = await t.setUses(record, 'n1', [use('n1', 'src')]);
      assert.ok(one);
      assert.equal(await t.setUses(record, 'n2', [use('n2', 'dst')]), undefined, 'stale version');
      const two = await t.setUses(one, 'n2', [use('n2', 'dst')]);
      assert.deepEqual(two?.uses.map((u) => [u.node, u.podUID]).sort(), [
        ['n1', 'uid-src'],
        ['n2', 'uid-dst'],
      ]);
      const none = await t.setUses(two ?? one, 'n1', []);
      assert.deepEqual(
        none?.uses.map((u) => u.node),
        ['n2'],
      );
      assert.deepEqual(await t.list({ user: 'n1' }).then((l) => l.filter((r) => r.key === record.key)), []);
    });

    it("selects a block's records, and hands a record to a new owner only at the version read", async () => {
      const t = await holdings();
      const h = holding();
      const record = await t.create(h);
      await t.create(holding());
      assert.ok(record);
      assert.deepEqual(
        (await t.list({ block: h.block })).map((r) => r.key),
        [h.key],
      );
      const moved = await t.setOwner(record, 'heir');
      assert.equal(moved?.owner, 'heir');
      assert.equal(await t.setOwner(record, 'late'), undefined, 'stale version');
      assert.deepEqual(
        (await t.list({ owner: 'heir', block: h.block })).map((r) => r.key),
        [h.key],
      );
      assert.deepEqual(await t.list({ owner: h.owner, block: h.block }), []);
    });

    it('removes only the record read: one made again since is another, and stays', async () => {
      const t = await holdings();
      const h = holding();
      const first = await t.create(h);
      assert.ok(first);
      assert.equal(await t.remove(first), 'removed');
      assert.equal(await t.remove(first), 'gone');
      const again = await t.create(h);
      assert.ok(again);
      assert.notEqual(again.uid, first.uid);
      assert.equal(await t.remove(first), 'changed');
      assert.equal((await t.get(h.key, h.pool))?.uid, again.uid);
    });
  });
}
