/**
 * Watches what Warren's CNI config is made from (the config manager, cni-config-manager.ts, runs a
 * pass on every change): the conf dir, the named primary and the readiness indicator.
 *
 * Guarantees:
 * - One watch per directory (core/dir-watcher.ts), whatever number of these inputs live in it,
 *   reporting only the names that matter there: in the conf dir every config name (dot-files too:
 *   the runtime loads them; Warren's own temp files end in .tmp and are not configs), elsewhere
 *   the named primary's and the indicator's names.
 * - Events the kernel dropped are caught by a rescan every `rescanMs`; a directory that cannot be
 *   read yet (the indicator's, before it exists) is rescanned, not reported as a change; nor is
 *   what is there when the watch starts (the manager's first pass reads it).
 * - Every watch ends when the signal aborts; the returned loops resolve then.
 */
import { basename, dirname } from 'node:path';
import type { Clock } from '../../core/clock.ts';
import { DirectoryWatcher } from '../../core/dir-watcher.ts';
import { isConfigName } from '../../cni/derived-config.ts';
import { primaryPath } from './conf-dir-listing.ts';

export interface ConfigInputs {
  readonly confDir: string;
  /** The primary, named explicitly (absolute, or relative to the conf dir); otherwise found in confDir. */
  readonly primaryConfig?: string | undefined;
  readonly readinessIndicator?: string | undefined;
  readonly clock: Clock;
  /** Milliseconds between rescans of the watched directories (events dropped by the kernel). */
  readonly rescanMs: number;
}

/** Calls `changed` on every change of an input until the signal aborts; one loop per directory. */
export function watchConfigInputs(inputs: ConfigInputs, signal: AbortSignal, changed: () => void): Promise<void>[] {
  // Per directory, the names that matter there.
  const watched = new Map<string, Array<(name: string) => boolean>>();
  const watch = (dir: string, include: (name: string) => boolean): void => {
    watched.set(dir, [...(watched.get(dir) ?? []), include]);
  };
  watch(inputs.confDir, (name) => isConfigName(name));
  const primary = inputs.primaryConfig === undefined ? undefined : primaryPath(inputs.confDir, inputs.primaryConfig);
  if (primary !== undefined) watch(dirname(primary), (name) => name === basename(primary));
  const indicator = inputs.readinessIndicator;
  if (indicator !== undefined) watch(dirname(indicator), (name) => name === basename(indicator));
  const loops: Promise<void>[] = [];
  for (const [dir, includes] of watched) {
    const include = (name: string): boolean => includes.some((f) => f(name));
    const watcher = new DirectoryWatcher({ dir, signal, clock: inputs.clock, rescanMs: inputs.rescanMs, include });
    loops.push(
      (async () => {
        for await (const event of watcher) {
          // A directory that cannot be read yet (the indicator's, before it exists) is rescanned.
          if (event.kind !== 'error' && event.kind !== 'present') changed();
        }
      })(),
    );
  }
  return loops;
}
