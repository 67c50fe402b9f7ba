/**
 * Where a state directory is, when --state-dir does not say: the system's as root, else the
 * first of the user's that can be written (XDG state dir, ~/.local/state/warren, ./.warren), so
 * the agent starts anywhere. The agent makes the one it takes (`defaultStateDir`); a client (the
 * CLI) finds the same one without creating anything (`findStateDir`).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { WarrenError } from '../../core/errors.ts';
import { makeDirectory } from '../../core/make-directory.ts';

/** A root agent's state directory (database; the journal's default is DEFAULT_JOURNAL_DIR). */
export const DEFAULT_STATE_DIR = '/var/lib/warren';

/** Where a state directory may be, best first: the system's as root, then the user's. */
export function stateDirCandidates(env: NodeJS.ProcessEnv, uid: number, cwd: string): string[] {
  const candidates: string[] = [];
  if (uid === 0) candidates.push(DEFAULT_STATE_DIR);
  if (env.XDG_STATE_HOME) candidates.push(join(env.XDG_STATE_HOME, 'warren'));
  const home = env.HOME || safeHomedir();
  if (home) candidates.push(join(home, '.local', 'state', 'warren'));
  candidates.push(join(cwd, '.warren'));
  return candidates;
}

/** The first state directory this user can write, created (0700) when missing: the agent's. */
export function defaultStateDir(env: NodeJS.ProcessEnv, uid: number, cwd: string): string {
  return firstUsable(stateDirCandidates(env, uid, cwd), writableDir);
}

/**
 * The state directory `defaultStateDir` would choose, found without creating anything: where a
 * client (the CLI) looks for a non-root agent's socket.
 */
export function findStateDir(env: NodeJS.ProcessEnv, uid: number, cwd: string): string {
  return firstUsable(stateDirCandidates(env, uid, cwd), couldWrite);
}

function firstUsable(candidates: readonly string[], usable: (dir: string) => boolean): string {
  for (const dir of candidates) if (usable(dir)) return dir;
  throw new WarrenError('IO_FAILURE', `no writable state directory among ${candidates.join(', ')}; pass --state-dir`);
}

function writableDir(dir: string): boolean {
  try {
    makeDirectory(dir, 0o700);
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether `writableDir` would succeed, asked without creating: `dir` is a directory this user can
 * write, or does not exist and its nearest existing ancestor is a directory it can create it in.
 */
function couldWrite(dir: string): boolean {
  const target = resolve(dir);
  for (let path = target; ; path = dirname(path)) {
    try {
      if (!statSync(path).isDirectory()) return false;
      accessSync(path, path === target ? constants.W_OK : constants.W_OK | constants.X_OK);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || path === dirname(path)) return false;
    }
  }
}

function safeHomedir(): string | undefined {
  try {
    return homedir();
  } catch {
    return undefined;
  }
}
