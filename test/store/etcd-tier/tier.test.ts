/**
 * The cluster tier on etcd (src/store/etcd-tier/), on a real etcd member: the ClusterTier contract
 * (tier-conformance.ts; every tier of the run on one prefix, as agents of one cluster share it), and
 * the Store contract on the two-tier store composed of a SQLite file and this tier (each store on a
 * prefix of its own, reopened on the same one).
 */
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Etcd3 } from 'etcd3';
import { ManualClock } from '../../../src/core/clock.ts';
import { blockKey } from '../../../src/ipam/blocks.ts';
import { type EtcdTier, openEtcdTier } from '../../../src/store/etcd-tier/tier.ts';
import { blockRecord, publishedRecord } from '../../../src/store/etcd-tier/kv.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Store } from '../../../src/store/store.ts';
import { TieredStore } from '../../../src/store/tiered/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { tempDir } from '../../helpers/processes.ts';
import { storeConformance } from '../conformance.ts';
import { tierConformance } from '../tiered/tier-conformance.ts';

const LEASE_SECONDS = 15;
let etcd: EtcdCluster;
before(async () => {
  etcd = await startEtcd(1);
});
after(async () => {
  await etcd?.stop();
});

const RUN_PREFIX = `/tier-${process.pid}/`;
const tier = (prefix: string): Promise<EtcdTier> =>
  openEtcdTier({ endpoints: etcd.endpoints, prefix, leaseSeconds: LEASE_SECONDS });

tierConformance('etcd (one member)', {
  create: () => tier(RUN_PREFIX),
  leaseSeconds: LEASE_SECONDS,
  // etcdctl del of the claim key: the claim alone, its publication (and the node's index key) stay.
  removeClaimByHand: async (key) => {
    const client = new Etcd3({ hosts: etcd.endpoints });
    try {
      await client.delete().key(`${RUN_PREFIX}${blockRecord(key)}`);
    } finally {
      client.close();
    }
  },
  // etcdctl del of the publication key: the publication alone.
  removePublicationByHand: async (key) => {
    const client = new Etcd3({ hosts: etcd.endpoints });
    try {
      await client.delete().key(`${RUN_PREFIX}${publishedRecord(key)}`);
    } finally {
      client.close();
    }
  },
});

const clock = new ManualClock(Date.now());
let serial = 0;
const opened = new WeakMap<Store, { prefix: string; path: string }>();

async function tiered(where: { prefix: string; path: string }): Promise<TieredStore> {
  const store = new TieredStore({
    local: new SqliteStore({ path: where.path }),
    tier: await tier(where.prefix),
    node: 'n1',
    clock,
  });
  opened.set(store, where);
  return store;
}

storeConformance('tiered: SQLite file and the etcd tier', {
  create: () => {
    serial += 1;
    return tiered({ prefix: `/tiered-${process.pid}-${serial}/`, path: join(tempDir(), 'warren.db') });
  },
  reopen: (store) => tiered(opened.get(store) as { prefix: string; path: string }),
});

describe('etcd tier', () => {
  it('keeps each tier to its prefix: a claim under one prefix is not seen under another', async () => {
    const [a, b] = [await tier(`/apart-a-${process.pid}/`), await tier(`/apart-b-${process.pid}/`)];
    try {
      const range = {
        pool: '10.77.0.0/24@apart',
        space: 'v4@apart',
        subnet: '10.77.0.0/24',
        first: '10.77.0.1',
        last: '10.77.0.254',
        blockPrefix: 28,
      };
      const key = blockKey(range.pool, '10.77.0.0/28');
      await a.pinRange(range);
      await b.pinRange({ ...range, blockPrefix: 26 });
      assert.ok(await a.claim(range, key, 'node-a'));
      assert.equal(await b.claimOf(key), undefined);
      assert.ok(await b.claim(range, key, 'node-b'), 'the same block is free under the other prefix');
      assert.deepEqual(await a.claimHolders(), ['node-a']);
      assert.equal((await b.pinRange(range)).blockPrefix, 26);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('names the holders of claims with node names that prefix one another (node-1, node-10)', async () => {
    const t = await tier(`/holders-${process.pid}/`);
    try {
      const range = {
        pool: '10.78.0.0/24@holders',
        space: 'v4@holders',
        subnet: '10.78.0.0/24',
        first: '10.78.0.1',
        last: '10.78.0.254',
        blockPrefix: 28,
      };
      await t.pinRange(range);
      const nodes = ['node-1', 'node-10', 'node-1', 'node-2', 'node-10'];
      for (const [i, n] of nodes.entries())
        assert.ok(await t.claim(range, blockKey(range.pool, `10.78.0.${i * 16}/28`), n));
      assert.deepEqual(await t.claimHolders(), ['node-1', 'node-10', 'node-2']);
      assert.deepEqual((await t.claimsOf('node-1')).length, 2);
      assert.deepEqual((await t.claimsOf('node-10')).length, 2);
    } finally {
      await t.close();
    }
  });
});
