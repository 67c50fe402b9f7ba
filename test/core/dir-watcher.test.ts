/**
 * DirectoryWatcher against a real directory: the list-then-watch protocol (`present`… `listed`,
 * then `added` / `changed` / `removed`), the default dot-file filter and a custom one, rescans
 * (asked for, and periodic on an injected clock) that catch what the kernel watch did not report,
 * a directory that cannot be listed (an error, never a removal), and ending on abort.
 *
 * Live kernel events are awaited with a deadline, never slept for. To prove that something did
 * NOT happen, a test writes a "fence" file and waits for its `added`: kernel events are handled
 * in order, so by then every earlier change has been reported.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, renameSync, rmSync, unlinkSync, appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManualClock } from '../../src/core/clock.ts';
import { type DirectoryEvent, DirectoryWatcher, type DirectoryWatcherOptions } from '../../src/core/dir-watcher.ts';
import { HANG_BOUND_MS, tempDir, waitFor } from '../helpers/processes.ts';

/** Bounds a hang; a loaded machine is slow, not wrong. */
const DEADLINE_MS = HANG_BOUND_MS;

/** Collects a watcher's events as they come and lets a test await the next one matching X. */
class EventLog {
  readonly events: DirectoryEvent[] = [];
  /** Settles when the iteration ends; rejects if the iterator threw. */
  readonly done: Promise<void>;
  #ended = false;
  #failure: unknown;
  #cursor = 0;
  readonly #waiters = new Set<() => void>();

  constructor(source: AsyncIterable<DirectoryEvent>) {
    this.done = (async () => {
      try {
        for await (const event of source) {
          this.events.push(event);
          this.#notify();
        }
      } catch (error) {
        this.#failure = error;
        throw error;
      } finally {
        this.#ended = true;
        this.#notify();
      }
    })();
    this.done.catch(() => undefined); // surfaced through next() and stop()
  }

  #notify(): void {
    for (const wake of this.#waiters) wake();
  }

  /**
   * The next event after the last one matched, of which `match` approves; skips the others.
   * With `anyOrder`, searches the whole log and leaves the cursor alone.
   */
  async next(
    what: string,
    match: (e: DirectoryEvent) => boolean,
    deadlineMs = DEADLINE_MS,
    anyOrder = false,
  ): Promise<DirectoryEvent> {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      for (let i = anyOrder ? 0 : this.#cursor; i < this.events.length; i++) {
        const event = this.events[i];
        if (event !== undefined && match(event)) {
          if (!anyOrder) this.#cursor = i + 1;
          return event;
        }
      }
      if (this.#failure !== undefined) throw new Error(`the watcher threw before ${what}: ${String(this.#failure)}`);
      if (this.#ended) throw new Error(`the iteration ended before ${what}; saw ${show(this.events)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}; saw ${show(this.events)}`);
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.#waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.#waiters.add(wake);
      });
    }
  }

  event(kind: DirectoryEvent['kind'], name?: string): Promise<DirectoryEvent> {
    return this.next(
      name === undefined ? kind : `${kind} ${name}`,
      (e) => e.kind === kind && (name === undefined || ('name' in e && e.name === name)),
    );
  }

  /** Waits until the log holds this event, wherever it is. */
  has(kind: DirectoryEvent['kind'], name: string): Promise<DirectoryEvent> {
    return this.next(`${kind} ${name}`, (e) => e.kind === kind && 'name' in e && e.name === name, DEADLINE_MS, true);
  }

  /** Every event that names a file, as "kind name". */
  named(): string[] {
    return this.events.flatMap((e) => ('name' in e ? [`${e.kind} ${e.name}`] : []));
  }

  kinds(): string[] {
    return this.events.map((e) => e.kind);
  }
}

function show(events: readonly DirectoryEvent[]): string {
  return JSON.stringify(events.map((e) => (e.kind === 'error' ? { kind: 'error', error: e.error.message } : e)));
}

/** Starts iterating a watcher; the test's end aborts it and waits for the iteration to finish. */
function start(
  t: TestContext,
  options: Omit<DirectoryWatcherOptions, 'signal'>,
): { watcher: DirectoryWatcher; log: EventLog; controller: AbortController } {
  const controller = new AbortController();
  const watcher = new DirectoryWatcher({ ...options, signal: controller.signal });
  const log = new EventLog(watcher);
  t.after(async () => {
    controller.abort();
    await log.done;
  });
  return { watcher, log, controller };
}

