/**
 * One agent per state directory: the single writer of the node's allocations. The lock is a file
 * holding the owner's PID, created exclusively; a lock left by a process that is gone (kill -9)
 * is taken over, a live owner is refused.
 */
import { openSync, readFileSync, unlinkSync, writeSync, closeSync, fsyncSync } from 'node:fs';
import { join } from 'node:path';
import { WarrenError } from '../core/errors.ts';

/** True when `pid` is a running (not zombie) process. */
export function isProcessAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export class InstanceLock {
  readonly path: string;

  private constructor(path: string) {
    this.path = path;
  }

  static acquire(stateDir: string): InstanceLock {
    const path = join(stateDir, 'agent.lock');
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const fd = openSync(path, 'wx', 0o600);
        writeSync(fd, `${process.pid}\n`);
        fsyncSync(fd);
        closeSync(fd);
        return new InstanceLock(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      let owner = NaN;
      try {
        owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
      } catch {
        continue; // removed between open and read: try again
      }
      if (Number.isInteger(owner) && owner !== process.pid && isProcessAlive(owner)) {
        throw new WarrenError('ALREADY_RUNNING', `another Warren agent (pid ${owner}) holds ${path}; one agent per state directory`);
      }
      try {
        unlinkSync(path);
      } catch {
        // another starter removed it first
      }
    }
    throw new WarrenError('ALREADY_RUNNING', `could not take ${path}: another agent is starting at the same time`);
  }

  release(): void {
    try {
      if (Number.parseInt(readFileSync(this.path, 'utf8'), 10) === process.pid) unlinkSync(this.path);
    } catch {
      // already gone
    }
  }
}
