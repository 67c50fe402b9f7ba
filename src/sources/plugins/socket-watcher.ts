/**
 * The plugins directory, watched for unix sockets: an AsyncIterable of socket facts for a whole
 * directory tree, which stops on an AbortSignal. Plugins announce themselves by creating a socket
 * anywhere under the directory (kubelet's plugin registration model), so this is the registry's
 * desired state.
 *
 * The protocol says "I have seen everything that existed at start" the way DirectoryWatcher does:
 * one `socket` per socket in the tree at start (nested directories included), then `listed`; then
 * `socket` / `gone` as things change. It is built from one DirectoryWatcher per directory
 * (watched-directories.ts, the mechanism; what is watched, and what an event means, is decided
 * here), so each directory is listed after its kernel watch is opened, and a socket made in a new
 * directory before that directory's watch existed is still found. A kernel event is only a hint
 * that a path changed: the path is then judged by `lstat` (never following a symlink), which makes
 * events idempotent and their order between directories irrelevant. Because inotify can drop events, a
 * rescan on the injected clock re-judges every reported path and every name in every watched
 * directory, and restarts the watch of a directory that was replaced.
 *
 * Guarantees:
 * - Only unix sockets are reported; regular files, FIFOs, symlinks and directories are not, and
 *   every name starting with a dot (and everything under a dot-directory) is ignored.
 * - For one path, `gone` only ever follows a `socket`; a `socket` follows a `gone`, or a `socket`
 *   of another file: a socket replaced in place (removed and made again, or renamed over) is
 *   reported again, with its new inode. A file is told apart by inode number and birth time
 *   (file-identity.ts), because filesystems such as ext4 give a new file the inode number just
 *   freed; so a `socket` for a path already reported always means "replaced", even when `ino` is
 *   unchanged.
 * - A directory that goes (or is replaced) makes `gone` for every socket reported under it.
 * - `dir` is created (0700, with its parents) when missing: the agent owns it. If that fails the
 *   iteration reports `error` and tries again on every rescan.
 * - Aborting the signal (or leaving the loop) cancels the rescan timer and closes every kernel
 *   watch; the iteration ends once all of them are closed.
 * Decisions are made while the consumer waits for the next event (a generator): kernel events
 * and due rescans queue up meanwhile, and are judged, in order, on the next pull.
 */
import { type BigIntStats, lstatSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AsyncChannel } from '../../core/async-channel.ts';
import { type CancelTimer, type Clock, systemClock } from '../../core/clock.ts';
import type { DirectoryEvent } from '../../core/dir-watcher.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { makeDirectory } from '../../core/make-directory.ts';
import { directoryIdentity, identityOf, isAbsent } from './file-identity.ts';
import { type WatchedDir, WatchedDirectories, subtreePrefix } from './watched-directories.ts';

export type SocketEvent =
  /** A unix socket at `path` (absolute): present at start, new, or a replacement of the one reported. */
  | { readonly kind: 'socket'; readonly path: string; readonly ino: number }
  /** Every socket that existed at start, in the whole tree, has been reported. Once. */
  | { readonly kind: 'listed' }
  /** A path reported as a socket no longer is one: removed, replaced by a non-socket, or its directory went. */
  | { readonly kind: 'gone'; readonly path: string }
  | { readonly kind: 'error'; readonly error: Error };

export interface PluginSocketWatcherOptions {
  readonly dir: string;
  readonly signal: AbortSignal;
  readonly clock?: Clock | undefined;
  /** Milliseconds between rescans that catch events the kernel dropped. Default 5 s; 0 disables. */
  readonly rescanMs?: number | undefined;
}

export const DEFAULT_SOCKET_RESCAN_MS = 5_000;

type InboxItem =
  | { readonly kind: 'dir'; readonly from: WatchedDir; readonly event: DirectoryEvent }
  | { readonly kind: 'rescan' };

function ioError(message: string, cause: unknown): WarrenError {
  return new WarrenError('IO_FAILURE', `${message}: ${messageOf(cause)}`, { cause });
}

