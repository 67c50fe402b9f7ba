/**
 * `warren journal` when no agent answers: the journal directory read by the command itself, so an
 * operator sees what is waiting exactly when nothing is releasing it. Read-only: it never moves,
 * removes or rewrites a file (setting aside and completing are the agent's), and it treats the
 * directory as others may have planted things in it: every file is read as core/bounded-read.ts
 * reads one (a symlink is not followed, a FIFO does not hang the command), must be a regular file
 * of at most MAX_ENTRY_BYTES owned by the directory's owner (the user the plugin and agent run as),
 * and is decoded by the plugin's own entry format. At most MAX_LISTED files are read; the rest are
 * counted.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type BoundedRead, readRegularFile } from '../core/bounded-read.ts';
import { messageOf } from '../core/errors.ts';
import { JOURNAL_SUFFIX, MAX_ENTRY_BYTES, decodeEntry } from '../cni/journal-entry.ts';
import { REJECTED_DIR } from '../sources/missed-delete-journal.ts';

/** Files read at most, waiting and set aside each; a directory with more says how many it left out. */
export const MAX_LISTED = 1_000;

export interface OfflineIntent {
  readonly name: string;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  /** When the plugin wrote it (RFC 3339, its wall clock). */
  readonly recordedAt: string;
  /** Why the plugin journaled the DEL. */
  readonly reason: string;
}

export interface OfflineJournal {
  readonly journalDir: string;
  /** DELs the plugin recorded and no agent has released yet. */
  readonly pending: readonly OfflineIntent[];
  /** Files the agent will not release on (set aside when it reads them), with why. */
  readonly unreadable: ReadonlyArray<{ name: string; reason: string }>;
  /** Names in rejected/: set aside by the agent before. */
  readonly rejected: readonly string[];
  /** Files beyond MAX_LISTED, not read. */
  readonly notListed: number;
}

/** Reads `dir` as the agent would, changing nothing; throws only when the directory cannot be listed. */
export function readJournalOffline(dir: string): OfflineJournal {
  const owner = statSync(dir).uid;
  const names = readdirSync(dir)
    .filter((n) => n.endsWith(JOURNAL_SUFFIX))
    .sort();
  const pending: OfflineIntent[] = [];
  const unreadable: Array<{ name: string; reason: string }> = [];
  for (const name of names.slice(0, MAX_LISTED)) {
    const read = readEntry(join(dir, name), name, owner);
    if ('network' in read) pending.push({ name, ...read });
    else unreadable.push({ name, reason: read.reason });
  }
  let rejected: string[] = [];
  try {
    rejected = readdirSync(join(dir, REJECTED_DIR)).sort().slice(0, MAX_LISTED);
  } catch {
    // No rejected/ yet: nothing was ever set aside.
  }
  return { journalDir: dir, pending, unreadable, rejected, notListed: Math.max(0, names.length - MAX_LISTED) };
}

function readEntry(path: string, name: string, owner: number): Omit<OfflineIntent, 'name'> | { reason: string } {
  let read: BoundedRead;
  try {
    // Bounded, never blocking on a FIFO, never following a link: core/bounded-read.ts.
    read = readRegularFile(path, MAX_ENTRY_BYTES, { noFollow: true });
  } catch (error) {
    return { reason: `cannot be read: ${messageOf(error)}` };
  }
  switch (read.kind) {
    case 'missing':
      return { reason: 'was removed while it was read (released meanwhile)' };
    case 'not-regular':
      return { reason: `is ${read.what}, not a regular file` };
    case 'too-large':
      return { reason: `is more than ${read.maxBytes} bytes` };
    case 'read': {
      if (read.uid !== owner)
        return { reason: `belongs to uid ${read.uid}, not to uid ${owner} that owns the journal` };
      const decoded = decodeEntry(name, read.text);
      if (decoded.kind === 'invalid') return { reason: decoded.reason };
      const { network, containerID, ifname, recordedAt, reason } = decoded.entry;
      return { network, containerID, ifname, recordedAt: new Date(recordedAt).toISOString(), reason };
    }
  }
}
