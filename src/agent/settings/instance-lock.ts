/**
 * One agent per node: the single writer of the node's allocations. Each thing that must have one
 * agent — the state directory, the database, the API socket, the journal — is locked by holding
 * an exclusive SQLite lock on a lock file of its own:
 *
 *   state directory   <state-dir>/state.lock
 *   database          <database>.lock, beside it
 *   socket            <socket>.lock, beside it
 *   journal           <journal-dir>/.journal.lock (a dot name: the journal reader skips it)
 *
 * Guarantees:
 * - Only the agent's user can take a lock: a lock file's directory must be a directory owned by
 *   that user (or root) that neither its group nor others can write, and the lock file a regular
 *   file of that user (or root) that neither its group nor others can open (it is created 0600);
 *   anything else is refused with IO_FAILURE naming the path and what is wrong. So no other local
 *   user can create, replace or hold a lock (an abstract socket, as used before, could be bound
 *   first by anyone, keeping the agent from starting on every node).
 * - Of two starters exactly one wins, in separate processes and in one process alike: SQLite's
 *   EXCLUSIVE lock is a POSIX record lock (fcntl), which the kernel grants to one process, and
 *   SQLite's own per-file lock table refuses a second connection in the same process. A lock found
 *   busy while nobody holds it exclusively (two starters each in the middle of taking it) is tried
 *   again after a random pause, a few times, so that one of them wins; an exclusive holder is
 *   refused at once.
 * - The kernel drops the lock the instant its holder dies, kill -9 included: there is never a
 *   stale lock to judge. (Why not a PID file: it may name a PID the kernel has given since to an
 *   unrelated process, and two starters that both find it dead can both take over.)
 * - A refused starter is told the holder's PID (from /proc/locks, the kernel's own record) and
 *   what it holds, in an ALREADY_RUNNING error.
 * - The lock files stay behind, empty of meaning, and are reused: removing one while another
 *   agent may open it would let two agents lock two different files of one name.
 *
 * The lock connections must be the only descriptors the agent opens on its lock files: closing any
 * other descriptor of a file drops the process's POSIX locks on it. And the InstanceLock must stay
 * referenced while it is meant to hold: a collected connection is closed, dropping its lock.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { checkJournalDir } from '../../cni/journal-dir.ts';
import { makeDirectory } from '../../core/make-directory.ts';

/** What is locked: a human name ("state directory") and its path. */
export interface LockedResource {
  readonly what: 'state directory' | 'database' | 'socket' | 'journal';
  readonly path: string;
}

/** SQLite's "database is locked": another connection holds the lock. */
const SQLITE_BUSY = 5;

/** Where the lock file of a resource is. */
export function lockFileOf(resource: LockedResource): string {
  const path = resolve(resource.path);
  switch (resource.what) {
    case 'state directory':
      return join(path, 'state.lock');
    case 'journal':
      return join(path, '.journal.lock');
    case 'database':
    case 'socket':
      return join(dirname(path), `${basename(path)}.lock`);
    default: {
      const never: never = resource.what;
      throw new TypeError(`unknown resource ${String(never)}`);
    }
  }
}

function refuse(resource: LockedResource, path: string, what: string, cause?: unknown): WarrenError {
  return new WarrenError(
    'IO_FAILURE',
    `cannot lock the ${resource.what} ${resource.path}: ${path} ${what}`,
    cause === undefined ? {} : { cause },
  );
}

/** Whether `uid` may own what a lock rests on: the agent's user, or root. */
function trusted(uid: number): boolean {
  const self = process.getuid?.();
  return self === undefined || uid === self || uid === 0;
}

/**
 * Creates the lock file's directory (0700) when missing and refuses one another user could write
 * to: not a directory, owned by another user, or writable by its group or others. Checked on one
 * open descriptor of the directory, so what is checked is what is there.
 */
