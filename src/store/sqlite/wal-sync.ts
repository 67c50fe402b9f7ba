/**
 * Group commit for the SQLite store (sqlite/store.ts) at `--sync FULL`: the connection commits
 * with synchronous=NORMAL (a commit is appended to the WAL file, no disk sync), and this syncs the
 * WAL file itself (fdatasync, off the event loop), once for every commit written before the sync
 * began. That is what synchronous=FULL adds to NORMAL in WAL mode (SQLite syncs the WAL after each
 * commit; checkpoints and the WAL header after a restart are synced in both modes), done once for
 * many commits instead of once each, and without freezing the agent's event loop while the disk
 * works.
 *
 * Guarantees:
 * - `sync()` resolves only after an fdatasync of the WAL file that began after the call: every
 *   commit that returned before the call is then on disk (SQLite appends commits to the WAL in
 *   order, and a sync covers everything written to the file before it);
 * - syncs never overlap; the callers that ask while one runs share the next one, so N commits in
 *   flight cost about two syncs, not N; `syncNow` syncs at once on the calling thread (a commit
 *   answered durable), covering as much;
 * - a sync that fails fails every later one with the same IO_FAILURE, naming the file: after a
 *   failed fsync the kernel may have dropped the written pages, so nothing written before may be
 *   called durable again by this process (its store pings fail: the agent turns unready); a restart
 *   recovers what the disk holds;
 * - no WAL file (nothing written since the last connection closed) is nothing to sync;
 * - a failed sync nobody waits for (a later one stood for it) is no unhandled rejection.
 */
import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';
import { WarrenError, messageOf } from '../../core/errors.ts';

/**
 * `p`, marked handled: a caller that stops waiting (its ADD failed otherwise, or a later sync
 * stands for this one) must not turn a failed sync into an unhandled rejection, which would end
 * the agent; every caller that waits still sees the failure.
 */
function handled(p: Promise<void>): Promise<void> {
  p.catch(() => undefined);
  return p;
}

export class WalSync {
  readonly #database: string;
  readonly #wal: string;
  /** The sync in flight, and the one that begins after it for the callers that came meanwhile. */
  #running: Promise<void> | undefined;
  #next: Promise<void> | undefined;
  #failure: WarrenError | undefined;
  /** Syncs begun so far (tests count them). */
  syncs = 0;

  constructor(database: string) {
    this.#database = database;
    this.#wal = `${database}-wal`;
  }

  /** Resolves once everything committed before this call is on disk. */
  sync(): Promise<void> {
    if (this.#failure !== undefined) return handled(Promise.reject(this.#failure));
    if (this.#running === undefined) return this.#begin();
    // The one running may have begun before the caller's commit was written: the next one covers it.
    this.#next ??= handled(
      this.#running
        .catch(() => undefined)
        .then(() => {
          this.#next = undefined;
          return this.#begin();
        }),
    );
    return this.#next;
  }

  /**
   * Syncs now, on the calling thread (the event loop waits, as SQLite's own sync at FULL would):
   * for the commits that are answered durable, so they keep the order they had with SQLite's.
   */
  syncNow(): void {
    if (this.#failure !== undefined) throw this.#failure;
    this.syncs++;
    let fd: number;
    try {
      fd = openSync(this.#wal, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw this.#failed(error);
    }
    try {
      fdatasyncSync(fd);
    } catch (error) {
      throw this.#failed(error);
    } finally {
      closeSync(fd);
    }
  }

  #begin(): Promise<void> {
    if (this.#failure !== undefined) return handled(Promise.reject(this.#failure));
    const run = handled(
      this.#once().finally(() => {
        if (this.#running === run) this.#running = undefined;
      }),
    );
    this.#running = run;
    return run;
  }

  async #once(): Promise<void> {
    this.syncs++;
    let fd: number;
    try {
      fd = openSync(this.#wal, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw this.#failed(error);
    }
    try {
      await new Promise<void>((resolve, reject) => fdatasync(fd, (error) => (error ? reject(error) : resolve())));
    } catch (error) {
      throw this.#failed(error);
    } finally {
      closeSync(fd);
    }
  }

  #failed(error: unknown): WarrenError {
    this.#failure ??= new WarrenError(
      'IO_FAILURE',
      `database ${this.#database}: its write-ahead log could not be synced to disk (${messageOf(error)}); ` +
        'what was committed since the last sync may be lost at a power loss: restart the agent',
      { cause: error },
    );
    return this.#failure;
  }
}
