/**
 * The SQLite schema's unique index (one address per owner and range pool) repeats the block-key
 * rule of ipam/blocks.ts in SQL: a block `p#cidr` counts as its range pool `p`. The two must agree,
 * or the index lets an owner hold two addresses of one range (or refuses a legitimate one). The
 * expression is read from the index as SQLite stored it and evaluated by SQLite itself, over keys
 * from the codec and over arbitrary text, against rangePoolOfKey.
 */
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BLOCK_SEPARATOR } from '../../../src/ipam/pool-key.ts';
import { blockKey, rangePoolOfKey } from '../../../src/ipam/blocks.ts';
import { migrateSchema } from '../../../src/store/sqlite/schema.ts';

/** A database at the current schema, and the range-pool expression of its owner index, as SQLite keeps it. */
function schema(): { db: DatabaseSync; expression: string } {
  const db = new DatabaseSync(':memory:');
  migrateSchema(db, ':memory:');
  const row = db
    .prepare(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'allocations_owner_range'`)
    .get() as { sql: string } | undefined;
  assert.ok(row !== undefined, 'the owner index exists');
  // The index's last column: the one expression over `pool`.
  const match = /\((CASE\b[\s\S]*\bEND)\s*\)\s*\)\s*$/i.exec(row.sql);
  assert.ok(match !== null, `no CASE expression in ${row.sql}`);
  return { db, expression: match[1] as string };
}

/** The expression evaluated by SQLite over each key, in order. */
function rangePoolsInSql(db: DatabaseSync, expression: string, keys: readonly string[]): string[] {
  db.exec('DROP TABLE IF EXISTS temp.keys; CREATE TEMP TABLE keys (n INTEGER PRIMARY KEY, pool TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO temp.keys (n, pool) VALUES (?, ?)');
  keys.forEach((key, n) => insert.run(n, key));
  return (db.prepare(`SELECT ${expression} AS range FROM temp.keys ORDER BY n`).all() as Array<{ range: string }>).map(
    (r) => r.range,
  );
}

/** Text as network names and keys may hold it: any Unicode but NUL and lone surrogates (neither reaches a pool key). */
const text = (options: { minLength?: number; maxLength?: number } = {}) =>
  fc.string({ unit: 'grapheme', ...options }).filter((s) => !s.includes('\0'));

describe('the SQLite owner index and the block-key codec', () => {
  it('reads the range pool of the keys Warren writes as rangePoolOfKey does', () => {
    const { db, expression } = schema();
    const keys = [
      '10.0.0.0/24',
      'net1/10.0.0.0/16',
      blockKey('net1/10.0.0.0/16', '10.0.4.0/26'),
      blockKey('fd00::/48', 'fd00:0:0:1::/64'),
      '',
      BLOCK_SEPARATOR,
      `a${BLOCK_SEPARATOR}b${BLOCK_SEPARATOR}c`,
    ];
    assert.deepEqual(rangePoolsInSql(db, expression, keys), keys.map(rangePoolOfKey));
    db.close();
  });

  it('agrees with rangePoolOfKey on every key, however many separators and whatever the text (property)', () => {
    const { db, expression } = schema();
    const blockKeys = fc
      .tuple(
        text().filter((p) => !p.includes(BLOCK_SEPARATOR)),
        text({ minLength: 1 }),
      )
      .map(([pool, cidr]) => blockKey(pool, cidr));
    const withSeparators = fc
      .array(fc.oneof(text({ maxLength: 6 }), fc.constant(BLOCK_SEPARATOR)), { maxLength: 8 })
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.array(fc.oneof(text(), blockKeys, withSeparators), { minLength: 1, maxLength: 30 }), (keys) => {
        assert.deepEqual(rangePoolsInSql(db, expression, keys), keys.map(rangePoolOfKey));
      }),
      { numRuns: 300 },
    );
    db.close();
  });
});
