/**
 * Which file a path holds: the identity the socket watcher tells a socket, or a watched directory,
 * apart from the one at the same path before it. The inode number alone cannot say: ext4 reuses a
 * freed number at once, so a socket closed and bound again usually gets the same one. Birth time
 * tells them apart; where the filesystem has none, the change time does (a chmod then reports the
 * socket again, which is harmless: a replacement is re-registered, never lost).
 *
 * Guarantees: two files at one path, one after the other, never have the same identity (birth time
 * or change time differ even when the inode number is reused); looking never throws for a path
 * that is not there, and says nothing of one that cannot be looked at.
 */
import { type BigIntStats, lstatSync, statSync } from 'node:fs';

/** The identity of the file `st` describes. */
export function identityOf(st: BigIntStats): string {
  return `${st.ino}:${st.birthtimeNs !== 0n ? st.birthtimeNs : st.ctimeNs}`;
}

/**
 * The identity of the directory at `path`; undefined when there is none (nothing, or not a
 * directory) or it cannot be looked at. `follow` for the root, which may be a symlink to the real
 * directory (its kernel watch follows it too).
 */
export function directoryIdentity(path: string, follow: boolean): string | undefined {
  try {
    const st = follow ? statSync(path, { bigint: true }) : lstatSync(path, { bigint: true });
    return st.isDirectory() ? identityOf(st) : undefined;
  } catch {
    return undefined;
  }
}

/** A path that is not there, or whose parent is no longer a directory: nothing is at it. */
export function isAbsent(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
