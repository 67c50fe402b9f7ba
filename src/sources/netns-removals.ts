/**
 * Network namespace directories as a source: an `AsyncIterable` of entries disappearing from one
 * directory (a namespace torn down), until an `AbortSignal` aborts. A removal is the moment an
 * exited container's addresses may become free; what it means is decided by the release rule,
 * which looks at the namespace itself — a removal seen here proves nothing on its own (the
 * directory may be one the agent cannot really observe).
 */
import type { Clock } from '../core/clock.ts';
import { DirectoryWatcher } from '../core/dir-watcher.ts';

export interface NetnsRemoval {
  readonly dir: string;
  readonly name: string;
}

export async function* netnsRemovals(dir: string, signal: AbortSignal, clock: Clock): AsyncGenerator<NetnsRemoval> {
  // Namespace files have no temporary names: every entry counts, dot-files too.
  for await (const event of new DirectoryWatcher({ dir, signal, clock, include: () => true })) {
    if (event.kind === 'removed') yield { dir, name: event.name };
  }
}
