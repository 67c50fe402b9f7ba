/**
 * One pool of the SQLite store in SQL: the prepared statements, a pool's read (its revision, allocated and
 * resting addresses, cursor, affinity, cool-down) and a commit of ops against an expected revision.
 *
 * Guarantees:
 * - A commit (of one pool, or of several: `commitAllIn`) is one IMMEDIATE transaction: each pool's
 *   revision check and its bump are one statement, then its ops;
 *   any op that cannot apply (an address taken, a container already holding one, a relocation of what it does
 *   not hold) or any failure rolls the whole transaction back, so a commit is all or nothing.
 * - A read at the revision the caller knows answers `unchanged` without reading the addresses.
 * Synchronous, on the caller's connection: waiting out a busy database and syncing the WAL are store.ts's.
 */
import type { DatabaseSync } from 'node:sqlite';
import { INSERT_ALLOCATION, rowValues } from './rows.ts';
import { RECORD_CLAIM, claimRecordKey } from './schema.ts';
import type { CommitResult, LedgerCommit, LedgerOp, LedgerRead, Revision } from '../store.ts';

/** Prepared once per connection: statement preparation costs more than the statements themselves. */
export type Statements = ReturnType<typeof prepareStatements>;

/** The pools' statements, and the owner lookups and the write probe store.ts runs on the same connection. */
export function prepareStatements(db: DatabaseSync) {
  return {
    revision: db.prepare('SELECT revision, cursor, affinity, cooldown_seconds FROM pools WHERE pool = ?'),
    allocated: db.prepare('SELECT address FROM allocations WHERE pool = ?'),
    resting: db.prepare('SELECT address, reusable_at, reusable_boot, reusable_mono FROM resting WHERE pool = ?'),
    createPool: db.prepare('INSERT INTO pools (pool, revision) VALUES (?, 1) ON CONFLICT (pool) DO NOTHING'),
    bumpRevision: db.prepare('UPDATE pools SET revision = revision + 1 WHERE pool = ? AND revision = ?'),
    revisionPast: db.prepare('UPDATE pools SET revision = ? WHERE pool = ? AND revision < ?'),
    insert: db.prepare(INSERT_ALLOCATION),
    remove: db.prepare('DELETE FROM allocations WHERE pool = ? AND address = ?'),
    relocate: db.prepare(
      'UPDATE allocations SET netns = ? WHERE pool = ? AND address = ? AND network = ? AND container_id = ' +
        '? AND ifname = ?',
    ),
    rest: db.prepare(
      'INSERT OR REPLACE INTO resting (pool, address, reusable_at, reusable_boot, reusable_mono) VALUES ' +
        '(?, ?, ?, ?, ?)',
    ),
    unrest: db.prepare('DELETE FROM resting WHERE pool = ? AND address = ?'),
    cursor: db.prepare('UPDATE pools SET cursor = ? WHERE pool = ?'),
    describe: db.prepare('UPDATE pools SET description = ? WHERE pool = ?'),
    affinity: db.prepare('UPDATE pools SET affinity = ? WHERE pool = ?'),
    claimRecord: db.prepare('SELECT value FROM meta WHERE key = ?'),
    recordClaim: db.prepare(RECORD_CLAIM),
    forgetClaim: db.prepare('DELETE FROM meta WHERE key = ?'),
    cooldown: db.prepare('UPDATE pools SET cooldown_seconds = ? WHERE pool = ?'),
    byOwner: db.prepare('SELECT * FROM allocations WHERE network = ? AND container_id = ? ORDER BY pool, address'),
    byOwnerIf: db.prepare(
      'SELECT * FROM allocations WHERE network = ? AND container_id = ? AND ifname = ? ORDER BY pool, address',
    ),
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    probe: db.prepare(
      `INSERT INTO meta (key, value) VALUES ('write_probe', ?) ON CONFLICT (key) DO UPDATE SET value = ` +
        `excluded.value`,
    ),
  };
}

/** A pool as it stands, or `unchanged` at `knownRevision`. */
export function readLedgerIn(s: Statements, pool: string, knownRevision?: Revision): LedgerRead {
  const row = s.revision.get(pool) as
    | { revision: number; cursor: string | null; affinity: string | null; cooldown_seconds: number | null }
    | undefined;
  const revision = row === undefined ? 0 : Number(row.revision);
  if (knownRevision !== undefined && knownRevision === revision) return { kind: 'unchanged', revision };
  const allocations = (s.allocated.all(pool) as Array<{ address: string }>).map((r) => r.address);
  const resting = (
    s.resting.all(pool) as Array<{
      address: string;
      reusable_at: number;
      reusable_boot: string | null;
      reusable_mono: number | null;
    }>
  ).map((r) => ({
    address: r.address,
    reusableAt: Number(r.reusable_at),
    ...(r.reusable_boot === null || r.reusable_mono === null
      ? {}
      : { reusableStamp: { boot: r.reusable_boot, at: Number(r.reusable_mono) } }),
  }));
  return {
    kind: 'snapshot',
    ledger: pool,
    revision,
    ...(row?.cursor ? { cursor: row.cursor } : {}),
    ...(row?.affinity ? { affinity: row.affinity } : {}),
    ...(row === undefined || row.cooldown_seconds === null ? {} : { cooldownSeconds: Number(row.cooldown_seconds) }),
    allocations,
    resting,
  };
}