/** Creates or replaces a file with a single rename, the way an atomic writer does. */
function put(dir: string, name: string, content = name): void {
  const temp = join(dir, `.${name}.tmp`);
  writeFileSync(temp, content);
  renameSync(temp, join(dir, name));
}

let fences = 0;
/** Writes a new file and waits for its `added`: every kernel event before it has been handled. */
async function fence(log: EventLog, dir: string, suffix = ''): Promise<void> {
  const name = `fence-${++fences}${suffix}`;
  put(dir, name);
  await log.event('added', name);
}

/** The protocol's promises, checked over a whole log. */
function assertProtocol(events: readonly DirectoryEvent[]): void {
  const known = new Set<string>();
  let listed = false;
  for (const [i, e] of events.entries()) {
    const where = `event ${i} ${JSON.stringify(e)} in ${show(events)}`;
    switch (e.kind) {
      case 'present':
        assert.ok(!listed, `present after listed: ${where}`);
        assert.ok(!known.has(e.name), `present twice: ${where}`);
        known.add(e.name);
        break;
      case 'listed':
        assert.ok(!listed, `listed twice: ${where}`);
        listed = true;
        break;
      case 'added':
        assert.ok(listed, `added before listed: ${where}`);
        assert.ok(!known.has(e.name), `added while already known: ${where}`);
        known.add(e.name);
        break;
      case 'changed':
        assert.ok(known.has(e.name), `changed before present/added: ${where}`);
        break;
      case 'removed':
        assert.ok(known.has(e.name), `removed before present/added: ${where}`);
        known.delete(e.name);
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

function scratch(files: readonly string[] = []): string {
  const dir = join(tempDir('warren-watch-'), 'watched');
  mkdirSync(dir);
  for (const name of files) writeFileSync(join(dir, name), name);
  return dir;
}

describe('DirectoryWatcher', () => {
  test('files present at start come as present events, sorted, then exactly one listed', async (t) => {
    const dir = scratch(['c.release', 'a.release', 'b.release']);
    const { log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    assert.deepEqual(log.events, [
      { kind: 'present', name: 'a.release' },
      { kind: 'present', name: 'b.release' },
      { kind: 'present', name: 'c.release' },
      { kind: 'listed' },
    ]);
    await fence(log, dir);
    assert.equal(log.kinds().filter((k) => k === 'listed').length, 1);
    assert.equal(log.kinds().filter((k) => k === 'present').length, 3);
    assertProtocol(log.events);
  });

  test('an empty directory gives listed alone', async (t) => {
    const dir = scratch();
    const { log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    assert.deepEqual(log.events, [{ kind: 'listed' }]);
  });

  test('a file created after listed comes as added, a rewrite as changed, a deletion as removed', async (t) => {
    const dir = scratch(['old']);
    const { log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');

    put(dir, 'new');
    await log.event('added', 'new');

    appendFileSync(join(dir, 'new'), ' more');
    await log.event('changed', 'new');

    unlinkSync(join(dir, 'new'));
    await log.event('removed', 'new');

    appendFileSync(join(dir, 'old'), ' more');
    await log.event('changed', 'old');
    unlinkSync(join(dir, 'old'));
    await log.event('removed', 'old');

    await fence(log, dir);
    assertProtocol(log.events);
  });

  test('a name deleted and created again is removed, then added again', async (t) => {
    const dir = scratch(['x']);
    const { log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    unlinkSync(join(dir, 'x'));
    await log.event('removed', 'x');
    put(dir, 'x', 'again');
    await log.event('added', 'x');
    assertProtocol(log.events);
  });

  test('dot-files are ignored by default, at start and live', async (t) => {
    const dir = scratch(['.hidden', 'shown']);
    const { log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    writeFileSync(join(dir, '.temp'), 'x');
    appendFileSync(join(dir, '.hidden'), 'x');
    unlinkSync(join(dir, '.hidden'));
    await fence(log, dir);
    assert.deepEqual(
      log.named().filter((n) => !n.includes('fence')),
      ['present shown'],
    );
  });

  test('the include predicate decides which names are reported, at start, live and on rescan', async (t) => {
    const dir = scratch(['a.release', 'b.txt', '.c.release']);
    const seen: string[] = [];
    const include = (name: string): boolean => {
      seen.push(name);
      return name.endsWith('.release');
    };
    const { watcher, log } = start(t, { dir, rescanMs: 0, include });
    await log.event('listed');
    writeFileSync(join(dir, 'd.txt'), 'x');
    put(dir, 'e.release');
    await log.event('added', 'e.release');
    writeFileSync(join(dir, 'f.txt'), 'x');
    watcher.rescan();
    await fence(log, dir, '.release');
    assert.deepEqual(
      log.named().filter((n) => !n.includes('fence')),
      ['present .c.release', 'present a.release', 'added e.release'],
    );
    assert.ok(seen.includes('b.txt') && seen.includes('d.txt'), 'the predicate is asked about every name');
    assertProtocol(log.events);
  });

  test('after rescan() every file in the directory has been reported exactly once', async (t) => {
    const dir = scratch(['a', 'b']);
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    for (let i = 0; i < 20; i++) writeFileSync(join(dir, `f${i}`), `${i}`);
    watcher.rescan();
    const files = readdirSync(dir).sort();
    await waitFor(
      'every file reported',
      () => {
        const reported = new Set(
          log.events.flatMap((e) => (e.kind === 'present' || e.kind === 'added' ? [e.name] : [])),
        );
        return files.every((f) => reported.has(f)) ? true : undefined;
      },
      DEADLINE_MS,
    );
    await fence(log, dir);
    const arrivals = log.events
      .flatMap((e) => (e.kind === 'present' || e.kind === 'added' ? [e.name] : []))
      .filter((n) => !n.startsWith('fence'));
    assert.deepEqual(arrivals.sort(), files);
    assert.ok(!log.kinds().includes('removed'));
    assertProtocol(log.events);
  });

  test('a name the consumer forgets is reported added again by the next rescan, so a failed read is retried (issue 10)', async (t) => {
    const dir = scratch(['a', 'b']);
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    watcher.forget('a');
    watcher.forget('b');
    rmSync(join(dir, 'b'));
    watcher.rescan();
    await log.event('added', 'a');
    // A second rescan is the fence: a name reported again is known again, and a forgotten name
    // that is gone is neither added nor removed.
    watcher.rescan();
    await fence(log, dir);
    watcher.rescan();
    await fence(log, dir, '-2');
    assert.deepEqual(
      log.named().filter((n) => !n.includes('fence')),
      ['present a', 'present b', 'added a'],
    );
  });

  test('rescan() reports changes the kernel watch never saw', async (t) => {
    // The kernel watch follows the directory's inode. Moving the directory away and putting a new
    // one at its path changes what the path holds without any event from the watched inode about
    // those files: only a rescan, which lists by path, can notice.
    const parent = tempDir('warren-watch-');
    const dir = join(parent, 'watched');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'a');
    writeFileSync(join(dir, 'b'), 'b');
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');

    // All synchronous, so the watcher cannot run between the swap and the rescan request.
    renameSync(dir, join(parent, 'previous'));
    mkdirSync(dir);
    writeFileSync(join(dir, 'b'), 'b');
    writeFileSync(join(dir, 'c'), 'c');
    watcher.rescan();

    await log.event('added', 'c');
    await log.event('removed', 'a');
    // A second rescan is the fence: the first one has finished, and it has nothing more to say.
    const before = log.events.length;
    watcher.rescan();
    put(dir, 'd');
    watcher.rescan();
    await log.event('added', 'd');
    assert.deepEqual(log.named(), ['present a', 'present b', 'added c', 'removed a', 'added d']);
    assert.equal(log.events.length, before + 1);
    assertProtocol(log.events);
  });

  test('the periodic rescan runs on the injected clock and re-arms itself', async (t) => {
    const parent = tempDir('warren-watch-');
    const dir = join(parent, 'watched');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'a');
    const clock = new ManualClock();
    const { log } = start(t, { dir, clock, rescanMs: 1_000 });
    await log.event('listed');
    await waitFor('the rescan timer to be armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    renameSync(dir, join(parent, 'previous'));
    mkdirSync(dir);
    writeFileSync(join(dir, 'b'), 'b');
    clock.advance(999);
    assert.equal(clock.pendingTimers, 1, 'not due yet');
    clock.advance(1);
    assert.equal(clock.pendingTimers, 0, 'the rescan timer fired');
    await log.event('added', 'b');
    await log.event('removed', 'a');
    await waitFor('the rescan timer to be re-armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    // The swapped-in directory is not under the kernel watch; the next period still finds changes.
    writeFileSync(join(dir, 'c'), 'c');
    clock.advance(1_000);
    await log.event('added', 'c');
    assert.deepEqual(log.named(), ['present a', 'added b', 'removed a', 'added c']);
    assertProtocol(log.events);
  });

  test('rescanMs 0 arms no timer', async (t) => {
    const dir = scratch(['a']);
    const clock = new ManualClock();
    const { log } = start(t, { dir, clock, rescanMs: 0 });
    await log.event('listed');
    await fence(log, dir);
    assert.equal(clock.pendingTimers, 0);
  });

  test('a directory that can no longer be listed gives an error and never a removal', async (t) => {
    const parent = tempDir('warren-watch-');
    const dir = join(parent, 'watched');
    mkdirSync(dir);
    for (const name of ['a', 'b', 'c']) writeFileSync(join(dir, name), name);
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');

    renameSync(dir, join(parent, 'gone'));
    watcher.rescan();
    const first = await log.event('error');
    assert.ok(first.kind === 'error' && /ENOENT/.test(first.error.message), show([first]));
    // Another rescan (and its error) fences the first: it removed nothing.
    watcher.rescan();
    await log.event('error');
    assert.ok(!log.kinds().includes('removed'), show(log.events));

    // When the directory comes back, the watcher carries on from what it knew.
    renameSync(join(parent, 'gone'), dir);
    unlinkSync(join(dir, 'c'));
    writeFileSync(join(dir, 'd'), 'd');
    watcher.rescan();
    // The kernel watch (still on the same inode) and the rescan race to report these: any order.
    await log.has('removed', 'c');
    await log.has('added', 'd');
    assert.ok(!log.named().includes('removed a') && !log.named().includes('removed b'));
    assertProtocol(log.events);
  });

  test('a file changed after its directory moved away is not reported removed (the kernel watch follows the old directory)', async (t) => {
    const parent = tempDir('warren-watch-');
    const dir = join(parent, 'watched');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'a');
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    renameSync(dir, join(parent, 'moved'));
    appendFileSync(join(parent, 'moved', 'a'), 'more');
    // A new directory at the old path, and a file in it only a rescan (with a new watch) can see.
    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'a');
    writeFileSync(join(dir, 'b'), 'b');
    watcher.rescan();
    await log.has('added', 'b');
    assert.ok(!log.named().includes('removed a'), show(log.events));
    // The watch was reopened on the new directory: a live change there is seen without a rescan.
    put(dir, 'c');
    await log.has('added', 'c');
    assertProtocol(log.events);
  });

  test('a directory missing at start gives errors, then listed, and is picked up once it appears', async (t) => {
    const dir = join(tempDir('warren-watch-'), 'later');
    const clock = new ManualClock();
    const { log } = start(t, { dir, clock, rescanMs: 1_000 });
    await log.event('listed');
    assert.ok(
      log.events.slice(0, -1).every((e) => e.kind === 'error'),
      show(log.events),
    );
    assert.ok(log.events.length >= 2, 'an error before listed');
    await waitFor('the rescan timer to be armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);

    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'a');
    clock.advance(1_000);
    await log.event('added', 'a');
    // The rescan re-opened the kernel watch, so later files arrive without another rescan.
    put(dir, 'b');
    await log.event('added', 'b');
    assertProtocol(log.events);
  });

  test('aborting the signal ends the iteration, and the watcher releases its timer', async (t) => {
    const dir = scratch(['a']);
    const clock = new ManualClock();
    const { log, controller } = start(t, { dir, clock, rescanMs: 1_000 });
    await log.event('listed');
    await waitFor('the rescan timer to be armed', () => (clock.pendingTimers === 1 ? true : undefined), DEADLINE_MS);
    controller.abort();
    await log.done;
    assert.equal(clock.pendingTimers, 0);
    const count = log.events.length;
    put(dir, 'after-abort');
    rmSync(join(dir, 'a'));
    assert.equal(log.events.length, count);
  });

  test('breaking out of the loop closes the watcher and cancels its timer', async () => {
    const dir = scratch(['a']);
    const clock = new ManualClock();
    const controller = new AbortController();
    const watcher = new DirectoryWatcher({ dir, signal: controller.signal, clock, rescanMs: 1_000 });
    const seen: string[] = [];
    let armed = -1;
    for await (const event of watcher) {
      seen.push('name' in event ? `${event.kind} ${event.name}` : event.kind);
      if (event.kind === 'listed') put(dir, 'b');
      if (event.kind === 'added') {
        armed = clock.pendingTimers;
        break;
      }
    }
    assert.deepEqual(seen, ['present a', 'listed', 'added b']);
    assert.equal(armed, 1);
    assert.equal(clock.pendingTimers, 0);
    controller.abort();
  });

  test('a watcher is iterated once', async (t) => {
    const dir = scratch();
    const { watcher, log } = start(t, { dir, rescanMs: 0 });
    await log.event('listed');
    await assert.rejects(async () => {
      for await (const _ of watcher) break;
    }, /iterated once/);
  });
});