export class PluginSocketWatcher implements AsyncIterable<SocketEvent> {
  readonly #o: PluginSocketWatcherOptions;
  readonly #clock: Clock;
  /** `dir`, absolute: reported paths are absolute, and subtrees are matched by prefix. */
  readonly #root: string;
  /** Sockets reported and not since gone: path → the identity of the file reported. */
  readonly #reported = new Map<string, string>();
  /** Directories under a watch, the root included, and which listings `listed` waits for. */
  readonly #dirs: WatchedDirectories;
  #listedSent = false;
  /** Events decided and not yet yielded (one kernel hint can decide several, e.g. a subtree gone). */
  readonly #out: SocketEvent[] = [];
  /** Every watcher's events and the rescan timer meet here, so one loop decides in one order. */
  readonly #inbox = new AsyncChannel<InboxItem>();
  #started = false;

  constructor(options: PluginSocketWatcherOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#root = resolve(options.dir);
    this.#dirs = new WatchedDirectories({
      signal: options.signal,
      clock: this.#clock,
      deliver: (from, event) => this.#inbox.push({ kind: 'dir', from, event }),
    });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<SocketEvent> {
    if (this.#started) throw new Error('a PluginSocketWatcher is iterated once');
    this.#started = true;
    const { signal } = this.#o;
    if (signal.aborted) return;
    const every = this.#o.rescanMs ?? DEFAULT_SOCKET_RESCAN_MS;
    let cancelRescan: CancelTimer | undefined;
    const armRescan = (): void => {
      cancelRescan?.();
      if (every > 0 && !signal.aborted)
        cancelRescan = this.#clock.setTimer(every, () => this.#inbox.push({ kind: 'rescan' }));
    };
    const onAbort = (): void => {
      cancelRescan?.();
      this.#inbox.close();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const items = this.#inbox[Symbol.asyncIterator]();
    try {
      this.#ensureRoot();
      this.#dirs.watch(this.#root, directoryIdentity(this.#root, true), true);
      armRescan();
      for (;;) {
        while (this.#out.length > 0) {
          yield this.#out.shift() as SocketEvent;
          if (signal.aborted) return;
        }
        const next = await items.next();
        if (next.done === true || signal.aborted) return;
        const item = next.value;
        switch (item.kind) {
          case 'dir':
            this.#onDirectoryEvent(item.from, item.event);
            break;
          case 'rescan':
            this.#rescan();
            armRescan();
            break;
          default: {
            const never: never = item;
            throw new Error(`unknown inbox item ${JSON.stringify(never)}`);
          }
        }
        this.#maybeListed();
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      cancelRescan?.();
      this.#dirs.stopAll();
      this.#inbox.close();
      await items.return?.(undefined);
      await this.#dirs.ended();
    }
  }

  #onDirectoryEvent(from: WatchedDir, event: DirectoryEvent): void {
    if (!this.#isCurrent(from)) return;
    switch (event.kind) {
      case 'present':
        this.#judge(join(from.path, event.name), this.#dirs.isAwaited(from));
        break;
      case 'added':
      case 'changed':
      case 'removed':
        this.#judge(join(from.path, event.name), false);
        break;
      case 'listed':
        this.#dirs.markListed(from);
        break;
      case 'error':
        this.#out.push({ kind: 'error', error: event.error });
        break;
      default: {
        const never: never = event;
        throw new Error(`unknown directory event ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Whether `from` still watches the directory at its path. A watch since dropped or replaced
   * speaks for a directory no longer there; and a DirectoryWatcher whose directory was removed
   * reopens its watch by path, on whatever directory is there now, so one whose directory changed
   * under it is dropped here (its subtree reported gone) and the path judged afresh: a new watch
   * lists the new directory. Its event is dropped too: that listing covers whatever it was about.
   */
  #isCurrent(from: WatchedDir): boolean {
    if (this.#dirs.get(from.path) !== from) return false;
    if (from.path === this.#root) {
      if (directoryIdentity(this.#root, true) === from.identity) return true;
      this.#checkRoot();
    } else {
      if (directoryIdentity(from.path, false) === from.identity) return true;
      this.#judge(from.path, false);
    }
    return false;
  }

  /**
   * Decides what `path` is now against what was reported, and reports the difference. `atStart`:
   * the path was in a directory's listing that `listed` waits for, so a directory there must be
   * listed before `listed` too.
   */
  #judge(path: string, atStart: boolean): void {
    let st: BigIntStats | undefined;
    try {
      st = lstatSync(path, { bigint: true });
    } catch (error) {
      // What cannot be inspected says nothing about what is there: report, change nothing.
      if (!isAbsent(error))
        return void this.#out.push({ kind: 'error', error: ioError(`cannot inspect ${path}`, error) });
    }
    const watched = this.#dirs.get(path);
    if (st?.isDirectory() === true) {
      this.#gone(path);
      const identity = identityOf(st);
      if (watched?.identity === identity) {
        if (atStart && !watched.listed) this.#dirs.awaitListing(watched);
        return;
      }
      const awaited = watched !== undefined && this.#drop(path);
      this.#dirs.watch(path, identity, atStart || awaited);
      return;
    }
    if (watched !== undefined) this.#drop(path);
    if (st?.isSocket() === true) {
      const identity = identityOf(st);
      if (this.#reported.get(path) === identity) return;
      this.#reported.set(path, identity);
      this.#out.push({ kind: 'socket', path, ino: Number(st.ino) });
    } else {
      this.#gone(path);
    }
  }

  #gone(path: string): void {
    if (this.#reported.delete(path)) this.#out.push({ kind: 'gone', path });
  }

  /**
   * Stops watching `path` and everything under it, and reports every socket under it gone.
   * Returns whether `listed` was waiting for one of those directories (a replacement inherits that).
   */
  #drop(path: string): boolean {
    const awaited = this.#dirs.drop(path);
    const prefix = subtreePrefix(path);
    for (const p of [...this.#reported.keys()].filter((k) => k.startsWith(prefix)).sort()) this.#gone(p);
    return awaited;
  }

  #maybeListed(): void {
    if (this.#listedSent || !this.#dirs.allListed()) return;
    this.#listedSent = true;
    this.#out.push({ kind: 'listed' });
  }

  #ensureRoot(): void {
    try {
      makeDirectory(this.#root, 0o700);
    } catch (error) {
      this.#out.push({ kind: 'error', error: ioError(`cannot create the plugins directory ${this.#root}`, error) });
    }
  }

  /** Makes the root if it is missing, and watches it afresh if it is not the directory watched. */
  #checkRoot(): void {
    this.#ensureRoot();
    const identity = directoryIdentity(this.#root, true);
    const root = this.#dirs.get(this.#root);
    if (root !== undefined && root.identity === identity) return;
    const awaited = root !== undefined && this.#drop(this.#root);
    this.#dirs.watch(this.#root, identity, awaited);
  }

  /** Catches what the kernel watches did not tell: a replaced root, missed removals, missed files. */
  #rescan(): void {
    this.#checkRoot();
    // Everything reported or watched, judged where it stands (parents first: a dropped directory
    // takes its subtree with it, and what it took is not judged again).
    for (const path of [...new Set([...this.#reported.keys(), ...this.#dirs.paths()])].sort()) {
      if (path !== this.#root && (this.#reported.has(path) || this.#dirs.has(path))) this.#judge(path, false);
    }
    // Every name in every watched directory: what appeared without an event.
    for (const dir of this.#dirs.all()) {
      if (this.#dirs.get(dir.path) !== dir || dir.identity === undefined) continue;
      let names: string[];
      try {
        names = readdirSync(dir.path);
      } catch (error) {
        if (!isAbsent(error)) this.#out.push({ kind: 'error', error: ioError(`cannot list ${dir.path}`, error) });
        continue;
      }
      for (const name of names.sort()) if (!name.startsWith('.')) this.#judge(join(dir.path, name), false);
    }
  }
}