/**
 * Commits `ops` to `pool` if it is at `expected`, after `precededBy` (CommitOptions) in the same
 * transaction (see the header); a conflict names what stood in the way.
 */
export function commitIn(
  db: DatabaseSync,
  s: Statements,
  pool: string,
  expected: Revision,
  ops: readonly LedgerOp[],
  precededBy: readonly LedgerCommit[] = [],
): CommitResult {
  const result = commitAllIn(db, s, [...precededBy, { ledger: pool, expected, ops }]);
  return result.kind === 'committed'
    ? { kind: 'committed', revision: result.revisions.at(-1) ?? expected + 1 }
    : result;
}

/**
 * Commits to several pools in one transaction, in order (Store.commitAll): every pool at its
 * expected revision, or none of them.
 */
export function commitAllIn(
  db: DatabaseSync,
  s: Statements,
  commits: readonly LedgerCommit[],
):
  | { readonly kind: 'committed'; readonly revisions: Revision[] }
  | { readonly kind: 'conflict'; readonly reason: string } {
  s.begin.run();
  try {
    const revisions: Revision[] = [];
    for (const { ledger: pool, expected, ops } of commits) {
      // The revision check and its bump are one statement: a pool row exists from its first commit
      // on (revision 1), so revision 0 means "no row yet".
      const bumped = expected === 0 ? s.createPool.run(pool) : s.bumpRevision.run(pool, expected);
      if (Number(bumped.changes) !== 1) {
        const row = s.revision.get(pool) as { revision: number } | undefined;
        s.rollback.run();
        return {
          kind: 'conflict',
          reason: `pool ${pool} is at revision ${row === undefined ? 0 : Number(row.revision)}, not ${expected}`,
        };
      }
      let revision = expected + 1;
      for (const op of ops) {
        const conflict = applyOp(s, pool, op);
        if (conflict !== undefined) {
          s.rollback.run();
          return { kind: 'conflict', reason: conflict };
        }
        if (op.op === 'revisionPast') revision = Math.max(revision, op.revision + 1);
      }
      revisions.push(revision);
    }
    s.commit.run();
    return { kind: 'committed', revisions };
  } catch (error) {
    if (db.isTransaction) s.rollback.run();
    throw error;
  }
}

/** Applies one op inside the open transaction; returns a reason when it cannot apply. */
function applyOp(s: Statements, pool: string, op: LedgerOp): string | undefined {
  switch (op.op) {
    case 'allocate': {
      const a = op.allocation;
      if (a.pool !== pool) return `allocation for pool ${a.pool} committed to ${pool}`;
      try {
        s.insert.run(...rowValues(pool, a));
      } catch (error) {
        const code = (error as { errcode?: number }).errcode;
        if (code === 1555) return `${a.address} is already allocated in ${pool}`;
        if (code === 2067) return `container ${a.containerID} (${a.ifname}) already holds an address in ${pool}`;
        throw error;
      }
      s.unrest.run(pool, a.address);
      return undefined;
    }
    case 'release':
      s.remove.run(pool, op.address);
      if (op.reusableAt !== undefined)
        s.rest.run(pool, op.address, op.reusableAt, op.reusableStamp?.boot ?? null, op.reusableStamp?.at ?? null);
      return undefined;
    case 'relocate': {
      const a = op.allocation;
      const moved = s.relocate.run(a.netns ?? null, pool, a.address, a.network, a.containerID, a.ifname);
      if (Number(moved.changes) !== 1)
        return `${a.address} is not held by container ${a.containerID} (${a.ifname}) in ${pool}`;
      return undefined;
    }
    case 'unrest':
      s.unrest.run(pool, op.address);
      return undefined;
    case 'cursor':
      s.cursor.run(op.address, pool);
      return undefined;
    case 'describe':
      s.describe.run(JSON.stringify(op.description), pool);
      return undefined;
    case 'cooldown':
      s.cooldown.run(op.seconds, pool);
      return undefined;
    case 'claim':
      s.affinity.run(op.node, pool);
      // In the commit's transaction: the file never records the claim without the record it made.
      if (op.uid === undefined) s.forgetClaim.run(claimRecordKey(pool));
      else s.recordClaim.run(claimRecordKey(pool), op.uid);
      return undefined;
    case 'unclaim':
      s.affinity.run(null, pool);
      s.forgetClaim.run(claimRecordKey(pool));
      return undefined;
    case 'revisionPast':
      s.revisionPast.run(op.revision + 1, pool, op.revision + 1);
      return undefined;
    default: {
      const never: never = op;
      throw new Error(`unknown pool op ${JSON.stringify(never)}`);
    }
  }
}
