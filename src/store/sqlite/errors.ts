/**
 * SQLite failures as Warren errors: a busy database is TRY_AGAIN (CNI code 11), and a failure about
 * the file (full disk, corruption, I/O) is IO_FAILURE naming the file and what to do; anything else
 * is passed through unchanged.
 */
import { WarrenError } from '../../core/errors.ts';

/** SQLite primary result codes Warren tells apart (extended codes carry them in the low byte). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

function sqliteCode(error: unknown): number | undefined {
  const code = (error as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' ? code & 0xff : undefined;
}

export function isBusy(error: unknown): boolean {
  const code = sqliteCode(error);
  return code === SQLITE_BUSY || code === SQLITE_LOCKED;
}

/** An SQLite failure about the file, as an error that names it; anything else unchanged. */
export function describeSqliteError(path: string, error: unknown): unknown {
  const code = sqliteCode(error);
  const detail = (error as { errstr?: string; message?: string }).errstr ?? (error as Error).message;
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return new WarrenError('TRY_AGAIN', `database ${path} is locked by another process; try again`, { cause: error });
    case SQLITE_FULL:
      return new WarrenError(
        'IO_FAILURE',
        `database ${path}: the disk is full (${detail}); free space where it lives`,
        { cause: error },
      );
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return new WarrenError(
        'IO_FAILURE',
        `database ${path} is corrupt (${detail}); restore it from a backup, or move it aside to start with ` +
          `no allocations`,
        { cause: error },
      );
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return new WarrenError('IO_FAILURE', `database ${path}: ${detail}`, { cause: error });
    default:
      return error;
  }
}