function checkLockDir(resource: LockedResource, dir: string): void {
  let mkdirError: unknown;
  try {
    makeDirectory(dir, 0o700);
  } catch (error) {
    mkdirError = error; // described below, with what is there instead
  }
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    const why = mkdirError ?? error;
    throw refuse(resource, dir, `cannot be created or opened as a directory: ${messageOf(why)}`, why);
  }
  try {
    const st = fstatSync(fd);
    if (!trusted(st.uid))
      throw refuse(
        resource,
        dir,
        `belongs to uid ${st.uid}, not to uid ${process.getuid?.()} that runs Warren; its owner could hold ` +
          `the agent's lock`,
      );
    if ((st.mode & 0o022) !== 0) {
      throw refuse(
        resource,
        dir,
        `is writable by its group or others (mode ${(st.mode & 0o777).toString(8).padStart(3, '0')}); ` +
          `another user could hold the agent's lock there: use a directory only the agent's user can write`,
      );
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Refuses a lock file that is not a regular file of the agent's user (or root), or that others can
 * open: whoever can read it can hold a shared lock on it, which keeps the agent's exclusive one
 * out. Missing is fine (take() creates it 0600).
 */
function checkLockFile(resource: LockedResource, file: string): void {
  let st;
  try {
    st = lstatSync(file);
  } catch {
    return;
  }
  if (st.isSymbolicLink()) throw refuse(resource, file, 'is a symbolic link; a lock file must be a regular file');
  if (!st.isFile()) throw refuse(resource, file, 'exists and is not a regular file');
  if (!trusted(st.uid))
    throw refuse(resource, file, `belongs to uid ${st.uid}, not to uid ${process.getuid?.()} that runs Warren`);
  if ((st.mode & 0o077) !== 0) {
    throw refuse(
      resource,
      file,
      `can be opened by its group or others (mode ${(st.mode & 0o777).toString(8).padStart(3, '0')}), who ` +
        `could hold a lock on it; remove it while no agent runs`,
    );
  }
}

/** How long a start waits out another start's passing hold on a lock file before it is refused. */
const CONTENTION_MS = 2_000;

/** Takes the lock of one resource: the connection holding it, or undefined when another holds it. */
function take(resource: LockedResource, file: string): DatabaseSync | undefined {
  // The journal directory is held to the journal's own rule (no symbolic link either), with its
  // own messages, the rule the plugin checks before it writes there.
  if (resource.what === 'journal') checkJournalDir(resource.path);
  checkLockDir(resource, dirname(file));
  checkLockFile(resource, file);
  // Busy while nobody holds the file's exclusive lock: another starter was in the middle of taking
  // it (its shared lock held a moment too long: a process stalled on a loaded machine), and both
  // were refused (found by CI: two agents started at once on one state directory, neither served).
  // Tried again after a random pause, a few times; a holder of the exclusive lock refuses at once.
  for (let attempt = 1; ; attempt++) {
    const db = lockOnce(resource, file);
    if (db !== undefined || attempt >= LOCK_ATTEMPTS || heldExclusively(file)) return db;
    Atomics.wait(PAUSE, 0, 0, 20 + Math.floor(Math.random() * 180));
  }
}

/** Attempts at a lock found busy while nobody held it exclusively. */
const LOCK_ATTEMPTS = 5;
/** What a synchronous pause waits on (nothing ever wakes it: it times out). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
/** Where SQLite's lock bytes begin in a file (its PENDING_BYTE), and where its shared range starts. */
const SQLITE_PENDING_BYTE = 0x40000000n;
const SQLITE_SHARED_FIRST = SQLITE_PENDING_BYTE + 2n;

/** One attempt at `file`'s exclusive lock: the connection holding it, or undefined when busy. */
function lockOnce(resource: LockedResource, file: string): DatabaseSync | undefined {
  let db: DatabaseSync | undefined;
  // Created owner-only; never by opening a descriptor of our own, since closing it would drop
  // the locks this process holds on the file (another agent's, in the same process).
  const umask = process.umask(0o077);
  try {
    // A bounded busy timeout, not none: two agents starting at once each hold SQLite's shared lock
    // for an instant while taking the exclusive one, and with none both were refused (neither
    // served). A holder keeps its exclusive lock for good, so a real refusal still comes, later.
    db = new DatabaseSync(file, { timeout: CONTENTION_MS });
    // No journal file beside the lock (node:sqlite opens connections in defensive mode, which
    // ignores journal_mode=OFF and would leave a `-journal` file: MEMORY keeps it in memory);
    // EXCLUSIVE locking mode keeps the lock after the transaction that takes it ends, until the
    // connection closes.
    db.exec('PRAGMA journal_mode=MEMORY');
    db.exec('PRAGMA locking_mode=EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return db;
  } catch (error) {
    db?.close();
    if ((error as { errcode?: number }).errcode === SQLITE_BUSY) return undefined;
    throw refuse(resource, file, `cannot be locked: ${messageOf(error)}`, error);
  } finally {
    process.umask(umask);
  }
}

/** The POSIX locks on `file`, from /proc/locks: each one's fields; undefined when it cannot be told. */
function locksOn(file: string): string[][] | undefined {
  try {
    const st = statSync(file, { bigint: true });
    // /proc/locks names a file as MAJOR:MINOR:INODE, the device numbers in hex.
    const major = ((st.dev >> 8n) & 0xfffn) | ((st.dev >> 32n) & ~0xfffn);
    const minor = (st.dev & 0xffn) | ((st.dev >> 12n) & ~0xffn);
    const id = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${st.ino}`;
    // "1: POSIX  ADVISORY  WRITE 1234 fe:00:2147917 1073741824 1073742335"; a waiter's line has "->".
    return readFileSync('/proc/locks', 'utf8')
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[1] === 'POSIX' && fields[5] === id);
  } catch {
    return undefined; // no /proc/locks (not Linux) or the file went
  }
}

/** The PID holding a POSIX lock on `file`; undefined when it cannot be told (the refusal names none). */
function lockHolder(file: string): number | undefined {
  const pid = Number(locksOn(file)?.[0]?.[4]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Whether a process holds SQLite's exclusive lock on `file` (a write lock over its shared range: an
 * agent that took it), not only a shared or reserved one (a starter in the middle of taking it).
 * Where /proc/locks cannot tell, it is taken as held: the refusal stands, as before.
 */
function heldExclusively(file: string): boolean {
  const locks = locksOn(file);
  return (
    locks === undefined ||
    locks.some((fields) => {
      if (fields[3] !== 'WRITE') return false;
      const start = BigInt(fields[6] ?? '-1');
      const end = fields[7] === 'EOF' ? SQLITE_SHARED_FIRST : BigInt(fields[7] ?? '-1');
      return start <= SQLITE_SHARED_FIRST && SQLITE_SHARED_FIRST <= end;
    })
  );
}

export class InstanceLock {
  readonly #held: DatabaseSync[];

  private constructor(held: DatabaseSync[]) {
    this.#held = held;
  }

  /**
   * Takes every lock, or none: refuses with ALREADY_RUNNING, naming the holder's PID and what it
   * holds, when another agent holds any of them; with IO_FAILURE when a lock file's place is one
   * another user could write.
   */
  static acquire(resources: readonly LockedResource[]): InstanceLock {
    const held: DatabaseSync[] = [];
    try {
      for (const resource of resources) {
        const file = lockFileOf(resource);
        const db = take(resource, file);
        if (db !== undefined) {
          held.push(db);
          continue;
        }
        const pid = lockHolder(file);
        const who = pid === undefined ? 'another Warren agent' : `another Warren agent (pid ${pid})`;
        throw new WarrenError(
          'ALREADY_RUNNING',
          `${who} already uses the ${resource.what} ${resource.path}; one agent per node`,
        );
      }
    } catch (error) {
      for (const db of held) db.close();
      throw error;
    }
    return new InstanceLock(held);
  }

  release(): void {
    for (const db of this.#held) db.close();
    this.#held.length = 0;
  }
}
