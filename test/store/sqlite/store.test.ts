import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { SCHEMA_VERSION } from '../../../src/store/sqlite/schema.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Store } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/processes.ts';
import { storeConformance } from '../conformance.ts';

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
      assert.deepEqual(
        (await store.list()).map((a) => a.address),
        ['10.0.0.2'],
      );
      const read = await store.readLedger('10.0.0.0/24');
      assert.equal(read.revision, 3);
      assert.equal((await store.commit('10.0.0.0/24', 3, [{ op: 'claim', node: 'n1' }])).kind, 'committed');
    } finally {
      await store.close();
    }
    const db = new DatabaseSync(path);
    // Upgraded through every version to the current one (2 when this test was written).
    assert.equal(
      (db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string }).value,
      String(SCHEMA_VERSION),
    );
    db.close();
  });

  it("upgrades a version-2 database in place: the cooldown its descriptions recorded becomes the pools' attribute", async () => {
    const path = join(tempDir(), 'warren.db');
    const v2 = new DatabaseSync(path);
    const described = (cooldownSeconds: number) =>
      JSON.stringify({
        subnet: '10.0.0.0/24',
        first: '10.0.0.1',
        last: '10.0.0.254',
        capacity: '254',
        cooldownSeconds,
      });
    v2.exec(`
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('schema_version', '2');
      CREATE TABLE pools (pool TEXT PRIMARY KEY, revision INTEGER NOT NULL, cursor TEXT, description TEXT, affinity TEXT);
      CREATE TABLE allocations (pool TEXT NOT NULL, address TEXT NOT NULL, network TEXT NOT NULL, container_id TEXT NOT NULL,
        ifname TEXT NOT NULL, pod_namespace TEXT, pod_name TEXT, pod_uid TEXT, node TEXT NOT NULL, netns TEXT,
        created_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      CREATE INDEX allocations_owner ON allocations (network, container_id, ifname);
      CREATE UNIQUE INDEX allocations_owner_range ON allocations (
        network, container_id, ifname, (CASE WHEN instr(pool, '#') > 0 THEN substr(pool, 1, instr(pool, '#') - 1) ELSE pool END));
      CREATE TABLE resting (pool TEXT NOT NULL, address TEXT NOT NULL, reusable_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      INSERT INTO allocations VALUES ('10.0.0.0/24#10.0.0.0/28', '10.0.0.2', 'net', 'c1', 'eth0', NULL, NULL, NULL, 'n1', NULL, 5);
    `);
    const pool = v2.prepare('INSERT INTO pools VALUES (?, ?, ?, ?, ?)');
    pool.run('10.0.0.0/24#10.0.0.0/28', 4, '10.0.0.2', described(45), 'n1');
    pool.run('10.0.0.0/24#10.0.0.16/28', 2, null, described(0), null);
    pool.run('10.1.0.0/24', 1, null, null, null);
    v2.close();
    const store = new SqliteStore({ path });
    try {
      const read = await store.readLedger('10.0.0.0/24#10.0.0.0/28');
      assert.equal(read.kind, 'snapshot');
      if (read.kind === 'snapshot') {
        assert.deepEqual(
          [read.revision, read.affinity, read.cursor, read.allocations],
          [4, 'n1', '10.0.0.2', ['10.0.0.2']],
        );
        assert.equal(read.cooldownSeconds, 45);
      }
      const zero = await store.readLedger('10.0.0.0/24#10.0.0.16/28');
      assert.equal(zero.kind === 'snapshot' && zero.cooldownSeconds, 0);
      const undescribed = await store.readLedger('10.1.0.0/24');
      assert.equal(undescribed.kind === 'snapshot' && undescribed.cooldownSeconds, undefined);
      assert.equal(
        (await store.ledgers()).find((p) => p.ledger === '10.0.0.0/24#10.0.0.0/28')?.description?.cooldownSeconds,
        45,
        'the description is kept',
      );
    } finally {
      await store.close();
    }
    const db = new DatabaseSync(path);
    assert.equal(
      (db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string }).value,
      String(SCHEMA_VERSION),
    );
    db.close();
    // Opened again at the current version: nothing to upgrade, nothing lost.
    const again = new SqliteStore({ path });
    const read = await again.readLedger('10.0.0.0/24#10.0.0.0/28');
    assert.equal(read.kind === 'snapshot' && read.cooldownSeconds, 45);
    await again.close();
  });

  it('upgrades a version-4 database in place: its allocations and rests, recorded on the wall clock alone, stay readable beside new ones stamped on the monotonic clock', async () => {
    const path = join(tempDir(), 'warren.db');
    const v4 = new DatabaseSync(path);
    v4.exec(`
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('schema_version', '4');
      CREATE TABLE pools (pool TEXT PRIMARY KEY, revision INTEGER NOT NULL, cursor TEXT, description TEXT, affinity TEXT, cooldown_seconds INTEGER);
      CREATE TABLE allocations (pool TEXT NOT NULL, address TEXT NOT NULL, network TEXT NOT NULL, container_id TEXT NOT NULL,
        ifname TEXT NOT NULL, pod_namespace TEXT, pod_name TEXT, pod_uid TEXT, node TEXT NOT NULL, netns TEXT,
        created_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      CREATE UNIQUE INDEX allocations_owner_range ON allocations (
        network, container_id, ifname, (CASE WHEN instr(pool, '#') > 0 THEN substr(pool, 1, instr(pool, '#') - 1) ELSE pool END));
      CREATE TABLE resting (pool TEXT NOT NULL, address TEXT NOT NULL, reusable_at INTEGER NOT NULL, PRIMARY KEY (pool, address)) WITHOUT ROWID;
      INSERT INTO pools VALUES ('10.0.0.0/24', 2, '10.0.0.3', NULL, NULL, 30);
      INSERT INTO allocations VALUES ('10.0.0.0/24', '10.0.0.2', 'net', 'old', 'eth0', NULL, NULL, NULL, 'n1', NULL, 5);
      INSERT INTO resting VALUES ('10.0.0.0/24', '10.0.0.3', 7000);
    `);
    v4.close();
    const store = new SqliteStore({ path });
    try {
      assert.deepEqual(await store.findByOwner({ network: 'net', containerID: 'old', ifname: 'eth0' }), [
        {
          pool: '10.0.0.0/24',
          address: '10.0.0.2',
          network: 'net',
          containerID: 'old',
          ifname: 'eth0',
          node: 'n1',
          createdAt: 5,
        },
      ]);
      const stamped = {
        pool: '10.0.0.0/24',
        address: '10.0.0.4',
        network: 'net',
        containerID: 'new',
        ifname: 'eth0',
        node: 'n1',
        createdAt: 9,
        createdStamp: { boot: 'b-1', at: 1234.5 },
      };
      const ops = [
        { op: 'allocate', allocation: stamped },
        { op: 'release', address: '10.0.0.2', reusableAt: 8000, reusableStamp: { boot: 'b-1', at: 4321.25 } },
      ] as const;
      assert.equal((await store.commit('10.0.0.0/24', 2, ops)).kind, 'committed');
      assert.deepEqual(await store.findByOwner({ network: 'net', containerID: 'new', ifname: 'eth0' }), [stamped]);
      const read = await store.readLedger('10.0.0.0/24');
      assert.ok(read.kind === 'snapshot');
      assert.deepEqual(
        [...read.resting].sort((a, b) => (a.address < b.address ? -1 : 1)),
        [
          { address: '10.0.0.2', reusableAt: 8000, reusableStamp: { boot: 'b-1', at: 4321.25 } },
          { address: '10.0.0.3', reusableAt: 7000 },
        ],
      );
    } finally {
      await store.close();
    }
    const db = new DatabaseSync(path);
    assert.equal(
      (db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string }).value,
      String(SCHEMA_VERSION),
    );
    db.close();
  });

  it('keeps one owner index, not two: a version-3 file loses the plain one and look-ups by owner use the unique one', async () => {
    const path = join(tempDir(), 'warren.db');
    await new SqliteStore({ path }).close();
    const v3 = new DatabaseSync(path);
    // A version-3 file as version 3 wrote it: without the columns version 5 adds.
    v3.exec(`UPDATE meta SET value = '3' WHERE key = 'schema_version'; CREATE INDEX allocations_owner ON allocations (network, container_id, ifname);
      ALTER TABLE allocations DROP COLUMN created_boot; ALTER TABLE allocations DROP COLUMN created_mono;
      ALTER TABLE resting DROP COLUMN reusable_boot; ALTER TABLE resting DROP COLUMN reusable_mono;`);
    v3.close();
    await new SqliteStore({ path }).close();
    const db = new DatabaseSync(path);
    try {
      const indexes = (
        db
          .prepare(
            `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'allocations' AND sql IS NOT NULL ORDER BY name`,
          )
          .all() as Array<{ name: string }>
      ).map((r) => r.name);
      assert.deepEqual(indexes, ['allocations_owner_range']);
      const plan = db
        .prepare('EXPLAIN QUERY PLAN SELECT * FROM allocations WHERE network = ? AND container_id = ? AND ifname = ?')
        .all('n', 'c', 'eth0') as Array<{ detail: string }>;
      assert.match(plan.map((p) => p.detail).join('; '), /USING INDEX allocations_owner_range/);
    } finally {
      db.close();
    }
  });

  it("makes a commit's precededBy in its transaction, first: an owner's address moved between two ledgers of one range, or nothing", async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const pod = { address: '10.1.0.5', network: 'n', containerID: 'pod', ifname: 'eth0', node: 'a', createdAt: 1 };
    const loan = 'r#10.1.0.5/32';
    const block = 'r#10.1.0.0/28';
    await store.commit(loan, 0, [{ op: 'allocate', allocation: { ...pod, pool: loan } }]);
    const moveAt = (loanRevision: number) =>
      store.commit(
        block,
        0,
        [
          { op: 'claim', node: 'a' },
          { op: 'allocate', allocation: { ...pod, pool: block } },
        ],
        undefined,
        {
          precededBy: [{ ledger: loan, expected: loanRevision, ops: [{ op: 'release', address: pod.address }] }],
        },
      );
    // The loan ledger moved on since it was read: neither ledger changes.
    assert.equal((await moveAt(7)).kind, 'conflict');
    assert.deepEqual(
      (await store.list({ containerID: 'pod' })).map((a) => a.pool),
      [loan],
    );
    // One address per owner and range: without the loan ledger's release first, the block could not take it.
    assert.equal(
      (await store.commit(block, 0, [{ op: 'allocate', allocation: { ...pod, pool: block } }])).kind,
      'conflict',
    );
    const moved = await moveAt(1);
    assert.equal(moved.kind, 'committed');
    assert.deepEqual(moved.kind === 'committed' && moved.revision, 1, "the block's own revision");
    assert.deepEqual(
      (await store.list({ containerID: 'pod' })).map((a) => a.pool),
      [block],
    );
    const read = await store.readLedger(loan);
    assert.equal(read.kind === 'snapshot' && read.revision, 2);
    await store.close();
  });

  it('keeps the claim record a block was claimed with, in its commit, and forgets it with the block (stray-claims.ts)', async () => {
    const dir = tempDir();
    const store = new SqliteStore({ path: join(dir, 'warren.db') });
    const block = 'r#10.1.0.0/28';
    assert.equal(store.recordedClaim(block), undefined, 'none claimed');
    await store.commit(block, 0, [{ op: 'claim', node: 'a', uid: 'uid-1' }]);
    assert.equal(store.recordedClaim(block), 'uid-1');
    store.recordClaim(block, 'uid-2'); // claimed again in the cluster
    assert.equal(store.recordedClaim(block), 'uid-2');
    await store.close();
    const again = new SqliteStore({ path: join(dir, 'warren.db') });
    assert.equal(again.recordedClaim(block), 'uid-2', 'kept in the file');
    await again.commit(block, 1, [{ op: 'unclaim' }]);
    assert.equal(again.recordedClaim(block), undefined, 'given up with the block');
    await again.commit(block, 2, [{ op: 'claim', node: 'a' }]);
    assert.equal(again.recordedClaim(block), undefined, 'a claim recorded without its record (a handover) knows none');
    await again.close();
  });
});
