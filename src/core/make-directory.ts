/**
 * Creates a directory and its missing parents, in a walk that ends: one stat per component going
 * up to the nearest existing ancestor, then one mkdir per missing component going down. Every
 * failure is a WarrenError (IO_FAILURE) naming the directory asked for, the component that could
 * not be made, and why.
 *
 * Why not `mkdirSync(dir, { recursive: true })`: Node's recursive mkdir (libuv) retries a
 * component that answers ENOENT after making its parent, and on procfs (`/proc/x/y`) mkdir of
 * `/proc/x` answers ENOENT although `/proc` exists, so it loops forever at 100% CPU and never
 * returns — with a path that a network config (`journal_dir`) or a flag can name. Here an ENOENT
 * below a parent that exists is an answer: that filesystem does not take new directories.
 *
 * Idempotent: a directory that exists (made by someone else meanwhile, too) is success; the mode
 * applies to the directories this call creates, never to existing ones (as mkdir's does).
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { WarrenError, messageOf } from './errors.ts';

/** Makes `path` and its missing parents (mode `mode`, under the umask); see the module header. */
export function makeDirectory(path: string, mode = 0o700): void {
  const target = resolve(path);
  const refuse = (what: string, cause?: unknown): WarrenError =>
    new WarrenError('IO_FAILURE', `cannot create directory ${target}: ${what}`, cause === undefined ? {} : { cause });
  // Up: the components that do not exist yet, nearest first. A path has finitely many components,
  // and dirname of the root is the root, so this ends.
  const missing: string[] = [];
  for (let dir = target; ; dir = dirname(dir)) {
    const kind = kindOf(dir);
    if (kind === 'directory') break;
    if (kind === 'missing' && dir !== dirname(dir)) {
      missing.push(dir);
      continue;
    }
    if (kind === 'missing') throw refuse(`the root ${dir} does not exist`);
    if (kind === 'other') throw refuse(`${dir} exists and is not a directory`);
    throw refuse(`${dir} cannot be examined: ${messageOf(kind.error)}`, kind.error);
  }
  // Down: each missing component once, its parent known to exist.
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, { mode });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && kindOf(dir) === 'directory') continue; // made meanwhile: fine
      if (code === 'ENOENT')
        throw refuse(
          `${dirname(dir)} exists but does not take the new directory ${dir} (a filesystem such as /proc ` +
            `or /sys, or one changing under this call): choose a directory on a writable filesystem`,
          error,
        );
      throw refuse(`making ${dir} failed: ${messageOf(error)}`, error);
    }
  }
}

type Kind = 'directory' | 'missing' | 'other' | { readonly error: unknown };

function kindOf(path: string): Kind {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'other';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTDIR: a component above is not a directory; the walk up finds it and says so.
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : { error };
  }
}
