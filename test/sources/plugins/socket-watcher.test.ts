/**
 * PluginSocketWatcher against real directories and real unix sockets (node:net servers): sockets
 * at start (top-level and nested) before `listed`, sockets and directories that come later, what
 * is ignored (dot-names, regular files, FIFOs, symlinks), `gone` only for what was reported,
 * sockets replaced in place, directories removed or replaced, the rescan on the injected clock,
 * a plugins directory that is missing at start, and stopping.
 *
 * Events are pulled from the iterator with a deadline, never slept for. To prove that something
 * was NOT reported, a test then makes a sentinel socket and asserts that the very next event is
 * that socket: the watcher handles kernel events in order, so by then the earlier change has been
 * judged.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { type Server, createServer } from 'node:net';
import { join } from 'node:path';
import { ManualClock } from '../../../src/core/clock.ts';
import {
  PluginSocketWatcher,
  type PluginSocketWatcherOptions,
  type SocketEvent,
} from '../../../src/sources/plugins/socket-watcher.ts';
import { HANG_BOUND_MS, removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { Puller } from '../../helpers/puller.ts';

/** Bounds a hang; a loaded machine is slow, not wrong. */
const DEADLINE_MS = HANG_BOUND_MS;

function show(events: readonly SocketEvent[]): string {
  return JSON.stringify(events.map((e) => (e.kind === 'error' ? { kind: 'error', error: e.error.message } : e)));
}

/** The generic puller, with the check every watcher test makes: this event, next. */
class SocketPuller extends Puller<SocketEvent> {
  constructor(source: AsyncIterable<SocketEvent>) {
    super(source, show);
  }

  /** The very next event, which must be the given one. */
  async expect(expected: SocketEvent | { kind: 'socket'; path: string }): Promise<SocketEvent> {
    const what = JSON.stringify(expected);
    const event = await this.next(what);
    assert.ok(event !== undefined, `the iteration ended before ${what}; saw ${show(this.seen)}`);
    if (expected.kind === 'socket') {
      assert.ok(
        event.kind === 'socket' && event.path === expected.path,
        `expected ${what} next; saw ${show(this.seen)}`,
      );
      if ('ino' in expected) assert.equal(event.ino, expected.ino);
    } else {
      assert.deepEqual(event, expected, `expected ${what} next; saw ${show(this.seen)}`);
    }
    return event;
  }

  /** Pulls until the iteration ends. */
  async end(): Promise<void> {
    while (!this.ended) await this.next('the end of the iteration');
  }
}

/** One test's world: a watched directory, its servers and its watcher, all torn down after. */
class Scene {
  readonly parent: string;
  readonly dir: string;
  readonly servers: Server[] = [];
  readonly controller = new AbortController();
  events: SocketPuller | undefined;
  watcher: PluginSocketWatcher | undefined;

  constructor(t: TestContext, options: { create?: boolean } = {}) {
    this.parent = tempDir('warren-sockw-');
    this.dir = join(this.parent, 'plugins');
    if (options.create ?? true) mkdirSync(this.dir);
    t.after(async () => {
      // The watcher first: closing a server unlinks its path, which is not what a test is about.
      this.controller.abort();
      await this.events?.end();
      await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      removeDir(this.parent);
    });
  }

  start(options: Partial<Omit<PluginSocketWatcherOptions, 'signal'>> = {}): SocketPuller {
    this.watcher = new PluginSocketWatcher({ dir: this.dir, rescanMs: 0, ...options, signal: this.controller.signal });
    this.events = new SocketPuller(this.watcher);
    return this.events;
  }

  /** A listening unix socket at `path` (relative to the watched directory unless absolute). */
  async listen(path: string): Promise<string> {
    const full = path.startsWith('/') ? path : join(this.dir, path);
    const server = createServer();
    this.servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(full, () => resolve());
    });
    return full;
  }

  path(relative: string): string {
    return join(this.dir, relative);
  }

  #sentinels = 0;
  /** Makes a new socket and asserts it is the very next event: nothing before it was reported. */
  async sentinel(): Promise<void> {
    const path = await this.listen(`sentinel-${++this.#sentinels}`);
    assert.ok(this.events !== undefined);
    await this.events.expect({ kind: 'socket', path });
  }
}

