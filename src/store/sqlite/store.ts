/**
 * The embedded default store: one SQLite file in WAL mode (node:sqlite). Each commit is one
 * IMMEDIATE transaction that checks the pool's revision first, so a commit is all-or-nothing and a
 * kill -9 at any instant leaves either the whole commit or none of it. With `synchronous=FULL`
 * (the default) a commit that returned survives power loss (its WAL synced by sqlite/wal-sync.ts,
 * one sync for the commits around it; with `durableLater` after it returned: CommitResult.durable);
 * `NORMAL` keeps it across a process crash only, for a lower cost per commit.
 *
 * node:sqlite is synchronous, so SQLite's own busy wait would freeze the agent's event loop for
 * as long as another process holds the database. SQLite is told not to wait at all; a busy
 * database is retried here on the injected clock, with the event loop free, up to a budget, and
 * then reported as TRY_AGAIN (CNI code 11) naming the file. Every other SQLite failure that is
 * about the file (full disk, corruption, I/O) is an IO_FAILURE naming the file.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Clock, systemClock } from '../../core/clock.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import { describeSqliteError, isBusy } from './errors.ts';
import {
  type AllocationRow,
  INSERT_ALLOCATION,
  readPage,
  readPools,
  rowValues,
  toAllocation,
  whereClause,
} from './rows.ts';
import { migrateSchema } from './schema.ts';
import { WalSync } from './wal-sync.ts';
import type {
  AllocationFilter,
  CommitOptions,
  CommitResult,
  ListCursor,
  ListPage,
  PoolOp,
  PoolRead,
  PoolSummary,
  Revision,
  Store,
} from '../store.ts';
import { makeDirectory } from '../../core/make-directory.ts';

export interface SqliteStoreOptions {
  /** Database file, or ':memory:'. */
  readonly path: string;
  /** 'FULL' survives power loss; 'NORMAL' survives a process crash. Default FULL. */
  readonly synchronous?: 'FULL' | 'NORMAL';
  /** Waits on the injected clock while another process holds the database. */
  readonly clock?: Clock;
  /** How long one call waits for a database another process holds, ms. Default 5000. */
  readonly busyTimeoutMs?: number;
}

export class SqliteStore implements Store {
  readonly description: string;
  readonly #path: string;
  readonly #clock: Clock;
  readonly #busyTimeoutMs: number;
  #db: DatabaseSync;
  /** Prepared once: statement preparation costs more than the statements themselves. */
  #stmt: Record<string, StatementSync>;
  /** At FULL on a file: the WAL syncs the connection (at NORMAL) leaves to this store. */
  readonly #walSync: WalSync | undefined;

  constructor(options: SqliteStoreOptions) {
    this.#path = options.path;
    this.#clock = options.clock ?? systemClock;
    this.#busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    this.description = `sqlite:${options.path}`;
    const full = (options.synchronous ?? 'FULL') === 'FULL';
    this.#walSync = full && options.path !== ':memory:' ? new WalSync(options.path) : undefined;
    try {
      this.#db = this.#open(options);
    } catch (error) {
      throw describeSqliteError(options.path, error);
    }
    this.#stmt = this.#prepare();
  }

