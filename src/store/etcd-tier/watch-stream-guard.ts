/**
 * A guard on the etcd client's shared watch stream (the etcd3 package's WatchManager, lib/watch.js).
 * That manager throws from the stream's `data` handler when an answer does not fit its bookkeeping:
 * an event for a watch id none of its watchers holds ("Failed to find watcher for IWatchResponse"),
 * or a creation answer with no watcher waiting for one. Thrown there, nothing catches it: the agent
 * ends on an uncaught error. Found by the soak (etcd, seed 3943): an agent started just after the
 * whole etcd cluster was restored from a snapshot died so, before it served.
 *
 * Guarantees, once `guardWatchStreams` ran (the etcd client calls it, client.ts):
 * - such an answer is taken as a broken stream, as the manager takes a stream error: every watcher
 *   is told `disconnected`, the stream is made again after the manager's backoff, and every watcher
 *   is attached again. Warren's watches resume from the revision their events reached and check the
 *   store is still the one they knew before they count as synced again (key-watch.ts), so nothing
 *   is missed and nothing is guessed: an event is never handed to a watcher it might not be for;
 * - any other error is thrown as before; a watcher's own listener's error is the manager's concern
 *   (it rethrows those on a later turn, as it always did).
 * Written by hand: no library offers this, and the manager is the etcd3 package's own (the client
 * Warren uses for etcd, STYLE.md); it patches two methods of that one class, once per process.
 */
import type { IWatchResponse } from 'etcd3';

/** What of the manager the guard reaches: its private methods and watcher list (lib/watch.js, etcd3 1.1). */
interface ManagerInternals {
  handleResponse(res: IWatchResponse): void;
  handleCreatedResponse(res: IWatchResponse): void;
  handleError(error: Error): void;
}

let guarded = false;

/** Patches etcd3's WatchManager so an answer its bookkeeping cannot place breaks the stream instead of the process. */
export async function guardWatchStreams(): Promise<void> {
  if (guarded) return;
  const { WatchManager } = await import('etcd3/lib/watch.js');
  const { ClientRuntimeError } = await import('etcd3');
  const manager = WatchManager.prototype as unknown as ManagerInternals;
  for (const method of ['handleResponse', 'handleCreatedResponse'] as const) {
    const original = manager[method];
    manager[method] = function (this: ManagerInternals, res: IWatchResponse): void {
      try {
        original.call(this, res);
      } catch (error) {
        if (!(error instanceof ClientRuntimeError)) throw error;
        this.handleError(new Error(`etcd's watch stream answered what its watchers cannot place (${error.message})`));
      }
    };
  }
  guarded = true;
}
