/**
 * Whether Warren's plugin is installed in a CNI bin directory as `warren install` lays it out
 * (install.ts `INSTALLED`): the forwarder `DIR/warren`, an executable file, which the runtime runs
 * for every call; and beside it `DIR/warren.d/`, the Node and the TypeScript plugin bundle the
 * forwarder hands a call to whenever it cannot relay it alone (no agent: a DEL is journaled there,
 * and nowhere else). Symbolic links are followed, as the runtime's exec follows them.
 *
 * A runtime (libcni) runs the plugin from the first of its bin directories that holds a regular
 * file by that name, executable or not: a directory so named is passed over, a file that cannot
 * be run is run and fails. So `missing` is what the runtime passes over, `unusable` what it fails
 * on.
 *
 * Read-only and never throws: every state of a file is a value.
 */
import { accessSync, constants, lstatSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { messageOf } from '../../core/errors.ts';
import { INSTALLED } from '../install.ts';

/** One file of the install, as the runtime (or the forwarder) would find it. */
export type InstalledFileState =
  | { readonly kind: 'ok' }
  | { readonly kind: 'missing'; readonly reason: string }
  | { readonly kind: 'unusable'; readonly reason: string };

export interface PluginInstall {
  readonly binDir: string;
  /** DIR/warren, which must be executable. */
  readonly forwarder: InstalledFileState;
  /** DIR/warren.d/node, which must be executable. */
  readonly node: InstalledFileState;
  /** DIR/warren.d/warren.cjs, which must be readable. */
  readonly bundle: InstalledFileState;
}

function stateOf(path: string, mode: number, what: string): InstalledFileState {
  let st;
  try {
    st = statSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      let dangling = false;
      try {
        dangling = lstatSync(path).isSymbolicLink();
      } catch {
        // nothing there at all
      }
      return { kind: 'missing', reason: dangling ? `${path} is a symbolic link to nothing` : `${path} does not exist` };
    }
    return { kind: 'unusable', reason: `${path} cannot be examined: ${messageOf(error)}` };
  }
  // libcni takes only a regular file for a plugin and looks on in the next directory.
  if (!st.isFile()) return { kind: 'missing', reason: `${path} is not a file` };
  try {
    accessSync(path, mode);
  } catch {
    return {
      kind: 'unusable',
      reason: `${path} is not ${what} (mode ${(st.mode & 0o777).toString(8).padStart(3, '0')})`,
    };
  }
  return { kind: 'ok' };
}

/** The plugin's files in `binDir`. */
export function inspectPluginInstall(binDir: string): PluginInstall {
  const fallback = join(binDir, INSTALLED.fallbackDir);
  return {
    binDir,
    forwarder: stateOf(join(binDir, INSTALLED.forwarder), constants.X_OK, 'executable'),
    node: stateOf(join(fallback, INSTALLED.node), constants.X_OK, 'executable'),
    bundle: stateOf(join(fallback, INSTALLED.bundle), constants.R_OK, 'readable'),
  };
}
