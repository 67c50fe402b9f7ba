/**
 * Reading a file that someone else may have made: a FIFO, a device, a symlink to /dev/zero, a
 * file that grows without end. Used for every file of a directory others can write into (the CNI
 * conf dir, host-local's data dir).
 *
 * Guarantees: never blocks and never reads more than `maxBytes` + 1 bytes.
 * - Only a regular file is opened at all (stat first: opening some devices has effects), and only
 *   a regular file is read: the open is O_NONBLOCK (a FIFO put in its place between the stat and
 *   the open does not block the event loop) and O_NOCTTY, and what was opened is checked again
 *   with fstat, so a swap between the stat and the open is caught.
 * - With `noFollow`, a symbolic link is refused rather than followed (O_NOFOLLOW, ELOOP).
 * - A file larger than `maxBytes` is reported as such, whether its size says so or its read does
 *   (a file that grows while it is read).
 * - The outcome is a value for every expected case (missing, not regular, too large); only an
 *   unexpected failure (EACCES, EIO) throws, with the path in the message.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, statSync } from 'node:fs';

export type BoundedRead =
  /** `uid`: the file's owner, for a reader that trusts only one user's files. */
  | { readonly kind: 'read'; readonly text: string; readonly uid: number }
  | { readonly kind: 'missing' }
  /** Not a regular file (FIFO, socket, device, directory) or, with noFollow, a symbolic link. */
  | { readonly kind: 'not-regular'; readonly what: string }
  | { readonly kind: 'too-large'; readonly maxBytes: number };

export interface BoundedReadOptions {
  /** Refuse a symbolic link instead of following it. */
  readonly noFollow?: boolean;
}

/** Reads `path` as UTF-8 text when it is a regular file of at most `maxBytes`; see the header. */
export function readRegularFile(path: string, maxBytes: number, options: BoundedReadOptions = {}): BoundedRead {
  let fd: number;
  try {
    const before = (options.noFollow === true ? lstatSync : statSync)(path, { throwIfNoEntry: false });
    if (before === undefined) return { kind: 'missing' };
    if (!before.isFile()) return { kind: 'not-regular', what: kindOf(before) };
    fd = openSync(
      path,
      constants.O_RDONLY |
        constants.O_NONBLOCK |
        constants.O_NOCTTY |
        (options.noFollow === true ? constants.O_NOFOLLOW : 0),
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    if (code === 'ELOOP') return { kind: 'not-regular', what: 'a symbolic link' };
    throw error;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { kind: 'not-regular', what: kindOf(st) };
    if (st.size > maxBytes) return { kind: 'too-large', maxBytes };
    // One byte more than allowed tells a file that grew past the bound while it was read.
    const buffer = Buffer.allocUnsafe(Math.min(maxBytes, st.size) + 1);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    if (length > maxBytes) return { kind: 'too-large', maxBytes };
    // A file that grew within the bound: read what remains of it, still bounded.
    if (length === buffer.length) return readGrown(fd, buffer, maxBytes, st.uid);
    return { kind: 'read', text: buffer.subarray(0, length).toString('utf8'), uid: st.uid };
  } finally {
    closeSync(fd);
  }
}

function readGrown(fd: number, start: Buffer, maxBytes: number, uid: number): BoundedRead {
  const buffer = Buffer.allocUnsafe(maxBytes + 1);
  start.copy(buffer);
  let length = start.length;
  while (length < buffer.length) {
    const n = readSync(fd, buffer, length, buffer.length - length, null);
    if (n === 0) break;
    length += n;
  }
  if (length > maxBytes) return { kind: 'too-large', maxBytes };
  return { kind: 'read', text: buffer.subarray(0, length).toString('utf8'), uid };
}

function kindOf(st: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSymbolicLink(): boolean;
}): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

/** The reason a bounded read gave no text, for a message; undefined when it read. */
export function unreadReason(outcome: BoundedRead): string | undefined {
  switch (outcome.kind) {
    case 'read':
      return undefined;
    case 'missing':
      return 'is missing';
    case 'not-regular':
      return `is ${outcome.what}, not a regular file`;
    case 'too-large':
      return `is larger than ${outcome.maxBytes} bytes`;
    default: {
      const never: never = outcome;
      throw new Error(`unhandled read outcome ${JSON.stringify(never)}`);
    }
  }
}
