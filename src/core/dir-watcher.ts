/**
 * List, then watch, a directory: an AsyncIterable of what is in it and what changes.
 *
 * The protocol is explicit about "I have seen everything that existed at start": first one
 * `present` per entry, then `listed`, then `added` / `changed` / `removed` as they happen. The
 * kernel watch is opened before the listing, so nothing created between the two is missed; and
 * because inotify can overflow and drop events, a periodic rescan (on the injected clock) diffs
 * the directory against what was reported and emits what was missed. Dot-files are ignored by
 * default (they are temporary names of atomic writes).
 *
 * Guarantees: every name is reported `present`/`added` before any `changed`/`removed` of it; a
 * name is reported `removed` only after it was reported present or added; iteration ends when
 * the signal aborts. A consumer that could not act on a name (its read failed) calls `forget`,
 * and the name is reported `added` again on the next rescan or kernel event while it exists: a
 * rescan alone would never report a name it believes the consumer already has.
 */
import { type FSWatcher, lstatSync, readdirSync, statSync, watch } from 'node:fs';
import { type Clock, systemClock } from './clock.ts';

export type DirectoryEvent =
  | { readonly kind: 'present'; readonly name: string }
  | { readonly kind: 'listed' }
  | { readonly kind: 'added'; readonly name: string }
  | { readonly kind: 'changed'; readonly name: string }
  | { readonly kind: 'removed'; readonly name: string }
  | { readonly kind: 'error'; readonly error: Error };

export interface DirectoryWatcherOptions {
  readonly dir: string;
  readonly signal: AbortSignal;
  readonly clock?: Clock;
  /** Milliseconds between rescans that catch dropped events. Default 30 s; 0 disables. */
  readonly rescanMs?: number;
  /** Which names to report. Default: every name not starting with a dot. */
  readonly include?: (name: string) => boolean;
}

export class DirectoryWatcher implements AsyncIterable<DirectoryEvent> {
  readonly #o: DirectoryWatcherOptions;
  readonly #clock: Clock;
  /** Names the consumer has been told exist. */
  readonly #known = new Set<string>();
  /** Names the kernel said something about since the last look. */
  readonly #dirty = new Set<string>();
  #rescanDue = false;
  #wake: (() => void) | undefined;
  #started = false;
  /** Inode of the directory the kernel watch is on: a replaced directory needs a new watch. */
  #watchedIno: number | undefined;

  constructor(options: DirectoryWatcherOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Asks for a full rescan now (also happens on the periodic timer). */
  rescan(): void {
    this.#rescanDue = true;
    this.#wake?.();
  }

  /**
   * Treats `name` as never reported: the next rescan (or kernel event) that finds it reports it
   * `added` again. For a consumer whose handling of a name failed and must be retried.
   */
  forget(name: string): void {
    this.#known.delete(name);
  }

  #include(name: string): boolean {
    return this.#o.include ? this.#o.include(name) : !name.startsWith('.');
  }

  #dirIno(): number | undefined {
    try {
      return statSync(this.#o.dir).ino;
    } catch {
      return undefined;
    }
  }

  #exists(name: string): boolean {
    try {
      lstatSync(`${this.#o.dir}/${name}`);
      return true;
    } catch {
      return false;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<DirectoryEvent> {
    if (this.#started) throw new Error('a DirectoryWatcher is iterated once');
    this.#started = true;
    const { dir, signal } = this.#o;
    const onAbort = (): void => this.#wake?.();
    signal.addEventListener('abort', onAbort);
    let watcher: FSWatcher | undefined;
    const openWatch = (): Error | undefined => {
      try {
        this.#watchedIno = this.#dirIno();
        watcher = watch(dir, { persistent: false }, (_type, filename) => {
          if (filename === null) this.#rescanDue = true;
          else this.#dirty.add(filename.toString());
          this.#wake?.();
        });
        watcher.on('error', () => {
          watcher?.close();
          watcher = undefined;
          this.#rescanDue = true;
          this.#wake?.();
        });
        return undefined;
      } catch (error) {
        return error as Error;
      }
    };
    let cancelRescan: (() => void) | undefined;
    const armRescan = (): void => {
      const every = this.#o.rescanMs ?? 30_000;
      if (every > 0) cancelRescan = this.#clock.setTimer(every, () => this.rescan());
    };
    try {
      const watchError = openWatch();
      if (watchError !== undefined) yield { kind: 'error', error: watchError };
      const initial = this.#list();
      if (initial instanceof Error) yield { kind: 'error', error: initial };
      for (const name of initial instanceof Error ? [] : initial) {
        this.#known.add(name);
        yield { kind: 'present', name };
      }
      yield { kind: 'listed' };
      armRescan();
      while (!signal.aborted) {
        if (this.#dirty.size === 0 && !this.#rescanDue) {
          await new Promise<void>((resolve) => (this.#wake = resolve));
          this.#wake = undefined;
          continue;
        }
        const names = [...this.#dirty];
        this.#dirty.clear();
        for (const name of names) {
          if (!this.#include(name)) continue;
          const event = this.#look(name);
          if (event !== undefined) yield event;
        }
        if (this.#rescanDue) {
          this.#rescanDue = false;
          // A watch that is gone, or that follows a directory since moved away, is reopened here.
          if (watcher !== undefined && this.#dirIno() !== this.#watchedIno) {
            watcher.close();
            watcher = undefined;
          }
          if (watcher === undefined) {
            const again = openWatch();
            if (again !== undefined) yield { kind: 'error', error: again };
          }
          const listing = this.#list();
          if (listing instanceof Error) {
            // A directory that cannot be read says nothing about what is in it: report, remove nothing.
            yield { kind: 'error', error: listing };
          } else {
            const now = new Set(listing);
            for (const name of now) if (!this.#known.has(name)) yield this.#note(name, 'added');
            for (const name of [...this.#known]) if (!now.has(name)) yield this.#note(name, 'removed');
          }
          cancelRescan?.();
          armRescan();
        }
      }
    } finally {
      cancelRescan?.();
      watcher?.close();
      signal.removeEventListener('abort', onAbort);
    }
  }

  #look(name: string): DirectoryEvent | undefined {
    const exists = this.#exists(name);
    if (exists) return this.#note(name, this.#known.has(name) ? 'changed' : 'added');
    if (!this.#known.has(name)) return undefined;
    // Missing from a directory that is itself gone or replaced proves nothing: let a rescan decide.
    if (this.#dirIno() !== this.#watchedIno) {
      this.#rescanDue = true;
      return undefined;
    }
    return this.#note(name, 'removed');
  }

  #note(name: string, kind: 'added' | 'changed' | 'removed'): DirectoryEvent {
    if (kind === 'removed') this.#known.delete(name);
    else this.#known.add(name);
    return { kind, name };
  }

  #list(): string[] | Error {
    try {
      return readdirSync(this.#o.dir)
        .filter((n) => this.#include(n))
        .sort();
    } catch (error) {
      return error as Error;
    }
  }
}
