/**
 * The plugin's side of the journal: record a DEL the agent could not take, durably, then let the
 * DEL succeed. Loaded only on that fallback path, so a normal plugin call never pays for it.
 */
import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../core/atomic-file.ts';
import { WarrenError } from '../core/errors.ts';
import { type JournalEntry, encodeEntry, journalFileName } from './journal-entry.ts';

/**
 * Refuses a journal directory another user could write to: a planted file there would be taken
 * as a release by the agent.
 */
export function checkJournalDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new WarrenError('IO_FAILURE', `journal ${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) throw new WarrenError('IO_FAILURE', `journal ${dir} belongs to uid ${st.uid}, not ${uid}`);
  if ((st.mode & 0o022) !== 0) throw new WarrenError('IO_FAILURE', `journal ${dir} is writable by others (mode ${(st.mode & 0o777).toString(8)})`);
}

/** Writes the intent atomically and durably; returns the file's path. */
export function recordMissedDelete(dir: string, entry: JournalEntry): string {
  checkJournalDir(dir);
  const path = join(dir, journalFileName(entry));
  writeFileAtomic(path, encodeEntry(entry), 0o600);
  return path;
}
