/**
 * The embedded default store: one SQLite file in WAL mode (node:sqlite). Each commit is one
 * IMMEDIATE transaction that checks the pool's revision first, so a commit is all-or-nothing and a
 * kill -9 at any instant leaves either the whole commit or none of it. With `synchronous=FULL`
 * (the default) a commit that returned survives power loss; `NORMAL` keeps it across a process
 * crash only, for a lower cost per commit.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type {
  AllocationFilter,
  CommitResult,
  PoolDescription,
  PoolOp,
  PoolRead,
  PoolSummary,
  Revision,
  Store,
} from './store.ts';

export interface SqliteStoreOptions {
  /** Database file, or ':memory:'. */
  readonly path: string;
  /** 'FULL' survives power loss; 'NORMAL' survives a process crash. Default FULL. */
  readonly synchronous?: 'FULL' | 'NORMAL';
}

/** 2 added pools.affinity and one address per owner and pool; a version-1 file is upgraded. */
const SCHEMA_VERSION = 2;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pools (
  pool TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  cursor TEXT,
  description TEXT,
  affinity TEXT
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
  PRIMARY KEY (pool, address)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS allocations_owner ON allocations (network, container_id, ifname);
-- One address per owner and range pool: a block 'p#cidr' counts as its range pool 'p'.
CREATE UNIQUE INDEX IF NOT EXISTS allocations_owner_range ON allocations (
  network, container_id, ifname, (CASE WHEN instr(pool, '#') > 0 THEN substr(pool, 1, instr(pool, '#') - 1) ELSE pool END)
);
CREATE TABLE IF NOT EXISTS resting (
  pool TEXT NOT NULL,
  address TEXT NOT NULL,
  reusable_at INTEGER NOT NULL,
  PRIMARY KEY (pool, address)
) WITHOUT ROWID;
`;

interface AllocationRow {
  pool: string;
  address: string;
  network: string;
  container_id: string;
  ifname: string;
  pod_namespace: string | null;
  pod_name: string | null;
  pod_uid: string | null;
  node: string;
  netns: string | null;
  created_at: number;
}

function toAllocation(row: AllocationRow): Allocation {
  const a: { -readonly [K in keyof Allocation]: Allocation[K] } = {
    pool: row.pool,
    address: row.address,
    network: row.network,
    containerID: row.container_id,
    ifname: row.ifname,
    node: row.node,
    createdAt: Number(row.created_at),
  };
  if (row.pod_namespace !== null) a.podNamespace = row.pod_namespace;
  if (row.pod_name !== null) a.podName = row.pod_name;
  if (row.pod_uid !== null) a.podUID = row.pod_uid;
  if (row.netns !== null) a.netns = row.netns;
  return a;
}

const FILTER_COLUMNS: Record<keyof AllocationFilter, string> = {
  pool: 'pool',
  network: 'network',
  containerID: 'container_id',
  ifname: 'ifname',
  podNamespace: 'pod_namespace',
  podName: 'pod_name',
  podUID: 'pod_uid',
  node: 'node',
  address: 'address',
};

export class SqliteStore implements Store {
  readonly description: string;
  #db: DatabaseSync;
  /** Prepared once: statement preparation costs more than the statements themselves. */
  #stmt: Record<string, StatementSync>;

  constructor(options: SqliteStoreOptions) {
    if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true, mode: 0o700 });
    this.description = `sqlite:${options.path}`;
    this.#db = new DatabaseSync(options.path);
    this.#db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${options.synchronous ?? 'FULL'}; PRAGMA busy_timeout = 5000;`);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    const version = this.#db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string } | undefined;
    if (version !== undefined && Number(version.value) === 1) {
      this.#db.exec(`BEGIN IMMEDIATE; ALTER TABLE pools ADD COLUMN affinity TEXT; UPDATE meta SET value = '2' WHERE key = 'schema_version'; COMMIT;`);
    }
    this.#db.exec(SCHEMA);
    const current = this.#db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string } | undefined;
    if (current === undefined) {
      this.#db.prepare(`INSERT INTO meta (key, value) VALUES ('schema_version', ?)`).run(String(SCHEMA_VERSION));
    } else if (Number(current.value) !== SCHEMA_VERSION) {
      throw new Error(`${options.path}: schema version ${current.value} is not ${SCHEMA_VERSION}; this Warren cannot open it`);
    }
    const db = this.#db;
    this.#stmt = {
      revision: db.prepare('SELECT revision, cursor, affinity FROM pools WHERE pool = ?'),
      allocated: db.prepare('SELECT address FROM allocations WHERE pool = ?'),
      resting: db.prepare('SELECT address, reusable_at FROM resting WHERE pool = ?'),
      upsertPool: db.prepare('INSERT INTO pools (pool, revision) VALUES (?, ?) ON CONFLICT (pool) DO UPDATE SET revision = excluded.revision'),
      insert: db.prepare(
        `INSERT INTO allocations (pool, address, network, container_id, ifname, pod_namespace, pod_name, pod_uid, node, netns, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      remove: db.prepare('DELETE FROM allocations WHERE pool = ? AND address = ?'),
      rest: db.prepare('INSERT OR REPLACE INTO resting (pool, address, reusable_at) VALUES (?, ?, ?)'),
      unrest: db.prepare('DELETE FROM resting WHERE pool = ? AND address = ?'),
      cursor: db.prepare('UPDATE pools SET cursor = ? WHERE pool = ?'),
      describe: db.prepare('UPDATE pools SET description = ? WHERE pool = ?'),
      affinity: db.prepare('UPDATE pools SET affinity = ? WHERE pool = ?'),
      byOwner: db.prepare('SELECT * FROM allocations WHERE network = ? AND container_id = ? ORDER BY pool, address'),
      byOwnerIf: db.prepare('SELECT * FROM allocations WHERE network = ? AND container_id = ? AND ifname = ? ORDER BY pool, address'),
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
    };
  }

  #s(name: string): StatementSync {
    return this.#stmt[name] as StatementSync;
  }

  async readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    const row = this.#s('revision').get(pool) as { revision: number; cursor: string | null; affinity: string | null } | undefined;
    const revision = row === undefined ? 0 : Number(row.revision);
    if (knownRevision !== undefined && knownRevision === revision) return { kind: 'unchanged', revision };
    const allocations = (this.#s('allocated').all(pool) as Array<{ address: string }>).map((r) => r.address);
    const resting = (this.#s('resting').all(pool) as Array<{ address: string; reusable_at: number }>).map((r) => ({
      address: r.address,
      reusableAt: Number(r.reusable_at),
    }));
    return {
      kind: 'snapshot',
      pool,
      revision,
      ...(row?.cursor ? { cursor: row.cursor } : {}),
      ...(row?.affinity ? { affinity: row.affinity } : {}),
      allocations,
      resting,
    };
  }

  async commit(pool: string, expected: Revision, ops: readonly PoolOp[]): Promise<CommitResult> {
    this.#s('begin').run();
    try {
      const row = this.#s('revision').get(pool) as { revision: number } | undefined;
      const current = row === undefined ? 0 : Number(row.revision);
      if (current !== expected) {
        this.#s('rollback').run();
        return { kind: 'conflict', reason: `pool ${pool} is at revision ${current}, not ${expected}` };
      }
      const revision = current + 1;
      this.#s('upsertPool').run(pool, revision);
      for (const op of ops) {
        const conflict = this.#apply(pool, op);
        if (conflict !== undefined) {
          this.#s('rollback').run();
          return { kind: 'conflict', reason: conflict };
        }
      }
      this.#s('commit').run();
      return { kind: 'committed', revision };
    } catch (error) {
      if (this.#db.isTransaction) this.#s('rollback').run();
      throw error;
    }
  }

  /** Applies one op inside the open transaction; returns a reason when it cannot apply. */
  #apply(pool: string, op: PoolOp): string | undefined {
    switch (op.op) {
      case 'allocate': {
        const a = op.allocation;
        if (a.pool !== pool) return `allocation for pool ${a.pool} committed to ${pool}`;
        try {
          this.#s('insert').run(
            pool,
            a.address,
            a.network,
            a.containerID,
            a.ifname,
            a.podNamespace ?? null,
            a.podName ?? null,
            a.podUID ?? null,
            a.node,
            a.netns ?? null,
            a.createdAt,
          );
        } catch (error) {
          const code = (error as { errcode?: number }).errcode;
          if (code === 1555) return `${a.address} is already allocated in ${pool}`;
          if (code === 2067) return `container ${a.containerID} (${a.ifname}) already holds an address in ${pool}`;
          throw error;
        }
        this.#s('unrest').run(pool, a.address);
        return undefined;
      }
      case 'release':
        this.#s('remove').run(pool, op.address);
        if (op.reusableAt !== undefined) this.#s('rest').run(pool, op.address, op.reusableAt);
        return undefined;
      case 'unrest':
        this.#s('unrest').run(pool, op.address);
        return undefined;
      case 'cursor':
        this.#s('cursor').run(op.address, pool);
        return undefined;
      case 'describe':
        this.#s('describe').run(JSON.stringify(op.description), pool);
        return undefined;
      case 'claim':
        this.#s('affinity').run(op.node, pool);
        return undefined;
      case 'unclaim':
        this.#s('affinity').run(null, pool);
        return undefined;
      default: {
        const never: never = op;
        throw new Error(`unknown pool op ${JSON.stringify(never)}`);
      }
    }
  }

  async findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    const rows =
      owner.ifname === undefined
        ? this.#s('byOwner').all(owner.network, owner.containerID)
        : this.#s('byOwnerIf').all(owner.network, owner.containerID, owner.ifname);
    return (rows as unknown as AllocationRow[]).map(toAllocation);
  }

  async list(filter: AllocationFilter = {}): Promise<Allocation[]> {
    const clauses: string[] = [];
    const values: string[] = [];
    for (const [key, column] of Object.entries(FILTER_COLUMNS) as Array<[keyof AllocationFilter, string]>) {
      const value = filter[key];
      if (key === 'pool' && value !== undefined) {
        clauses.push(`(pool = ? OR substr(pool, 1, ?) = ?)`);
        values.push(value, String(value.length + 1), `${value}#`);
      } else if (value !== undefined) {
        clauses.push(`${column} = ?`);
        values.push(value);
      }
    }
    const where = clauses.length === 0 ? '' : `WHERE ${clauses.join(' AND ')}`;
    const rows = this.#db.prepare(`SELECT * FROM allocations ${where} ORDER BY pool, created_at, address`).all(...values);
    return (rows as unknown as AllocationRow[]).map(toAllocation);
  }

  async pools(prefix = ''): Promise<PoolSummary[]> {
    const rows = this.#db
      .prepare(
        `SELECT p.pool, p.revision, p.description, p.affinity,
           (SELECT count(*) FROM allocations a WHERE a.pool = p.pool) AS allocated,
           (SELECT count(*) FROM resting r WHERE r.pool = p.pool) AS resting
         FROM pools p WHERE substr(p.pool, 1, ?) = ? ORDER BY p.pool`,
      )
      .all(prefix.length, prefix) as Array<{ pool: string; revision: number; description: string | null; affinity: string | null; allocated: number; resting: number }>;
    return rows.map((r) => ({
      pool: r.pool,
      revision: Number(r.revision),
      allocated: Number(r.allocated),
      resting: Number(r.resting),
      ...(r.description === null ? {} : { description: JSON.parse(r.description) as PoolDescription }),
      ...(r.affinity === null ? {} : { affinity: r.affinity }),
    }));
  }

  async ping(): Promise<void> {
    this.#db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#db.close();
  }
}
