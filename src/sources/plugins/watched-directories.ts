/**
 * The kernel watches of the plugins directory's tree: one DirectoryWatcher per watched directory,
 * keyed by path, each copying its events to one sink tagged with the watch they came from; and
 * which of them the socket watcher's `listed` still waits for. The mechanism under
 * socket-watcher.ts, which decides what is watched (by `lstat`) and what each event means.
 *
 * Guarantees:
 * - At most one watch per path; a watch is told apart from a later one at the same path by
 *   identity (`get(path) !== from`), so the events of a dropped watch can be recognised and
 *   ignored.
 * - Dropping a path stops the watch of it and of every directory under it, and no longer waits
 *   for their listings.
 * - Every watch stops when the signal given aborts; `stopAll` stops them all at once, and
 *   `ended` resolves once every copying loop has ended, so none delivers after it.
 */
import type { Clock } from '../../core/clock.ts';
import { type DirectoryEvent, DirectoryWatcher } from '../../core/dir-watcher.ts';

/** One directory of the tree under its own DirectoryWatcher. */
export interface WatchedDir {
  readonly path: string;
  /** Which directory is watched (file-identity.ts); undefined for a root that could not be stat'ed. */
  readonly identity: string | undefined;
  readonly watcher: DirectoryWatcher;
  /** Stops this directory's watcher alone, when the directory goes or is replaced. */
  readonly stop: AbortController;
  /** Its watcher has listed the directory. */
  listed: boolean;
}

export interface WatchedDirectoriesOptions {
  /** Stops every watch. */
  readonly signal: AbortSignal;
  readonly clock: Clock;
  /** Where every watcher's events go, with the watch each came from (an error it threw included). */
  readonly deliver: (from: WatchedDir, event: DirectoryEvent) => void;
}

/** The prefix of every path under `path`. */
export function subtreePrefix(path: string): string {
  return path.endsWith('/') ? path : `${path}/`;
}

export class WatchedDirectories {
  readonly #o: WatchedDirectoriesOptions;
  /** Directories under a watch, the root included: path → its current watch. */
  readonly #dirs = new Map<string, WatchedDir>();
  /** Directories that existed at start and are not yet listed: `listed` waits for them all. */
  readonly #awaitingListing = new Set<WatchedDir>();
  /** The loops copying each watcher to `deliver`: `ended` waits for them all. */
  readonly #pumps = new Set<Promise<void>>();

  constructor(options: WatchedDirectoriesOptions) {
    this.#o = options;
  }

  /** The current watch of `path`, if it is watched. */
  get(path: string): WatchedDir | undefined {
    return this.#dirs.get(path);
  }

  has(path: string): boolean {
    return this.#dirs.has(path);
  }

  /** Every watched path. */
  paths(): string[] {
    return [...this.#dirs.keys()];
  }

  /** Every current watch, as of now. */
  all(): WatchedDir[] {
    return [...this.#dirs.values()];
  }

  /** Whether `listed` waits for this watch's listing. */
  isAwaited(dir: WatchedDir): boolean {
    return this.#awaitingListing.has(dir);
  }

  /** Makes `listed` wait for this watch's listing. */
  awaitListing(dir: WatchedDir): void {
    this.#awaitingListing.add(dir);
  }

  /** This watch has listed its directory. */
  markListed(dir: WatchedDir): void {
    dir.listed = true;
    this.#awaitingListing.delete(dir);
  }

  /** Whether no listing is waited for. */
  allListed(): boolean {
    return this.#awaitingListing.size === 0;
  }

  /** Opens a DirectoryWatcher on `path` and copies its events to `deliver` until it is stopped. */
  watch(path: string, identity: string | undefined, awaited: boolean): void {
    const stop = new AbortController();
    const watcher = new DirectoryWatcher({
      dir: path,
      signal: AbortSignal.any([this.#o.signal, stop.signal]),
      clock: this.#o.clock,
      rescanMs: 0,
    });
    const dir: WatchedDir = { path, identity, watcher, stop, listed: false };
    this.#dirs.set(path, dir);
    if (awaited) this.#awaitingListing.add(dir);
    const pump = (async () => {
      try {
        for await (const event of watcher) this.#o.deliver(dir, event);
      } catch (error) {
        this.#o.deliver(dir, { kind: 'error', error: error as Error });
      }
    })();
    this.#pumps.add(pump);
    void pump.finally(() => this.#pumps.delete(pump));
  }

  /**
   * Stops watching `path` and every directory under it. Returns whether `listed` was waiting for
   * one of those directories (a replacement inherits that).
   */
  drop(path: string): boolean {
    const prefix = subtreePrefix(path);
    let awaited = false;
    for (const [p, dir] of this.#dirs) {
      if (p !== path && !p.startsWith(prefix)) continue;
      dir.stop.abort();
      this.#dirs.delete(p);
      awaited = this.#awaitingListing.delete(dir) || awaited;
    }
    return awaited;
  }

  /** Stops every watch. */
  stopAll(): void {
    for (const dir of this.#dirs.values()) dir.stop.abort();
    this.#dirs.clear();
  }

  /** Resolves once every copying loop has ended. */
  async ended(): Promise<void> {
    await Promise.all(this.#pumps);
  }
}