  #open(options: SqliteStoreOptions): DatabaseSync {
    if (options.path !== ':memory:') {
      makeDirectory(dirname(options.path), 0o700);
      // SQLite takes an empty file for a new database: a database truncated to nothing (a bad
      // restore, a full disk at the wrong moment) would silently start again with no allocations,
      // and every address in use would be handed out a second time.
      if (existsSync(options.path) && statSync(options.path).size === 0) {
        throw new WarrenError(
          'IO_FAILURE',
          `database ${options.path} is an empty file that this start did not create; it may have been ` +
            `truncated: restore it from a backup, or remove it to start with no allocations`,
        );
      }
    }
    const db = new DatabaseSync(options.path);
    // No busy wait inside SQLite: it would block the event loop (see the module header).
    db.exec(`PRAGMA busy_timeout = 0;`);
    this.#db = db;
    // FULL on a file: NORMAL here, and each commit waits for its WAL sync (#walSync) before it counts as made.
    const synchronous = this.#walSync === undefined ? (options.synchronous ?? 'FULL') : 'NORMAL';
    this.#retrySync(() => db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${synchronous};`));
    this.#retrySync(() => migrateSchema(db, options.path));
    return db;
  }

  /**
   * At open only (a constructor cannot wait asynchronously): a short synchronous retry while
   * another process holds the database, before the agent serves anything.
   */
  #retrySync(fn: () => void): void {
    const deadline = Date.now() + this.#busyTimeoutMs;
    for (;;) {
      try {
        fn();
        return;
      } catch (error) {
        if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
        if (!isBusy(error) || Date.now() >= deadline) throw error;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      }
    }
  }

  #prepare(): Record<string, StatementSync> {
    const db = this.#db;
    return {
      revision: db.prepare('SELECT revision, cursor, affinity, cooldown_seconds FROM pools WHERE pool = ?'),
      allocated: db.prepare('SELECT address FROM allocations WHERE pool = ?'),
      resting: db.prepare('SELECT address, reusable_at, reusable_boot, reusable_mono FROM resting WHERE pool = ?'),
      createPool: db.prepare('INSERT INTO pools (pool, revision) VALUES (?, 1) ON CONFLICT (pool) DO NOTHING'),
      bumpRevision: db.prepare('UPDATE pools SET revision = revision + 1 WHERE pool = ? AND revision = ?'),
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

  /**
   * Runs one synchronous database step; while another process holds the database, waits on the
   * clock (the event loop stays free) and tries again, up to `budgetMs`. Failures about the file
   * come back naming it.
   */
  #run<T>(fn: () => T, budgetMs = this.#busyTimeoutMs): Promise<T> {
    // The usual case, a database nobody else holds, costs no timer and no extra async frame.
    // Measured on the monotonic clock: a wall clock stepped meanwhile neither cuts nor stretches the budget.
    const started = this.#clock.monotonic();
    try {
      return Promise.resolve(fn());
    } catch (error) {
      if (!isBusy(error) || 2 > budgetMs) return Promise.reject(describeSqliteError(this.#path, error));
    }
    return this.#retryWhileBusy(fn, budgetMs, started);
  }

  async #retryWhileBusy<T>(fn: () => T, budgetMs: number, started: number): Promise<T> {
    let delay = 2;
    for (;;) {
      await new Promise<void>((resolve) => this.#clock.setTimer(delay, resolve));
      delay = Math.min(delay * 2, 100);
      try {
        return fn();
      } catch (error) {
        if (!isBusy(error) || this.#clock.monotonic() - started + delay > budgetMs)
          throw describeSqliteError(this.#path, error);
      }
    }
  }

  #s(name: string): StatementSync {
    return this.#stmt[name] as StatementSync;
  }

  readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    return this.#run(() => this.#readPool(pool, knownRevision));
  }

  #readPool(pool: string, knownRevision?: Revision): PoolRead {
    const row = this.#s('revision').get(pool) as
      | { revision: number; cursor: string | null; affinity: string | null; cooldown_seconds: number | null }
      | undefined;
    const revision = row === undefined ? 0 : Number(row.revision);
    if (knownRevision !== undefined && knownRevision === revision) return { kind: 'unchanged', revision };
    const allocations = (this.#s('allocated').all(pool) as Array<{ address: string }>).map((r) => r.address);
    const resting = (
      this.#s('resting').all(pool) as Array<{
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
      pool,
      revision,
      ...(row?.cursor ? { cursor: row.cursor } : {}),
      ...(row?.affinity ? { affinity: row.affinity } : {}),
      ...(row === undefined || row.cooldown_seconds === null ? {} : { cooldownSeconds: Number(row.cooldown_seconds) }),
      allocations,
      resting,
    };
  }

  commit(
    pool: string,
    expected: Revision,
    ops: readonly PoolOp[],
    _guard?: unknown,
    options?: CommitOptions,
  ): Promise<CommitResult> {
    return this.#run(() => {
      const result = this.#commit(pool, expected, ops);
      if (result.kind !== 'committed' || this.#walSync === undefined) return result;
      if (options?.durableLater === true) return { ...result, durable: this.#walSync.sync() };
      this.#walSync.syncNow();
      return result;
    });
  }

  #commit(pool: string, expected: Revision, ops: readonly PoolOp[]): CommitResult {
    this.#s('begin').run();
    try {
      // The revision check and its bump are one statement: a pool row exists from its first commit
      // on (revision 1), so revision 0 means "no row yet".
      const bumped = expected === 0 ? this.#s('createPool').run(pool) : this.#s('bumpRevision').run(pool, expected);
      if (Number(bumped.changes) !== 1) {
        const row = this.#s('revision').get(pool) as { revision: number } | undefined;
        this.#s('rollback').run();
        return {
          kind: 'conflict',
          reason: `pool ${pool} is at revision ${row === undefined ? 0 : Number(row.revision)}, not ${expected}`,
        };
      }
      const revision = expected + 1;
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
          this.#s('insert').run(...rowValues(pool, a));
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
        if (op.reusableAt !== undefined)
          this.#s('rest').run(
            pool,
            op.address,
            op.reusableAt,
            op.reusableStamp?.boot ?? null,
            op.reusableStamp?.at ?? null,
          );
        return undefined;
      case 'relocate': {
        const a = op.allocation;
        const moved = this.#s('relocate').run(a.netns ?? null, pool, a.address, a.network, a.containerID, a.ifname);
        if (Number(moved.changes) !== 1)
          return `${a.address} is not held by container ${a.containerID} (${a.ifname}) in ${pool}`;
        return undefined;
      }
      case 'unrest':
        this.#s('unrest').run(pool, op.address);
        return undefined;
      case 'cursor':
        this.#s('cursor').run(op.address, pool);
        return undefined;
      case 'describe':
        this.#s('describe').run(JSON.stringify(op.description), pool);
        return undefined;
      case 'cooldown':
        this.#s('cooldown').run(op.seconds, pool);
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

  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.#run(() => {
      const rows =
        owner.ifname === undefined
          ? this.#s('byOwner').all(owner.network, owner.containerID)
          : this.#s('byOwnerIf').all(owner.network, owner.containerID, owner.ifname);
      return (rows as unknown as AllocationRow[]).map(toAllocation);
    });
  }

  list(filter: AllocationFilter = {}): Promise<Allocation[]> {
    return this.#run(() => this.#list(filter));
  }

  listPage(filter: AllocationFilter, page: { limit: number; after?: ListCursor }): Promise<ListPage> {
    return this.#run(() => readPage(this.#db, filter, page.limit, page.after));
  }

  #list(filter: AllocationFilter): Allocation[] {
    const { where, values } = whereClause(filter);
    const rows = this.#db
      .prepare(`SELECT * FROM allocations ${where} ORDER BY pool, created_at, address`)
      .all(...values);
    return (rows as unknown as AllocationRow[]).map(toAllocation);
  }

  pools(prefix = ''): Promise<PoolSummary[]> {
    return this.#run(() => readPools(this.#db, prefix));
  }

  /**
   * A real write, committed like an allocation: a store that can still be read but not written
   * (full disk, read-only file system, another process holding it) is not ready. Does not wait for
   * a busy database: readiness is about now.
   */
  async ping(): Promise<void> {
    await this.#run(() => {
      this.#s('begin').run();
      try {
        this.#s('probe').run(String(this.#clock.now()));
        this.#s('commit').run();
      } catch (error) {
        if (this.#db.isTransaction) this.#s('rollback').run();
        throw error;
      }
    }, 0);
    this.#walSync?.syncNow();
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#db.close();
  }
}
