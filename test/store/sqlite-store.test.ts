import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { SqliteStore } from '../../src/store/sqlite-store.ts';
import type { Store } from '../../src/store/store.ts';
import { tempDir } from '../helpers/processes.ts';
import { storeConformance } from './conformance.ts';

const paths = new WeakMap<Store, string>();

storeConformance('SQLite file', {
  async create() {
    const path = join(tempDir(), 'warren.db');
    const store = new SqliteStore({ path });
    paths.set(store, path);
    return store;
  },
  async reopen(store) {
    const path = paths.get(store) as string;
    const again = new SqliteStore({ path });
    paths.set(again, path);
    return again;
  },
});

storeConformance('SQLite in memory', { create: async () => new SqliteStore({ path: ':memory:' }) });

describe('SqliteStore specifics', () => {
  it('runs in WAL mode with the requested durability', async () => {
    const path = join(tempDir(), 'warren.db');
    const store = new SqliteStore({ path, synchronous: 'NORMAL' });
    await store.close();
    const db = new DatabaseSync(path);
    assert.equal((db.prepare('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode, 'wal');
    db.close();
    assert.ok(statSync(path).isFile());
  });

  it('refuses a database written by a newer schema instead of guessing', async () => {
    const path = join(tempDir(), 'warren.db');
    await new SqliteStore({ path }).close();
    const db = new DatabaseSync(path);
    db.prepare(`UPDATE meta SET value = '99' WHERE key = 'schema_version'`).run();
    db.close();
    assert.throws(() => new SqliteStore({ path }), /schema version 99/);
  });

  it('upgrades a version-1 database in place and keeps its allocations', async () => {
    const path = join(tempDir(), 'warren.db');
    const v1 = new DatabaseSync(path);
    v1.exec(`
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('schema_version', '1');
      CREATE TABLE pools (pool TEXT PRIMARY KEY, revision INTEGER NOT NULL, cursor TEXT, description TEXT);
      CREATE TABLE allocations (pool TEXT NOT NULL, address TEXT NOT NULL, network TEXT NOT NULL, container_id TEXT NOT NULL,
        ifname TEXT NOT NULL, pod_namespace TEXT, pod_name TEXT, pod_uid TEXT, node TEXT NOT NULL, netns TEXT,
        created_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      CREATE TABLE resting (pool TEXT NOT NULL, address TEXT NOT NULL, reusable_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      INSERT INTO pools VALUES ('10.0.0.0/24', 3, '10.0.0.2', NULL);
      INSERT INTO allocations VALUES ('10.0.0.0/24', '10.0.0.2', 'net', 'c1', 'eth0', NULL, NULL, NULL, 'n1', NULL, 5);
    `);
    v1.close();
    const store = new SqliteStore({ path });
    try {
      assert.deepEqual((await store.list()).map((a) => a.address), ['10.0.0.2']);
      const read = await store.readPool('10.0.0.0/24');
      assert.equal(read.revision, 3);
      assert.equal((await store.commit('10.0.0.0/24', 3, [{ op: 'claim', node: 'n1' }])).kind, 'committed');
    } finally {
      await store.close();
    }
    const db = new DatabaseSync(path);
    assert.equal((db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string }).value, '2');
    db.close();
  });
});
