/**
 * The agent's side of the missed-delete journal: an event source over the journal directory.
 * It lists the directory at start (every valid file is yielded as an `intent` item: the DEL the
 * plugin recorded, which release/journal.ts turns into a release intent), then watches it, so a
 * file the plugin writes while the agent runs is seen at once.
 *
 * Guarantees:
 * - The directory is the one the plugin would accept (checkJournalDir, shared with the plugin): a
 *   symbolic link, another user's directory or one others can write is refused at `prepare`,
 *   never followed or chmodded.
 * - A file becomes an intent only when it is a regular file owned by the agent's own uid, holds a
 *   valid entry and is named as its content implies. Anything else (empty, truncated, garbage, too
 *   large, a symlink, another user's file, a name that does not match) is moved to `rejected/`,
 *   never released on, never deleted from the journal proper, and reported. An empty file is
 *   looked at a second time first (a second later, or when it is written): one caught between its
 *   creation and its write is read whole, not set aside.
 * - Every file in the directory is retried until it is an intent or set aside: a read that fails
 *   for a passing reason (EMFILE, EIO, EACCES) is reported and tried again on the next rescan
 *   (the reconcile pass asks for one), never dropped for the life of the agent.
 * - `rejected/` stays within bounds (files and bytes): when a set-aside goes over, the oldest
 *   set aside are removed first, and the `rejected` event says which (`pruned`). How files are set
 *   aside there and the bounds kept: journal-rejected-dir.ts.
 * - A file is removed only by `complete`, which its intent's acknowledgement calls after the
 *   release committed.
 */
import { closeSync, constants, fstatSync, openSync, readSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fsyncDirectory } from '../core/atomic-file.ts';
import type { Clock } from '../core/clock.ts';
import { defined } from '../core/defined.ts';
import { DirectoryWatcher } from '../core/dir-watcher.ts';
import { messageOf } from '../core/errors.ts';
import {
  type JournalEntry,
  MAX_ENTRY_BYTES,
  decodeEntry,
  journalFileName,
  legacyJournalFileName,
} from '../cni/journal-entry.ts';
import type { Owner } from '../ipam/allocation.ts';
import { checkJournalDir } from '../cni/journal-dir.ts';
import { type PrunedRejects, REJECTED_DIR, RejectedDir, pathExists } from './journal-rejected-dir.ts';

export { type PrunedRejects, REJECTED_DIR } from './journal-rejected-dir.ts';

export type JournalEvent =
  | { readonly kind: 'intent'; readonly name: string; readonly entry: JournalEntry }
  | {
      readonly kind: 'rejected';
      readonly name: string;
      readonly reason: string;
      readonly movedTo: string;
      readonly pruned?: PrunedRejects;
    }
  /** Every file present at start has been reported. */
  | { readonly kind: 'listed' }
  | { readonly kind: 'error'; readonly message: string };

export interface RejectedFile {
  readonly name: string;
  readonly reason: string;
}

/** A journal file whose last read failed for a passing reason; read again on the next rescan. */
export interface UnreadFile {
  readonly name: string;
  readonly error: string;
}

export interface MissedDeleteJournalOptions {
  readonly dir: string;
  readonly clock: Clock;
  /** Milliseconds between the watcher's own rescans; default 30 s, 0 for none (ticks still ask). */
  readonly rescanMs?: number;
  /** Most entries `rejected/` keeps; default 1000. */
  readonly maxRejectedFiles?: number;
  /** Most bytes `rejected/` keeps; default 16 MiB. */
  readonly maxRejectedBytes?: number;
  /** Opens a journal file for reading (openSync by default): tests inject a failing one. */
  readonly open?: (path: string, flags: number) => number;
}

/**
 * How long an empty file is given before it is read again: a writer that creates a file and then
 * writes it (an operator's cp, anything but the plugin's atomic rename) shows an empty file in
 * between, and setting that aside would lose the DEL it is about to hold.
 */
const EMPTY_SECOND_LOOK_MS = 1_000;

export class MissedDeleteJournal {
  readonly dir: string;
  readonly #clock: Clock;
  readonly #rescanMs: number;
  /** Where a file that is not an intent goes, within its bounds (journal-rejected-dir.ts). */
  readonly #rejected: RejectedDir;
  readonly #open: (path: string, flags: number) => number;
  /** The uid whose files may be intents: the agent's own (undefined where there are no uids). */
  readonly #uid = process.getuid?.();
  /** The live watcher: rescans go to it, and names whose read failed are handed back to it. */
  #watcher: DirectoryWatcher | undefined;
  /** Files seen empty once: set aside only if they are still empty when looked at again. */
  readonly #seenEmpty = new Set<string>();
  /** Files whose last read failed (name → why), until a read of them ends otherwise. */
  readonly #unread = new Map<string, string>();

