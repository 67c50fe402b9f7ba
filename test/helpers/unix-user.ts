/**
 * A real second Unix user for tests of what other local users can reach: made with useradd (no
 * home, no login shell), removed with userdel by `remove()`, and at the latest when the test
 * process exits, even after a failure. Needs root.
 */
import { execFileSync } from 'node:child_process';

export interface UnixUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  remove(): void;
}

const made = new Set<string>();

process.on('exit', () => {
  for (const name of made) removeUser(name);
});

function removeUser(name: string): void {
  try {
    execFileSync('userdel', [name], { stdio: 'ignore' });
  } catch {
    // gone already
  }
  made.delete(name);
}

/** A fresh user named `<prefix><pid>` (prefix: a few letters naming the test file, ≤ 20 chars). */
export function createUnixUser(prefix: string): UnixUser {
  const name = `${prefix}${process.pid}`.slice(0, 32);
  removeUser(name); // a leftover of a crashed run of this same test process id
  execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', '--user-group', name], { stdio: ['ignore', 'ignore', 'pipe'] });
  made.add(name);
  const id = (flag: string): number => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim());
  return { name, uid: id('-u'), gid: id('-g'), remove: () => removeUser(name) };
}
