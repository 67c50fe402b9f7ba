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
import { DatabaseSync } from 'node:sqlite';
import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Clock, systemClock } from '../../core/clock.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import { describeSqliteError, isBusy } from './errors.ts';
import { type AllocationRow, readPage, readLedgers, toAllocation, whereClause } from './rows.ts';
import { type Statements, commitAllIn, commitIn, prepareStatements, readLedgerIn } from './pool-sql.ts';
import { claimRecordKey, lineageOf, migrateSchema, successionIn, writeSuccession } from './schema.ts';
import type { Succession } from '../succession.ts';
import { WalSync } from './wal-sync.ts';
import type {
  AllocationFilter,
  CommitOptions,
  CommitResult,
  LedgerCommit,
  ListCursor,
  ListPage,
  LedgerOp,
  LedgerRead,
  LedgerSummary,
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
  readonly lineage: string;
  #succession: Succession;
  readonly #path: string;
  readonly #clock: Clock;
  readonly #busyTimeoutMs: number;
  #db: DatabaseSync;
  #stmt: Statements;
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
      this.lineage = this.#retrySync(() => lineageOf(this.#db));
      this.#succession = this.#retrySync(() => successionIn(this.#db));
    } catch (error) {
      throw describeSqliteError(options.path, error);
    }
    this.#stmt = prepareStatements(this.#db);
  }

  get succession(): Succession {
    return this.#succession;
  }

  succeed(succession: Succession): void {
    this.#retrySync(() => writeSuccession(this.#db, succession));
    this.#succession = succession;
  }

  /** Read on placement, once per claim listed: its statement prepared once, with the others. */
  recordedClaim(ledger: string): string | undefined {
    return (this.#stmt.claimRecord.get(claimRecordKey(ledger)) as { value: string } | undefined)?.value;
  }

  recordClaim(ledger: string, uid: string): void {
    this.#retrySync(() => this.#stmt.recordClaim.run(claimRecordKey(ledger), uid));
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
  #retrySync<T>(fn: () => T): T {
    const deadline = Date.now() + this.#busyTimeoutMs;
    for (;;) {
      try {
        return fn();
      } catch (error) {
        if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
        if (!isBusy(error) || Date.now() >= deadline) throw error;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      }
    }
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

  readLedger(pool: string, knownRevision?: Revision): Promise<LedgerRead> {
    return this.#run(() => readLedgerIn(this.#stmt, pool, knownRevision));
  }

  commit(
    pool: string,
    expected: Revision,
    ops: readonly LedgerOp[],
    _guard?: unknown,
    options?: CommitOptions,
  ): Promise<CommitResult> {
    return this.#run(() => {
      const result = commitIn(this.#db, this.#stmt, pool, expected, ops, options?.precededBy);
      if (result.kind !== 'committed' || this.#walSync === undefined) return result;
      if (options?.durableLater === true) return { ...result, durable: this.#walSync.sync() };
      this.#walSync.syncNow();
      return result;
    });
  }

  commitAll(commits: readonly LedgerCommit[]): Promise<CommitResult> {
    return this.#run(() => {
      const result = commitAllIn(this.#db, this.#stmt, commits);
      if (result.kind !== 'committed') return result;
      this.#walSync?.syncNow();
      return { kind: 'committed', revision: result.revisions.at(-1) ?? 0 };
    });
  }

  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.#run(() => {
      const rows =
        owner.ifname === undefined
          ? this.#stmt.byOwner.all(owner.network, owner.containerID)
          : this.#stmt.byOwnerIf.all(owner.network, owner.containerID, owner.ifname);
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

  ledgers(prefix = ''): Promise<LedgerSummary[]> {
    return this.#run(() => readLedgers(this.#db, prefix));
  }

  /**
   * A real write, committed like an allocation: a store that can still be read but not written
   * (full disk, read-only file system, another process holding it) is not ready. Does not wait for
   * a busy database: readiness is about now.
   */
  async ping(): Promise<void> {
    await this.#run(() => {
      this.#stmt.begin.run();
      try {
        this.#stmt.probe.run(String(this.#clock.now()));
        this.#stmt.commit.run();
      } catch (error) {
        if (this.#db.isTransaction) this.#stmt.rollback.run();
        throw error;
      }
    }, 0);
    this.#walSync?.syncNow();
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#db.close();
  }
}
