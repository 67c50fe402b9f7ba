/**
 * What the agent knows of its store comes from its options, or from the kind stated with a store
 * handed to it, never from asking the store object what it is: which kind it is, whether nodes
 * share it, and which database file is the agent's own (locked, and removed on hand-back).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { membershipOf, storeFacts } from '../../../src/agent/settings/store-kind.ts';
import { ForwardingStore } from '../../../src/store/forwarding-store.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Membership, Store, StoreCluster } from '../../../src/store/store.ts';

const sqlite = { store: 'sqlite', database: '/var/lib/warren/warren.db' } as const;
const etcd = { store: 'etcd', database: '/var/lib/warren/warren.db' } as const;

/** A SQLite store dressed with a cluster: what probing would have taken for a store shared by nodes. */
class WithMembership extends ForwardingStore {
  constructor(inner: Store) {
    super(inner, { membership: {} as Membership } as StoreCluster);
  }
}

describe('store facts', () => {
  it('takes the kind from the options: SQLite is a file of its own, etcd is shared by nodes', () => {
    assert.deepEqual(storeFacts(sqlite), { kind: 'sqlite', shared: false, database: '/var/lib/warren/warren.db' });
    // Two tiers, as on Kubernetes: the node's addresses live in its own SQLite file beside the etcd tier.
    assert.deepEqual(storeFacts(etcd), { kind: 'etcd', shared: true, database: '/var/lib/warren/warren.db' });
  });

  it("takes kubernetes as shared by nodes with a file of the agent's own: the node's addresses live in it", () => {
    const kubernetes = { store: 'kubernetes', database: '/var/lib/warren/warren.db' } as const;
    assert.deepEqual(storeFacts(kubernetes), {
      kind: 'kubernetes',
      shared: true,
      database: '/var/lib/warren/warren.db',
    });
  });

  it('never takes a store handed to the agent for a database file of its own (nothing locked or removed)', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    try {
      assert.deepEqual(storeFacts(sqlite, { store, kind: 'sqlite' }), { kind: 'sqlite', shared: false });
      assert.deepEqual(
        storeFacts(sqlite, { store, kind: 'etcd' }),
        { kind: 'etcd', shared: true },
        'the stated kind wins',
      );
    } finally {
      await store.close();
    }
  });

  it('never asks a store the options say is not shared for a membership, whatever the store carries', async () => {
    const store = new WithMembership(new SqliteStore({ path: ':memory:' }));
    try {
      assert.equal(membershipOf(store, storeFacts(sqlite)), undefined);
      assert.equal(membershipOf(store, storeFacts(etcd)), store.cluster?.membership);
    } finally {
      await store.close();
    }
  });

  it('refuses a store stated shared that keeps no membership, rather than run without the cluster chores', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    try {
      assert.throws(
        () => membershipOf(store, storeFacts(sqlite, { store, kind: 'etcd' })),
        (e: Error & { code?: string }) =>
          e.code === 'INVALID_CONFIG' && /shared by nodes but keeps no membership/.test(e.message),
      );
    } finally {
      await store.close();
    }
  });
});