function inoOf(path: string): number {
  return lstatSync(path).ino;
}

/** Kernel watches this process holds (Linux): every inotify watch of every inotify descriptor. */
function inotifyWatches(): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    if (target !== 'anon_inode:inotify') continue;
    count += readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('inotify wd:')).length;
  }
  return count;
}

/** The protocol's promises over a whole run: socket/gone alternate per path, listed once. */
function assertProtocol(events: readonly SocketEvent[]): void {
  const reported = new Map<string, number>();
  let listed = false;
  for (const [i, e] of events.entries()) {
    const where = `event ${i} in ${show(events)}`;
    switch (e.kind) {
      case 'socket':
        reported.set(e.path, e.ino);
        break;
      case 'gone':
        assert.ok(reported.delete(e.path), `gone for a path not reported as a socket: ${where}`);
        break;
      case 'listed':
        assert.ok(!listed, `listed twice: ${where}`);
        listed = true;
        break;
      case 'error':
        break;
      default: {
        const never: never = e;
        throw new Error(`unknown event ${JSON.stringify(never)}`);
      }
    }
  }
}

describe('PluginSocketWatcher', () => {
  test('sockets present at start, top-level and nested, are reported before listed', async (t) => {
    const scene = new Scene(t);
    mkdirSync(scene.path('vendor/deep'), { recursive: true });
    const top = await scene.listen('top.sock');
    const nested = await scene.listen('vendor/plugin.sock');
    const deep = await scene.listen('vendor/deep/plugin.sock');
    const events = scene.start();
    const { skipped } = await events.until('listed', (e) => e.kind === 'listed');
    assert.deepEqual(skipped.map((e) => (e.kind === 'socket' ? e.path : e.kind)).sort(), [deep, nested, top].sort());
    for (const e of skipped) if (e.kind === 'socket') assert.equal(e.ino, inoOf(e.path));
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('an empty directory gives listed alone', async (t) => {
    const scene = new Scene(t);
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    await scene.sentinel();
  });

  test('a socket added after start is reported with its inode', async (t) => {
    const scene = new Scene(t);
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    const path = await scene.listen('late.sock');
    await events.expect({ kind: 'socket', path, ino: inoOf(path) });
  });

  test('a directory created after start is watched, and a socket in it reported', async (t) => {
    const scene = new Scene(t);
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    mkdirSync(scene.path('later'));
    await scene.sentinel(); // the new directory itself is not reported
    const path = await scene.listen('later/plugin.sock');
    await events.expect({ kind: 'socket', path });
    // And a directory nested in it, later still.
    mkdirSync(scene.path('later/deeper'));
    const deeper = await scene.listen('later/deeper/plugin.sock');
    await events.expect({ kind: 'socket', path: deeper });
    assertProtocol(events.seen);
  });

  test('a directory made together with its socket (mkdir, listen at once) is reported, before its watch existed', async (t) => {
    const scene = new Scene(t);
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    mkdirSync(scene.path('quick/a/b'), { recursive: true });
    const first = await scene.listen('quick/a/b/plugin.sock');
    mkdirSync(scene.path('quick2'));
    const second = await scene.listen('quick2/plugin.sock');
    const { item: event } = await events.until(first, (e) => e.kind === 'socket' && e.path === first);
    const rest = await events.until(second, (e) => e.kind === 'socket' && e.path === second);
    assert.deepEqual(
      [event, rest.item].map((e) => e.kind),
      ['socket', 'socket'],
    );
    assert.deepEqual(
      events.seen.filter((e) => e.kind !== 'listed'),
      [
        { kind: 'socket', path: first, ino: inoOf(first) },
        { kind: 'socket', path: second, ino: inoOf(second) },
      ],
    );
  });

  test('dot-files, dot-directories, regular files, FIFOs and symlinks to sockets are ignored, at start and later', async (t) => {
    const scene = new Scene(t);
    const outside = await scene.listen(join(scene.parent, 'outside.sock'));
    const make = async (suffix: string): Promise<void> => {
      await scene.listen(`.hidden${suffix}.sock`);
      mkdirSync(scene.path(`.dotdir${suffix}`));
      await scene.listen(`.dotdir${suffix}/plugin.sock`);
      writeFileSync(scene.path(`file${suffix}`), 'not a socket');
      execFileSync('mkfifo', [scene.path(`fifo${suffix}`)]);
      symlinkSync(outside, scene.path(`link${suffix}.sock`));
      mkdirSync(scene.path(`sub${suffix}`));
      symlinkSync(outside, scene.path(`sub${suffix}/link.sock`));
      symlinkSync(scene.parent, scene.path(`dirlink${suffix}`)); // a symlink to a directory is not followed
    };
    await make('-start');
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    await make('-later');
    await scene.sentinel();
    assert.deepEqual(
      events.seen.filter((e) => e.kind === 'socket').map((e) => (e.kind === 'socket' ? e.path : '')),
      [scene.path('sentinel-1')],
    );
  });

  test('removing a socket gives gone; removing a regular file, a FIFO, a symlink or a dot-socket gives nothing', async (t) => {
    const scene = new Scene(t);
    const outside = await scene.listen(join(scene.parent, 'outside.sock'));
    const path = await scene.listen('plugin.sock');
    await scene.listen('.hidden.sock');
    writeFileSync(scene.path('file'), 'x');
    execFileSync('mkfifo', [scene.path('fifo')]);
    symlinkSync(outside, scene.path('link.sock'));
    const events = scene.start();
    await events.expect({ kind: 'socket', path });
    await events.expect({ kind: 'listed' });

    unlinkSync(path);
    await events.expect({ kind: 'gone', path });
    for (const name of ['file', 'fifo', 'link.sock', '.hidden.sock']) unlinkSync(scene.path(name));
    // A path that never existed, and one that was never a socket, come and go without a word.
    writeFileSync(scene.path('brief'), 'x');
    unlinkSync(scene.path('brief'));
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('a socket replaced in place (closed, unlinked, bound again) is reported again with its new inode', async (t) => {
    const scene = new Scene(t);
    const path = await scene.listen('plugin.sock');
    const old = inoOf(path);
    // A second name keeps the old inode allocated, so the new socket cannot be given its number.
    linkSync(path, join(scene.parent, 'keep-old-inode'));
    const events = scene.start();
    await events.expect({ kind: 'socket', path, ino: old });
    await events.expect({ kind: 'listed' });

    const server = scene.servers.pop() as Server;
    await new Promise<void>((resolve) => server.close(() => resolve())); // libuv unlinks the path on close
    rmSync(path, { force: true });
    await scene.listen('plugin.sock');
    const { item: event, skipped } = await events.until(
      'the new socket',
      (e) => e.kind === 'socket' && e.path === path,
    );
    // The removal may be seen on its own, or folded into the replacement: either way, in order.
    assert.ok(
      skipped.every((e) => e.kind === 'gone' && e.path === path),
      show(events.seen),
    );
    assert.ok(event.kind === 'socket' && event.ino !== old && event.ino === inoOf(path), show(events.seen));
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('a socket replaced in place whose inode number the filesystem reuses is still reported again', async (t) => {
    // ext4 gives a new file the inode number just freed: identity by number alone would miss this.
    const scene = new Scene(t);
    const path = await scene.listen('plugin.sock');
    const events = scene.start();
    await events.expect({ kind: 'socket', path });
    await events.expect({ kind: 'listed' });
    for (let round = 0; round < 3; round++) {
      const server = scene.servers.pop() as Server;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await scene.listen('plugin.sock');
      const { skipped } = await events.until(`replacement ${round}`, (e) => e.kind === 'socket' && e.path === path);
      assert.ok(
        skipped.every((e) => e.kind === 'gone' && e.path === path),
        show(events.seen),
      );
    }
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('a new socket renamed over a reported one is reported with its new inode, and nothing is gone', async (t) => {
    const scene = new Scene(t);
    const path = await scene.listen('plugin.sock');
    const old = inoOf(path);
    const events = scene.start();
    await events.expect({ kind: 'socket', path, ino: old });
    await events.expect({ kind: 'listed' });

    const temp = await scene.listen('.plugin.sock.tmp'); // a dot-name: ignored until renamed
    const fresh = inoOf(temp);
    renameSync(temp, path);
    await events.expect({ kind: 'socket', path, ino: fresh });
    assert.notEqual(fresh, old);
    // Renamed over by something that is not a socket: gone.
    writeFileSync(scene.path('.plain.tmp'), 'x');
    renameSync(scene.path('.plain.tmp'), path);
    await events.expect({ kind: 'gone', path });
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('removing a subdirectory gives gone for every socket reported under it, and nothing else', async (t) => {
    const scene = new Scene(t);
    mkdirSync(scene.path('vendor/inner'), { recursive: true });
    const a = await scene.listen('vendor/a.sock');
    const b = await scene.listen('vendor/b.sock');
    const c = await scene.listen('vendor/inner/c.sock');
    writeFileSync(scene.path('vendor/file'), 'x');
    const keep = await scene.listen('keep.sock');
    const events = scene.start();
    await events.until('listed', (e) => e.kind === 'listed');

    rmSync(scene.path('vendor'), { recursive: true });
    const goneSeen = new Set<string>();
    while (goneSeen.size < 3) {
      const event = await events.next('gone for a, b and c');
      assert.ok(event?.kind === 'gone' && [a, b, c].includes(event.path), show(events.seen));
      goneSeen.add(event.path);
    }
    await scene.sentinel();
    assert.ok(existsSync(keep));
    assertProtocol(events.seen);
  });

  test('a subdirectory renamed away gives gone for its sockets, and they are reported at their new paths', async (t) => {
    const scene = new Scene(t);
    mkdirSync(scene.path('vendor'));
    const a = await scene.listen('vendor/a.sock');
    const events = scene.start();
    await events.expect({ kind: 'socket', path: a });
    await events.expect({ kind: 'listed' });
    renameSync(scene.path('vendor'), scene.path('moved'));
    const moved = scene.path('moved/a.sock');
    const { skipped } = await events.until('the moved socket', (e) => e.kind === 'socket' && e.path === moved);
    // The two names are judged as their events come: the old path may be gone before or after.
    if (!skipped.some((e) => e.kind === 'gone' && e.path === a)) await events.expect({ kind: 'gone', path: a });
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('a subdirectory removed and made again at the same path is watched again', async (t) => {
    const scene = new Scene(t);
    mkdirSync(scene.path('vendor'));
    const a = await scene.listen('vendor/a.sock');
    const events = scene.start();
    await events.expect({ kind: 'socket', path: a });
    await events.expect({ kind: 'listed' });
    rmSync(scene.path('vendor'), { recursive: true });
    mkdirSync(scene.path('vendor'));
    const b = await scene.listen('vendor/b.sock');
    const { skipped } = await events.until('b', (e) => e.kind === 'socket' && e.path === b);
    if (!skipped.some((e) => e.kind === 'gone' && e.path === a)) await events.expect({ kind: 'gone', path: a });
    // The new directory's watch is live: a later socket in it is seen without a rescan.
    const c = await scene.listen('vendor/c.sock');
    await events.expect({ kind: 'socket', path: c });
    assertProtocol(events.seen);
  });

  test('a rescan on the injected clock finds what no kernel watch could report (the plugins directory swapped)', async (t) => {
    // The kernel watch follows the directory's inode. Moving the directory away and making a new
    // one at its path puts sockets where no watch is: only the rescan, which looks by path, sees them.
    const scene = new Scene(t);
    const a = await scene.listen('a.sock');
    const clock = new ManualClock();
    const events = scene.start({ clock, rescanMs: 1_000 });
    await events.expect({ kind: 'socket', path: a });
    await events.expect({ kind: 'listed' });
    await waitFor('the rescan timer to be armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    renameSync(scene.dir, join(scene.parent, 'previous'));
    mkdirSync(scene.path('sub'), { recursive: true });
    const nested = await scene.listen('sub/plugin.sock');
    clock.advance(999);
    assert.equal(clock.pendingTimers, 1, 'not due yet');
    clock.advance(1);
    const { skipped } = await events.until(
      'the socket in the new directory',
      (e) => e.kind === 'socket' && e.path === nested,
    );
    assert.deepEqual(skipped, [{ kind: 'gone', path: a }]);
    await waitFor('the rescan timer to be re-armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);
    // The rescan opened watches on the new directory and its subdirectory: live again.
    const later = await scene.listen('sub/later.sock');
    await events.expect({ kind: 'socket', path: later });
    await scene.sentinel();
    assertProtocol(events.seen);
  });

  test('a plugins directory missing at start is created 0700, with its parents', async (t) => {
    const scene = new Scene(t, { create: false });
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    const st = statSync(scene.dir);
    assert.ok(st.isDirectory());
    assert.equal(st.mode & 0o777, 0o700);
    await scene.sentinel();
  });

  test('a plugins directory that cannot be created gives an error, and is created by a later rescan', async (t) => {
    const scene = new Scene(t, { create: false });
    writeFileSync(join(scene.parent, 'blocker'), 'a file where a directory should be');
    const dir = join(scene.parent, 'blocker', 'plugins');
    const clock = new ManualClock();
    const watcher = new PluginSocketWatcher({ dir, clock, rescanMs: 1_000, signal: scene.controller.signal });
    const events = new SocketPuller(watcher);
    scene.events = events;
    const { skipped } = await events.until('listed', (e) => e.kind === 'listed');
    assert.ok(skipped.length >= 1 && skipped.every((e) => e.kind === 'error'), show(events.seen));
    assert.match(skipped[0]?.kind === 'error' ? skipped[0].error.message : '', /cannot create the plugins directory/);
    await waitFor('the rescan timer to be armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    // Still impossible: another error on the rescan.
    clock.advance(1_000);
    const again = await events.next('an error on the rescan');
    assert.equal(again?.kind, 'error');
    await waitFor('the rescan timer to be re-armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    unlinkSync(join(scene.parent, 'blocker'));
    clock.advance(1_000);
    events.prefetch();
    await waitFor('the directory to be created', () => (existsSync(dir) ? true : undefined), DEADLINE_MS);
    const path = await scene.listen(join(dir, 'plugin.sock'));
    const { item: event, skipped: before } = await events.until('the socket', (e) => e.kind === 'socket');
    assert.deepEqual(event, { kind: 'socket', path, ino: inoOf(path) });
    assert.ok(
      before.every((e) => e.kind === 'error'),
      show(events.seen),
    ); // errors of the old watch, if any
    assertProtocol(events.seen);
  });

  test('aborting the signal ends the iteration, cancels the rescan timer and closes every kernel watch', async (t) => {
    const baseline = inotifyWatches();
    const scene = new Scene(t);
    mkdirSync(scene.path('a/b'), { recursive: true });
    const clock = new ManualClock();
    const events = scene.start({ clock, rescanMs: 1_000 });
    await events.expect({ kind: 'listed' });
    assert.equal(inotifyWatches(), baseline + 3, 'the directory and its two subdirectories');
    assert.equal(clock.pendingTimers, 1);
    scene.controller.abort();
    assert.equal(clock.pendingTimers, 0);
    assert.equal(await events.next('the end'), undefined);
    assert.equal(inotifyWatches(), baseline);
    await scene.listen('after-abort.sock');
    assert.equal(await events.next('nothing more'), undefined);
  });

  test('leaving the loop closes every kernel watch', async (t) => {
    const baseline = inotifyWatches();
    const scene = new Scene(t);
    mkdirSync(scene.path('a'));
    const controller = new AbortController();
    const kinds: string[] = [];
    for await (const event of new PluginSocketWatcher({ dir: scene.dir, rescanMs: 0, signal: controller.signal })) {
      kinds.push(event.kind);
      if (event.kind === 'listed') break;
    }
    assert.deepEqual(kinds, ['listed']);
    assert.equal(inotifyWatches(), baseline);
    controller.abort();
  });

  test('a watcher is iterated once, and one whose signal is already aborted yields nothing', async (t) => {
    const scene = new Scene(t);
    const events = scene.start();
    await events.expect({ kind: 'listed' });
    await assert.rejects(async () => {
      for await (const _ of scene.watcher as PluginSocketWatcher) break;
    }, /iterated once/);
    const aborted = new PluginSocketWatcher({ dir: scene.dir, signal: AbortSignal.abort() });
    for await (const event of aborted) assert.fail(`unexpected ${JSON.stringify(event)}`);
  });
});
