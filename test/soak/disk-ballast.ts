/**
 * A node's disk filled and freed under its running agent: the node's state directory is a tmpfs
 * of its own (SIZE), and filling writes one ballast file into it until the kernel answers ENOSPC,
 * so the agent's next write (a SQLite commit, a journal entry, its WAL growing) fails as on a full
 * disk. Freeing removes the ballast. Only the ballast is ever written or removed here: what the
 * agent wrote stays as the full disk left it, which is the point.
 *
 * Bounded: the ballast never grows past the mount's size, and each write is one chunk.
 */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The state directory's tmpfs: room for the database, its WAL, the journal and the copies' worth of churn. */
export const STATE_DISK_SIZE = '64m';
const CHUNK = Buffer.alloc(256 * 1024);
const BALLAST = '.soak-ballast';

/** Fills the file system under `dir` to the last byte; returns the bytes written. */
export function fillDisk(dir: string): number {
  const fd = openSync(join(dir, BALLAST), 'a');
  let written = 0;
  try {
    for (;;) {
      try {
        written += writeSync(fd, CHUNK);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
        // The tail: smaller writes until not one byte fits.
        for (let size = CHUNK.length / 2; size >= 1; size = Math.floor(size / 2)) {
          try {
            for (;;) written += writeSync(fd, CHUNK, 0, size);
          } catch (tail) {
            if ((tail as NodeJS.ErrnoException).code !== 'ENOSPC') throw tail;
          }
        }
        return written;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** Removes the ballast `fillDisk` wrote under `dir`. */
export function freeDisk(dir: string): void {
  rmSync(join(dir, BALLAST), { force: true });
}

/** Whether `name` (an entry of the state directory) is the ballast, which no copy of the state takes. */
export function isBallast(name: string): boolean {
  return name === BALLAST;
}
