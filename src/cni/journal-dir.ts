/**
 * The journal directory's default and its safety rule, in one place for both of its users: the
 * plugin checks it before it records a DEL (plugin/journal-writer.ts), the agent when it starts
 * draining it (sources/missed-delete-journal.ts). Both refuse exactly the same directories, so a
 * file another user could plant is never taken as a release by either. Beside the journal entry
 * codec, which both sides share for the same reason.
 *
 * The same rule (checkPrivateDir) holds every directory the agent trusts what appears in: the
 * plugins directory too, where a socket is taken for a runtime adapter (agent/registry/trust.ts).
 */
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, openSync, readlinkSync } from 'node:fs';
import { WarrenError, messageOf } from '../core/errors.ts';
import { makeDirectory } from '../core/make-directory.ts';

/**
 * Where the plugin writes missed DELs unless a network config names `ipam.journal_dir` (or
 * WARREN_JOURNAL_DIR is set in the runtime's environment), and so where a root agent reads them
 * whatever its --state-dir: the plugin cannot know the agent's flags.
 */
export const DEFAULT_JOURNAL_DIR = '/var/lib/warren/journal';

export interface JournalDirOptions {
  /**
   * Set the mode of a directory that passed the check to 0700 (the agent does: intents name
   * containers, which is no one else's business). Never loosens, never touches what it refuses.
   */
  readonly tighten?: boolean;
}

/** What a trusted directory is, for the messages of checkPrivateDir. */
export interface PrivateDirOptions extends JournalDirOptions {
  /** What the directory is, as messages name it: `journal directory`, `plugins directory`. */
  readonly label: string;
  /** What another user could do with it, e.g. `plant releases in it`. */
  readonly risk: string;
}

/**
 * Creates the journal directory (0700) when it is missing, and refuses one another user could
 * write to, since a file planted there would be taken as a release: a symbolic link (it leads
 * wherever its owner likes), anything but a directory, a directory owned by another user, or one
 * writable by its group or others. The checks and the tightening are made on one open descriptor
 * (O_NOFOLLOW), so the directory cannot be swapped for a link between them.
 */
export function checkJournalDir(dir: string, options: JournalDirOptions = {}): void {
  checkPrivateDir(dir, { ...options, label: 'journal directory', risk: 'plant releases in it' });
}

/**
 * The rule of checkJournalDir for any directory whose contents the agent trusts: created 0700 when
 * missing; a symbolic link, a non-directory, another user's directory or one its group or others
 * can write is refused (IO_FAILURE naming `label`, the directory and what is wrong).
 */
export function checkPrivateDir(dir: string, options: PrivateDirOptions): void {
  const refuse = (where: string, what: string, cause?: unknown): WarrenError =>
    new WarrenError('IO_FAILURE', `${options.label} ${where} ${what}`, cause === undefined ? {} : { cause });
  let mkdirError: unknown;
  try {
    makeDirectory(dir, 0o700);
  } catch (error) {
    mkdirError = error; // described below, from what is there instead
  }
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    let st;
    try {
      st = lstatSync(dir);
    } catch {
      throw refuse(dir, `cannot be created or opened: ${messageOf(mkdirError ?? error)}`, mkdirError ?? error);
    }
    if (st.isSymbolicLink()) {
      let target = '';
      try {
        target = ` to ${readlinkSync(dir)}`;
      } catch {
        // the link itself is the problem, wherever it points
      }
      throw refuse(dir, `is a symbolic link${target}; it must be a real directory owned by this user`);
    }
    if (!st.isDirectory()) throw refuse(dir, 'exists and is not a directory');
    throw refuse(dir, `cannot be opened: ${messageOf(error)}`, error);
  }
  try {
    const st = fstatSync(fd);
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid)
      throw refuse(
        dir,
        `belongs to uid ${st.uid}, not to uid ${uid} that runs Warren; another user could ${options.risk}`,
      );
    if ((st.mode & 0o022) !== 0) {
      throw refuse(
        dir,
        `is writable by its group or others (mode ${(st.mode & 0o777).toString(8).padStart(3, '0')}); make ` +
          `it 0700 after checking what is in it`,
      );
    }
    if (options.tighten === true && (st.mode & 0o777) !== 0o700) fchmodSync(fd, 0o700);
  } finally {
    closeSync(fd);
  }
}
