/**
 * The journal's `rejected/` directory: where MissedDeleteJournal sets aside a file that is not an
 * intent, as evidence for the operator, and what keeps that directory within its bounds.
 *
 * Guarantees:
 * - A file is moved, never copied or rewritten: what the operator finds is what was in the
 *   journal. Its name there is `<name>.<ms>` (the time it was set aside; `.<ms>-<n>` when that is
 *   taken), within NAME_MAX however long the name was, and never over an earlier set-aside.
 * - A file gone before it could be moved is no error (it was completed or moved meanwhile).
 * - `rejected/` stays within bounds (files and bytes): when a set-aside goes over, the oldest set
 *   aside (by the time in their names, else their mtime) are removed first, and the set-aside says
 *   which. What was there before the agent started counts: the directory is listed once, at the
 *   first set-aside, then kept in step with each move and removal.
 * - `rejected/` is made again (owner-only) if an operator removed it.
 */
import { lstatSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fsyncDirectory } from '../core/atomic-file.ts';
import type { Clock } from '../core/clock.ts';
import { MAX_NAME_BYTES } from '../cni/journal-entry.ts';
import { defined } from '../core/defined.ts';

export const REJECTED_DIR = 'rejected';
export const DEFAULT_MAX_REJECTED_FILES = 1_000;
export const DEFAULT_MAX_REJECTED_BYTES = 16 * 1024 * 1024;

/** What was removed from `rejected/` to keep it within its bounds, oldest first. */
export interface PrunedRejects {
  readonly files: readonly string[];
  readonly bytes: number;
  /** The bounds, in words, for the log line. */
  readonly why: string;
}

/** How a set-aside ended: moved (and what went to make room), the file gone already, or the move failed. */
export type SetAside =
  | { readonly kind: 'moved'; readonly movedTo: string; readonly pruned?: PrunedRejects }
  | { readonly kind: 'vanished' }
  | { readonly kind: 'failed'; readonly error: unknown };

export interface RejectedDirOptions {
  /** The journal directory; `rejected/` is in it. */
  readonly dir: string;
  readonly clock: Clock;
  /** Most entries `rejected/` keeps; default 1000. */
  readonly maxFiles?: number;
  /** Most bytes `rejected/` keeps; default 16 MiB. */
  readonly maxBytes?: number;
}

/** One entry of `rejected/`, for keeping it within bounds. */
interface Aside {
  readonly name: string;
  readonly bytes: number;
  /** When it was set aside (from its name), for oldest-first removal. */
  readonly at: number;
}

/** The set-aside suffix `.<ms>` or `.<ms>-<n>`: when a file was moved to rejected/. */
const ASIDE_SUFFIX = /\.(\d{1,16})(?:-\d+)?$/;

/** Whether anything is at `path`, a dangling symbolic link included (it is not followed). */
export function pathExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

export class RejectedDir {
  readonly #dir: string;
  readonly #rejectedDir: string;
  readonly #clock: Clock;
  readonly #maxFiles: number;
  readonly #maxBytes: number;
  /** What `rejected/` holds, oldest first: listed once, then kept in step with each move and removal. */
  #asides: Aside[] | undefined;
  #asideBytes = 0;

  constructor(options: RejectedDirOptions) {
    this.#dir = options.dir;
    this.#rejectedDir = join(options.dir, REJECTED_DIR);
    this.#clock = options.clock;
    this.#maxFiles = options.maxFiles ?? DEFAULT_MAX_REJECTED_FILES;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_REJECTED_BYTES;
  }

  /** Moves the journal file `name` to rejected/, then removes the oldest set-asides over the bounds. */
  setAside(name: string): SetAside {
    // Listed before the move, so the file moved now is counted once.
    const asides = this.#loadAsides();
    const at = this.#clock.now();
    const aside = this.#asideName(name, at);
    const movedTo = join(this.#rejectedDir, aside);
    const from = join(this.#dir, name);
    try {
      // Made again if an operator removed it; the journal directory is ours alone, so nothing else is there.
      mkdirSync(this.#rejectedDir, { mode: 0o700 });
    } catch {
      // there already (the usual case), or the rename below says what is wrong
    }
    try {
      renameSync(from, movedTo);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !pathExists(from)) return { kind: 'vanished' };
      return { kind: 'failed', error };
    }
    try {
      fsyncDirectory(this.#dir);
    } catch {
      // The move stands; if it is lost in a crash the file is read and set aside again.
    }
    let bytes = 0;
    try {
      bytes = lstatSync(movedTo).size;
    } catch {
      // counted as nothing: it is gone already
    }
    asides.push({ name: aside, bytes, at });
    this.#asideBytes += bytes;
    const pruned = this.#prune();
    return { kind: 'moved', movedTo, ...defined({ pruned }) };
  }

  /**
   * `<name>.<ms>` in rejected/: within NAME_MAX however long the name was, and never over an
   * earlier set-aside (a rename would replace it without a word).
   */
  #asideName(name: string, at: number): string {
    for (let n = 0; ; n++) {
      const suffix = n === 0 ? `.${at}` : `.${at}-${n}`;
      let stem = name;
      while (Buffer.byteLength(stem) + suffix.length > MAX_NAME_BYTES) stem = stem.slice(0, -1);
      const candidate = `${stem}${suffix}`;
      if (!pathExists(join(this.#rejectedDir, candidate))) return candidate;
    }
  }

  /** rejected/ as it is on disk, oldest set aside first; read once, then kept in step. */
  #loadAsides(): Aside[] {
    if (this.#asides !== undefined) return this.#asides;
    const asides: Aside[] = [];
    let names: string[] = [];
    try {
      names = readdirSync(this.#rejectedDir);
    } catch {
      // nothing to count: the move into it just failed or it is gone; the bounds apply from here
    }
    for (const name of names) {
      try {
        const st = lstatSync(join(this.#rejectedDir, name));
        const stamp = ASIDE_SUFFIX.exec(name)?.[1];
        asides.push({ name, bytes: st.size, at: stamp === undefined ? st.mtimeMs : Number(stamp) });
      } catch {
        // removed meanwhile
      }
    }
    asides.sort((a, b) => a.at - b.at || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.#asides = asides;
    this.#asideBytes = asides.reduce((sum, a) => sum + a.bytes, 0);
    return asides;
  }

  /** Removes the oldest set-asides until rejected/ is within both bounds; says what went. */
  #prune(): PrunedRejects | undefined {
    const asides = this.#loadAsides();
    const files: string[] = [];
    let bytes = 0;
    while (asides.length > 0 && (asides.length > this.#maxFiles || this.#asideBytes > this.#maxBytes)) {
      const oldest = asides.shift() as Aside;
      this.#asideBytes -= oldest.bytes;
      try {
        // A directory set aside (a planted "x.release/") goes whole; a symlink is removed, not followed.
        rmSync(join(this.#rejectedDir, oldest.name), { recursive: true, force: true });
        files.push(oldest.name);
        bytes += oldest.bytes;
      } catch {
        // Left for the operator (it is no longer counted): the bound is on what Warren keeps adding.
      }
    }
    if (files.length === 0) return undefined;
    try {
      fsyncDirectory(this.#rejectedDir);
    } catch {
      // the removals stand; durability of a deletion of evidence is not worth an error
    }
    return {
      files,
      bytes,
      why:
        `${REJECTED_DIR}/ keeps at most ${this.#maxFiles} files and ${this.#maxBytes} bytes, ` +
        `the oldest removed first`,
    };
  }
}
