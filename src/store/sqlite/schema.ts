/**
 * The SQLite store's schema and its history. A file is opened at the version this code writes;
 * an older file is upgraded in place, one version at a time, each step in a transaction of its own
 * (so a kill -9 during an upgrade leaves the file at one version or the next, never between), and
 * a newer file is refused rather than guessed at.
 */
import { randomUUID } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';
import { NO_SUCCESSION, type Succession, successionOf } from '../succession.ts';

/** The schema this code writes. */
export const SCHEMA_VERSION = 5;

/** The step from each version to the next. */
const UPGRADES: ReadonlyMap<number, string> = new Map([
  // 2: blocks. A pool has an affinity; one address per owner and range pool (the unique index, which
  // SCHEMA creates once the step is done).
  [1, `ALTER TABLE pools ADD COLUMN affinity TEXT;`],
  // 3: the cooldown a release applies is a pool attribute. Until now it was read back out of the
  // description on each release; the upgrade copies it from there once.
  [
    2,
    `ALTER TABLE pools ADD COLUMN cooldown_seconds INTEGER;
       UPDATE pools SET cooldown_seconds = json_extract(description, '$.cooldownSeconds')
       WHERE json_valid(description);`,
  ],
  // 4: the plain owner index goes. The unique owner-per-range index begins with the same columns
  // and serves every look-up by owner, so the plain one only cost a second index write per
  // allocation and release.
  [3, `DROP INDEX IF EXISTS allocations_owner;`],
  // 5: when an allocation was made and when a rest ends, on the boot's monotonic clock as well
  // (core/moment.ts): the wall clock alone cannot order them. Rows written before have none and
  // are ordered by their wall-clock times, as they always were.
  [
    4,
    `ALTER TABLE allocations ADD COLUMN created_boot TEXT;
     ALTER TABLE allocations ADD COLUMN created_mono REAL;
     ALTER TABLE resting ADD COLUMN reusable_boot TEXT;
     ALTER TABLE resting ADD COLUMN reusable_mono REAL;`,
  ],
]);

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pools (
  pool TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  cursor TEXT,
  description TEXT,
  affinity TEXT,
  cooldown_seconds INTEGER
);
CREATE TABLE IF NOT EXISTS allocations (
  pool TEXT NOT NULL,
  address TEXT NOT NULL,
  network TEXT NOT NULL,
  container_id TEXT NOT NULL,
  ifname TEXT NOT NULL,
  pod_namespace TEXT,
  pod_name TEXT,
  pod_uid TEXT,
  node TEXT NOT NULL,
  netns TEXT,
  created_at INTEGER NOT NULL,
  created_boot TEXT,
  created_mono REAL,
  PRIMARY KEY (pool, address)
) WITHOUT ROWID;
-- One address per owner and range pool: a block 'p#cidr' counts as its range pool 'p'. The CASE
-- is ipam/blocks.ts's rangePoolOfKey in SQL; keep the two the same. Its leading columns also serve
-- every look-up by owner (network, container ID, interface).
CREATE UNIQUE INDEX IF NOT EXISTS allocations_owner_range ON allocations (
  network, container_id, ifname,
  (CASE WHEN instr(pool, '#') > 0 THEN substr(pool, 1, instr(pool, '#') - 1) ELSE pool END)
);
CREATE TABLE IF NOT EXISTS resting (
  pool TEXT NOT NULL,
  address TEXT NOT NULL,
  reusable_at INTEGER NOT NULL,
  reusable_boot TEXT,
  reusable_mono REAL,
  PRIMARY KEY (pool, address)
) WITHOUT ROWID;
`;

/** Brings the file at `path` to SCHEMA_VERSION, or throws when it is newer. Retried by the caller while busy. */
export function migrateSchema(db: DatabaseSync, path: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  const versionOf = () =>
    Number(
      (db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string } | undefined)?.value,
    );
  while (UPGRADES.has(versionOf())) {
    db.exec('BEGIN IMMEDIATE');
    // Read again under the write lock: another process opening the same file may have upgraded it.
    const version = versionOf();
    const step = UPGRADES.get(version);
    db.exec(
      step === undefined
        ? 'COMMIT'
        : `${step} UPDATE meta SET value = '${version + 1}' WHERE key = 'schema_version'; COMMIT;`,
    );
  }
  db.exec(SCHEMA);
  const current = db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as
    | { value: string }
    | undefined;
  if (current === undefined) {
    db.prepare(`INSERT INTO meta (key, value) VALUES ('schema_version', ?)`).run(String(SCHEMA_VERSION));
  } else if (Number(current.value) !== SCHEMA_VERSION) {
    throw new Error(`${path}: schema version ${current.value} is not ${SCHEMA_VERSION}; this Warren cannot open it`);
  }
}

/**
 * The file's lineage: an id written once, when the file is made (randomUUID), and kept in it. A copy
 * of the file put back keeps it; a new file (the old one lost, a new machine under the node's name)
 * has another. Publications carry it (Store.lineage), so the file check compares revisions of one
 * file's history only (tiered/file-check.ts).
 */
export function lineageOf(db: DatabaseSync): string {
  const read = () =>
    (db.prepare(`SELECT value FROM meta WHERE key = 'lineage'`).get() as { value: string } | undefined)?.value;
  const known = read();
  if (known !== undefined) return known; // written once: an open of the file writes nothing after
  db.prepare(`INSERT INTO meta (key, value) VALUES ('lineage', ?) ON CONFLICT (key) DO NOTHING`).run(randomUUID());
  return read() as string;
}

/** The file's succession (tiered/lineage.ts), kept beside its lineage; none taken over when absent or unreadable. */
export function successionIn(db: DatabaseSync): Succession {
  const row = db.prepare(`SELECT value FROM meta WHERE key = 'succession'`).get() as { value: string } | undefined;
  if (row === undefined) return NO_SUCCESSION;
  try {
    return successionOf(JSON.parse(row.value)) ?? NO_SUCCESSION;
  } catch {
    return NO_SUCCESSION;
  }
}

/**
 * The meta row in which the file keeps the identity (uid) of the cluster's claim of block `block` it
 * made (tiered/stray-claims.ts): written and removed with the block's affinity, in its commit.
 */
export function claimRecordKey(block: string): string {
  return `claim ${block}`;
}

/** Writes a claim's record: (key, uid). */
export const RECORD_CLAIM =
  'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value';

/** Writes the file's succession (one row: a crash leaves the old one or the new). */
export function writeSuccession(db: DatabaseSync, succession: Succession): void {
  db.prepare(
    `INSERT INTO meta (key, value) VALUES ('succession', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  ).run(JSON.stringify(succession));
}
