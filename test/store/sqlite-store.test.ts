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
});
