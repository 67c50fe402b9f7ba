/**
 * Whom the registry trusts. A registered runtime adapter's word releases addresses, so whoever can
 * put a socket where the registry looks must be someone the agent already trusts:
 * - the plugins directory is held to the journal directory's rule (checkPrivateDir: no symlink,
 *   owned by the agent's user, writable by no group or other), so no one else can make a socket or
 *   a subdirectory in it;
 * - a socket (and an adapter's endpoint, when it is another file) must belong to the agent's user
 *   or root, judged by lstat, never following a link; another user's socket is never dialed.
 * Checked before every registration, not once at start: a directory loosened later stops new
 * registrations at once.
 */
import { lstatSync } from 'node:fs';
import { messageOf } from '../../core/errors.ts';
import { checkPrivateDir } from '../../cni/journal-dir.ts';

export const PLUGINS_DIR_RISK = "put a runtime adapter's socket in it, whose word releases addresses in use";

/** Why the plugins directory cannot be trusted now, or undefined. Creates it (0700) when missing. */
export function pluginsDirProblem(dir: string): string | undefined {
  try {
    checkPrivateDir(dir, { label: 'plugins directory', risk: PLUGINS_DIR_RISK });
    return undefined;
  } catch (error) {
    return messageOf(error);
  }
}

/**
 * Why the socket at `path` cannot be trusted, or undefined: not a socket (a link is not one), or
 * owned by neither `uid` (the agent's) nor root. `missingIsFine`: an endpoint not made yet is not
 * judged here (it can only be made inside the trusted directory).
 */
export function socketOwnerProblem(path: string, uid = process.getuid?.(), missingIsFine = false): string | undefined {
  let st;
  try {
    st = lstatSync(path);
  } catch (error) {
    if (missingIsFine && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return `socket ${path} cannot be examined: ${messageOf(error)}`;
  }
  if (!st.isSocket())
    return (
      `${path} is not a unix ` +
      `socket${st.isSymbolicLink() ? ' (it is a symbolic link, which is never followed)' : ''}`
    );
  if (uid === undefined || st.uid === uid || st.uid === 0) return undefined;
  const trusted =
    uid === 0 ? 'not to root, which runs Warren' : `neither to uid ${uid}, which runs Warren, nor to root`;
  return `socket ${path} belongs to uid ${st.uid}, ${trusted}; only they may register a runtime adapter`;
}

/** What the registry asks before it dials a socket; the agent's is OWNER_TRUST. */
export interface RegistryTrust {
  /** Why the plugins directory cannot be trusted now, or undefined. */
  dir(dir: string): string | undefined;
  /** Why the socket at `path` cannot be trusted, or undefined (`missingIsFine`: see socketOwnerProblem). */
  socket(path: string, missingIsFine: boolean): string | undefined;
}

/** The agent's trust: its own user's (or root's) directory and sockets only. */
export const OWNER_TRUST: RegistryTrust = {
  dir: pluginsDirProblem,
  socket: (path, missingIsFine) => socketOwnerProblem(path, process.getuid?.(), missingIsFine),
};
