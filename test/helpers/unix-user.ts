/**
 * A real second Unix user for tests of what another local user can and cannot do: made with
 * useradd (no home, no login shell), removed with userdel by `remove()` and, should a test file
 * end without calling it, at exit. Names are private to the test file and process.
 */
import { execFileSync } from 'node:child_process';
import { sh } from './processes.ts';

export interface UnixUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  remove(): Promise<void>;
}

const made = new Set<string>();
process.on('exit', () => {
  for (const name of made) {
    try {
      execFileSync('userdel', [name], { stdio: 'ignore' });
    } catch {
      // gone already
    }
  }
});

/** Creates a user named `<prefix><pid>` (prefix: a few letters naming the test file). */
export async function createUnixUser(prefix: string): Promise<UnixUser> {
  const name = `${prefix}${process.pid}`.slice(0, 31);
  await sh('useradd', ['--system', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', name]);
  made.add(name);
  const uid = Number((await sh('id', ['-u', name])).trim());
  const gid = Number((await sh('id', ['-g', name])).trim());
  return {
    name,
    uid,
    gid,
    async remove() {
      if (!made.delete(name)) return;
      await sh('userdel', [name]);
    },
  };
}
