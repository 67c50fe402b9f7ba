/**
 * One agent per node, and no one else's say over it: another local user cannot take or hold the
 * agent's locks (a real second Unix user, made and removed here), a lock file's place that others
 * can write is refused, kill -9 of a holder frees its locks, and two agents exclude each other in
 * separate processes and in one process alike, the refused one told who holds what.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { WarrenError } from '../../../src/core/errors.ts';
import { InstanceLock, type LockedResource, lockFileOf } from '../../../src/agent/settings/instance-lock.ts';
import { startAgent } from '../../helpers/agent.ts';
import { CHILD_PATH, REPO, WARREN_BIN, isRoot, run, tempDir, track, waitFor } from '../../helpers/processes.ts';
import { createUnixUser } from '../../helpers/unix-user.ts';

const LOCK_MODULE = join(REPO, 'src', 'agent', 'settings', 'instance-lock.ts');

/** A child process that runs `script` and says "ready" on stdout once it has done what it does. */
async function readyChild(
  args: readonly string[],
  options: { uid?: number; gid?: number } = {},
): Promise<{ child: ChildProcess; said: string }> {
  const child = track(
    spawn(process.execPath, args, {
      cwd: '/',
      env: { PATH: CHILD_PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...options,
    }),
  );
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const said = await waitFor(
    `a child to be ready (said: ${out})`,
    () => {
      // What it said first: a child that says ready and exits (a starter refused) is ready, whichever
      // of its exit and its output this look sees first (CI: refused as its exit came first).
      if (out.includes('ready')) return out;
      if (child.exitCode !== null) throw new Error(`child exited ${child.exitCode}: ${out}`);
      return undefined;
    },
    30_000,
  );
  return { child, said };
}

/**
 * SIGKILL, then wait until the process is reaped: only then are all its threads gone, and with
 * them its descriptors and locks (its main thread shows as a zombie earlier).
 */
async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

describe('the instance lock', () => {
  const children: ChildProcess[] = [];
  after(async () => {
    for (const c of children) await killHard(c);
  });

  it('another local user who binds and creates whatever it can beforehand cannot keep the agent from starting', {
    skip: isRoot() ? false : 'needs root to create a second user',
  }, async () => {
    const user = await createUnixUser('wlock');
    try {
      const dir = tempDir('warren-lock-other-');
      // What an unprivileged user could predict of the agent's locks: the abstract socket names
      // Warren used (a digest of what and where), and the lock files (which it tries to create).
      const resources: LockedResource[] = [
        { what: 'state directory', path: realpathSync(dir) },
        { what: 'database', path: join(realpathSync(dir), 'warren.db') },
        { what: 'socket', path: join(realpathSync(dir), 'warren.sock') },
        { what: 'journal', path: join(realpathSync(dir), 'journal') },
      ];
      const abstractNames = resources.map(
        (r) => `\0warren-agent-lock-${createHash('sha256').update(`${r.what}\0${r.path}`).digest('hex').slice(0, 40)}`,
      );
      const script = `
        const net = require('node:net'), fs = require('node:fs');
        const [names, files] = JSON.parse(process.argv[1]);
        let bound = 0, made = 0;
        Promise.all(names.map((n) => new Promise((ok) => { const s = net.createServer(); s.once('error', ok); s.listen({ path: n }, () => { bound++; ok(); }); })))
          .then(() => { for (const f of files) { try { fs.writeFileSync(f, ''); made++; } catch {} } console.log('ready ' + bound + ' bound ' + made + ' made'); });
        setInterval(() => {}, 1 << 30);`;
      const hostile = await readyChild(['-e', script, JSON.stringify([abstractNames, resources.map(lockFileOf)])], {
        uid: user.uid,
        gid: user.gid,
      });
      children.push(hostile.child);
      assert.match(
        hostile.said,
        /ready 4 bound 0 made/,
        'the other user bound every name it could predict and could create no lock file',
      );

      const agent = await startAgent({ dir });
      try {
        assert.equal(
          (await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket])).code,
          0,
          'the agent serves',
        );
      } finally {
        await agent.stop();
      }
    } finally {
      for (const c of children.splice(0)) await killHard(c);
      await user.remove();
    }
  });

  it('refuses a lock file in a directory others can write, naming the directory, instead of letting anyone hold it', async () => {
    const dir = tempDir('warren-lock-open-');
    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const second = await run(process.execPath, [
      WARREN_BIN,
      'agent',
      '--state-dir',
      join(dir, 'state'),
      '--journal-dir',
      join(dir, 'journal'),
      '--socket',
      join(shared, 'w.sock'),
      '--containerd',
      'off',
      '--netns-dirs',
      '',
      '--metrics-address',
      '',
    ]);
    assert.equal(second.code, 1, second.stderr);
    assert.match(
      second.stderr,
      new RegExp(`cannot lock the socket .*${shared}.* is writable by its group or others \\(mode 777\\)`),
    );
  });

  it('refuses a lock file others could open and hold a shared lock on, and creates its own owner-only', () => {
    const dir = tempDir('warren-lock-mode-');
    const resource: LockedResource = { what: 'state directory', path: dir };
    InstanceLock.acquire([resource]).release();
    assert.equal(statSync(lockFileOf(resource)).mode & 0o777, 0o600);
    chmodSync(lockFileOf(resource), 0o644);
    assert.throws(
      () => InstanceLock.acquire([resource]),
      /state\.lock can be opened by its group or others \(mode 644\)/,
    );
  });

  it('kill -9 of the holder frees its locks at once for the next agent', async () => {
    const dir = tempDir('warren-lock-kill-');
    const resources: LockedResource[] = [
      { what: 'state directory', path: dir },
      { what: 'journal', path: join(dir, 'journal') },
    ];
    const holder = await readyChild([
      '--input-type=module',
      '-e',
      `const { InstanceLock } = await import(${JSON.stringify(LOCK_MODULE)}); globalThis.held = InstanceLock.acquire(${JSON.stringify(resources)}); console.log('ready'); setInterval(() => {}, 1 << 30);`,
    ]);
    children.push(holder.child);
    assert.throws(
      () => InstanceLock.acquire(resources),
      (error: unknown) => {
        assert.ok(error instanceof WarrenError);
        assert.equal(error.code, 'ALREADY_RUNNING');
        assert.match(
          error.message,
          new RegExp(`another Warren agent \\(pid ${holder.child.pid}\\) already uses the state directory ${dir}`),
        );
        return true;
      },
    );
    await killHard(holder.child);
    const lock = InstanceLock.acquire(resources);
    lock.release();
  });

  it('takes a lock another starter held only half-taken for a while (a shared lock, its process stalled), and a holder still refuses at once', async () => {
    // CI: two agents started at once on one state directory; under load each was refused on the
    // other's passing shared lock, and neither served.
    const dir = tempDir('warren-lock-stalled-');
    const resources: LockedResource[] = [{ what: 'state directory', path: dir }];
    InstanceLock.acquire(resources).release(); // the lock file made owner-only, as an agent makes it
    const file = lockFileOf({ what: 'state directory', path: dir });
    const stalled = await readyChild([
      '--input-type=module',
      '-e',
      `import { DatabaseSync } from 'node:sqlite'; const db = new DatabaseSync(${JSON.stringify(file)}); ` +
        `db.exec('BEGIN'); db.prepare('SELECT count(*) FROM sqlite_master').get(); console.log('ready'); ` +
        // Longer than one attempt's wait (2 s), then the shared lock goes, as the stalled starter goes on.
        `Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500); db.exec('COMMIT'); db.close(); ` +
        `setInterval(() => {}, 1 << 30);`,
    ]);
    children.push(stalled.child);
    const lock = InstanceLock.acquire(resources);
    try {
      // Held now: another starter is refused, and at once (no attempt waits out an exclusive holder).
      const holder = await readyChild([
        '--input-type=module',
        '-e',
        `const { InstanceLock } = await import(${JSON.stringify(LOCK_MODULE)}); ` +
          `try { InstanceLock.acquire(${JSON.stringify(resources)}); console.log('ready: taken'); } ` +
          `catch (e) { console.log('ready: ' + e.message); }`,
      ]);
      assert.match(holder.said, new RegExp(`\\(pid ${process.pid}\\) already uses the state directory`));
    } finally {
      lock.release();
    }
  });

  it('two agents in one process exclude each other, and a released lock can be taken again', () => {
    const dir = tempDir('warren-lock-one-');
    const resources: LockedResource[] = [
      { what: 'state directory', path: dir },
      { what: 'socket', path: join(dir, 'w.sock') },
    ];
    const first = InstanceLock.acquire(resources);
    // The same socket from another state directory: refused on the socket, the state directory left alone.
    const other = tempDir('warren-lock-two-');
    assert.throws(
      () =>
        InstanceLock.acquire([
          { what: 'state directory', path: other },
          { what: 'socket', path: join(dir, 'w.sock') },
        ]),
      new RegExp(`\\(pid ${process.pid}\\) already uses the socket`),
    );
    InstanceLock.acquire([{ what: 'state directory', path: other }]).release();
    // The refused attempts opened and closed the lock files: the first agent's locks survive that.
    assert.throws(
      () => InstanceLock.acquire(resources),
      new RegExp(`\\(pid ${process.pid}\\) already uses the state directory`),
    );
    first.release();
    InstanceLock.acquire(resources).release();
  });
});
