/**
 * The agent's side of the missed-delete journal: an event source over the journal directory.
 * It lists the directory at start (every file becomes an intent), then watches it, so a file the
 * plugin writes while the agent runs is seen at once. A file that is not a valid intent (empty,
 * truncated, garbage, too large, a symlink, a name that does not match its content) is moved to
 * `rejected/` — never deleted, never retried — and reported. A file is removed only by
 * `complete`, which the reconciler calls after the release has committed.
 */
import { closeSync, fstatSync, lstatSync, mkdirSync, openSync, readSync, readdirSync, renameSync, unlinkSync, chmodSync, constants } from 'node:fs';
import { join } from 'node:path';
import { fsyncDirectory } from '../core/atomic-file.ts';
import type { Clock } from '../core/clock.ts';
import { DirectoryWatcher } from '../core/dir-watcher.ts';
import { messageOf } from '../core/errors.ts';
import { type JournalEntry, MAX_ENTRY_BYTES, decodeEntry } from '../cni/journal-entry.ts';

export const REJECTED_DIR = 'rejected';

export type JournalEvent =
  | { readonly kind: 'intent'; readonly name: string; readonly entry: JournalEntry }
  | { readonly kind: 'rejected'; readonly name: string; readonly reason: string; readonly movedTo: string }
  /** Every file present at start has been reported. */
  | { readonly kind: 'listed' }
  | { readonly kind: 'error'; readonly message: string };

export interface RejectedFile {
  readonly name: string;
  readonly reason: string;
}

export class MissedDeleteJournal {
  readonly dir: string;
  readonly #clock: Clock;
  readonly #rescanMs: number;
  #watcher: DirectoryWatcher | undefined;

  constructor(options: { dir: string; clock: Clock; rescanMs?: number }) {
    this.dir = options.dir;
    this.#clock = options.clock;
    this.#rescanMs = options.rescanMs ?? 30_000;
  }

  /** Creates the directory owner-only (0700), tightening it if it exists. */
  prepare(): void {
    mkdirSync(join(this.dir, REJECTED_DIR), { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    chmodSync(join(this.dir, REJECTED_DIR), 0o700);
  }

  async *events(signal: AbortSignal): AsyncGenerator<JournalEvent> {
    const watcher = new DirectoryWatcher({
      dir: this.dir,
      signal,
      clock: this.#clock,
      rescanMs: this.#rescanMs,
      include: (name) => !name.startsWith('.') && name !== REJECTED_DIR,
    });
    this.#watcher = watcher;
    for await (const event of watcher) {
      switch (event.kind) {
        case 'present':
        case 'added':
        case 'changed': {
          const read = this.#read(event.name);
          if (read !== undefined) yield read;
          break;
        }
        case 'listed':
          yield { kind: 'listed' };
          break;
        case 'removed':
          break;
        case 'error':
          yield { kind: 'error', message: `journal ${this.dir}: ${event.error.message}` };
          break;
        default: {
          const never: never = event;
          throw new Error(`unhandled directory event ${JSON.stringify(never)}`);
        }
      }
    }
  }

  /** Asks the watcher to rescan (the periodic tick does this to catch dropped events). */
  rescan(): void {
    this.#watcher?.rescan();
  }

  #read(name: string): JournalEvent | undefined {
    const path = join(this.dir, name);
    let fd: number;
    try {
      // O_NOFOLLOW: a symlink is refused here rather than followed to wherever it points.
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return undefined; // completed or moved meanwhile
      if (code === 'ELOOP') return this.#reject(name, 'is a symbolic link');
      return { kind: 'error', message: `journal ${path}: ${messageOf(error)}` };
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) return this.#reject(name, 'is not a regular file');
      if (st.size > MAX_ENTRY_BYTES) return this.#reject(name, `is ${st.size} bytes, more than ${MAX_ENTRY_BYTES}`);
      const buffer = Buffer.alloc(st.size);
      let offset = 0;
      while (offset < st.size) {
        const n = readSync(fd, buffer, offset, st.size - offset, offset);
        if (n === 0) break;
        offset += n;
      }
      const decoded = decodeEntry(name, buffer.subarray(0, offset).toString('utf8'));
      if (decoded.kind === 'invalid') return this.#reject(name, decoded.reason);
      return { kind: 'intent', name, entry: decoded.entry };
    } finally {
      closeSync(fd);
    }
  }

  #reject(name: string, reason: string): JournalEvent {
    const movedTo = join(this.dir, REJECTED_DIR, `${name}.${this.#clock.now()}`);
    try {
      renameSync(join(this.dir, name), movedTo);
      fsyncDirectory(this.dir);
    } catch (error) {
      return { kind: 'error', message: `journal ${name} ${reason}, and could not be moved aside: ${messageOf(error)}` };
    }
    return { kind: 'rejected', name, reason, movedTo };
  }

  /** Removes an intent whose release has committed. Removing a file already gone is a no-op. */
  complete(name: string): void {
    try {
      unlinkSync(join(this.dir, name));
      fsyncDirectory(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  /** Names of the intents in the directory now. */
  pendingFiles(): string[] {
    try {
      return readdirSync(this.dir).filter((n) => !n.startsWith('.') && n !== REJECTED_DIR).sort();
    } catch {
      return [];
    }
  }

  /** Files set aside, newest last. */
  rejectedFiles(): string[] {
    try {
      return readdirSync(join(this.dir, REJECTED_DIR)).sort();
    } catch {
      return [];
    }
  }

  /** Whether a path is an intent file a reader would accept as present (not a symlink). */
  isPresent(name: string): boolean {
    try {
      return lstatSync(join(this.dir, name)).isFile();
    } catch {
      return false;
    }
  }
}
