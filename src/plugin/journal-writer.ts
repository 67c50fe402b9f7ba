/**
 * The plugin's side of the journal: record a DEL the agent could not take, durably, then let the
 * DEL succeed. Loaded only on that fallback path, so a normal plugin call never pays for it. The
 * directory passes the same check the agent applies to it (cni/journal-dir.ts).
 */
import { join } from 'node:path';
import { writeFileAtomic } from '../core/atomic-file.ts';
import { systemClock } from '../core/clock.ts';
import { type Moment, momentOf } from '../core/moment.ts';
import { checkJournalDir } from '../cni/journal-dir.ts';
import { type JournalEntry, encodeEntry, journalFileName } from '../cni/journal-entry.ts';

/**
 * When the DEL is being recorded: the wall clock, and the boot's monotonic clock the agent reads
 * too, so the agent orders this DEL against its allocations whatever NTP does to the wall clock.
 */
export function recordingMoment(): Moment {
  return momentOf(systemClock);
}

/** Writes the intent atomically and durably; returns the file's path. */
export function recordMissedDelete(dir: string, entry: JournalEntry): string {
  checkJournalDir(dir);
  const path = join(dir, journalFileName(entry));
  writeFileAtomic(path, encodeEntry(entry), 0o600);
  return path;
}