  constructor(options: MissedDeleteJournalOptions) {
    this.dir = options.dir;
    this.#clock = options.clock;
    this.#rescanMs = options.rescanMs ?? 30_000;
    this.#rejected = new RejectedDir({
      dir: options.dir,
      clock: options.clock,
      ...defined({ maxFiles: options.maxRejectedFiles, maxBytes: options.maxRejectedBytes }),
    });
    this.#open = options.open ?? openSync;
  }

  /**
   * Creates the directory and `rejected/` owner-only (0700) when missing and tightens them to 0700
   * when this user owns them; throws (IO_FAILURE, naming the directory and what is wrong) for
   * what the plugin would refuse to write into.
   */
  prepare(): void {
    checkJournalDir(this.dir, { tighten: true });
    checkJournalDir(join(this.dir, REJECTED_DIR), { tighten: true });
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

  /**
   * The intents recorded for one attachment, read now rather than when the watch reports them: an
   * ADD must see a DEL the plugin journaled a moment ago. Only the names that attachment's intents
   * can have are looked at; a file there that is not a valid intent is set aside as usual.
   */
  readFor(owner: Owner): JournalEvent[] {
    const names = new Set<string>();
    for (const nameOf of [journalFileName, legacyJournalFileName]) {
      try {
        names.add(nameOf(owner));
      } catch {
        // not an owner any plugin could have journaled
      }
    }
    const events: JournalEvent[] = [];
    for (const name of names) {
      if (!pathExists(join(this.dir, name))) continue;
      const event = this.#read(name);
      if (event !== undefined) events.push(event);
    }
    return events;
  }

  /** Asks the watcher to rescan: catches dropped events and retries files whose read failed. */
  rescan(): void {
    this.#watcher?.rescan();
  }

  /**
   * Files in the directory whose last read failed, with why: the pending intents alone would say
   * nothing waits while such a file does. One removed meanwhile is not listed.
   */
  unread(): UnreadFile[] {
    return [...this.#unread]
      .filter(([name]) => pathExists(join(this.dir, name)))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, error]) => ({ name, error }));
  }

  /** A file that could be neither read nor set aside now: reported, and read again on the next rescan. */
  #retryLater(name: string, message: string): JournalEvent {
    this.#watcher?.forget(name);
    const full = `${message}; will try again on the next rescan`;
    this.#unread.set(name, full);
    return { kind: 'error', message: full };
  }

  #read(name: string): JournalEvent | undefined {
    // Whatever this read ends in, the failure before it is over; #retryLater records a new one.
    this.#unread.delete(name);
    const path = join(this.dir, name);
    let fd: number;
    try {
      // O_NOFOLLOW: a symlink is refused here rather than followed to wherever it points.
      // O_NONBLOCK: a FIFO planted here must not hang the agent; it is refused below.
      fd = this.#open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        this.#seenEmpty.delete(name);
        return undefined; // completed or moved meanwhile
      }
      if (code === 'ELOOP') return this.#reject(name, 'is a symbolic link');
      return this.#retryLater(name, `journal ${path} could not be opened: ${messageOf(error)}`);
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) return this.#reject(name, 'is not a regular file');
      // Only the agent's own user can write here (checkJournalDir); a file of another user got in
      // some other way, and must not release anything.
      if (this.#uid !== undefined && st.uid !== this.#uid)
        return this.#reject(name, `belongs to uid ${st.uid}, not to uid ${this.#uid} that runs the agent`);
      if (st.size === 0 && !this.#seenEmpty.has(name)) {
        // Maybe caught between its creation and its write: the write's own event, or the second
        // look, reads it again.
        this.#seenEmpty.add(name);
        this.#watcher?.forget(name);
        this.#clock.setTimer(EMPTY_SECOND_LOOK_MS, () => this.#watcher?.rescan());
        return undefined;
      }
      this.#seenEmpty.delete(name);
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
    } catch (error) {
      return this.#retryLater(name, `journal ${path} could not be read: ${messageOf(error)}`);
    } finally {
      closeSync(fd);
    }
  }

  /** Moves a file that is not an intent to rejected/; undefined when it vanished meanwhile. */
  #reject(name: string, reason: string): JournalEvent | undefined {
    const aside = this.#rejected.setAside(name);
    switch (aside.kind) {
      case 'vanished':
        return undefined;
      case 'failed':
        return this.#retryLater(
          name,
          `journal ${name} ${reason}, and could not be moved aside: ${messageOf(aside.error)}`,
        );
      case 'moved':
        return {
          kind: 'rejected',
          name,
          reason,
          movedTo: aside.movedTo,
          ...defined({ pruned: aside.pruned }),
        };
      default: {
        const never: never = aside;
        throw new Error(`unhandled set-aside ${JSON.stringify(never)}`);
      }
    }
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
}
