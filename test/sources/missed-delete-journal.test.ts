/**
 * The agent's journal source in process, on a real directory and a ManualClock: a read that fails
 * for a passing reason is retried on the next rescan instead of stranding the intent; the journal
 * directory is held to the plugin's rule (no symlink, no other owner, nothing others can write) by
 * the one check both share; another user's file never releases anything; and rejected/ stays
 * within its bounds, oldest first, saying what it removed.
 */
import assert from 'node:assert/strict';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { encodeEntry, journalFileName } from '../../src/cni/journal-entry.ts';
import { checkJournalDir } from '../../src/cni/journal-dir.ts';
import { recordMissedDelete } from '../../src/plugin/journal-writer.ts';
import {
  type JournalEvent,
  MissedDeleteJournal,
  type MissedDeleteJournalOptions,
  REJECTED_DIR,
} from '../../src/sources/missed-delete-journal.ts';
import { HANG_BOUND_MS, isRoot, tempDir, waitFor } from '../helpers/processes.ts';

/** The intents in a journal directory now, as the plugin and an operator see them. */
function pendingFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((n) => !n.startsWith('.') && n !== REJECTED_DIR)
    .sort();
}

/** What was set aside, oldest first by name. */
function rejectedFiles(dir: string): string[] {
  return existsSync(join(dir, REJECTED_DIR)) ? readdirSync(join(dir, REJECTED_DIR)).sort() : [];
}

const OWNER = { network: 'pods', containerID: 'c0ffee', ifname: 'eth0' };
const NOBODY = 65534;
/** Bounds a hang; a loaded machine is slow, not wrong. */
const DEADLINE_MS = HANG_BOUND_MS;

/** A journal being consumed: its events so far, and a way to wait for the next one that matches. */
function consume(options: Omit<MissedDeleteJournalOptions, 'clock'> & { clock?: ManualClock }) {
  const clock = options.clock ?? new ManualClock(1_700_000_000_000);
  const journal = new MissedDeleteJournal({ rescanMs: 0, ...options, clock });
  journal.prepare();
  const abort = new AbortController();
  const events: JournalEvent[] = [];
  const running = (async () => {
    for await (const event of journal.events(abort.signal)) events.push(event);
  })();
  let seen = 0;
  return {
    journal,
    clock,
    events,
    /** The first event after those already waited for that matches. */
    async next(what: string, match: (e: JournalEvent) => boolean): Promise<JournalEvent> {
      return waitFor(
        `${what} (events: ${JSON.stringify(events)})`,
        () => {
          const i = events.findIndex((e, index) => index >= seen && match(e));
          if (i < 0) return undefined;
          seen = i + 1;
          return events[i];
        },
        DEADLINE_MS,
      );
    },
    async stop(): Promise<void> {
      abort.abort();
      await running;
    },
  };
}

function writeIntent(dir: string, owner = OWNER): string {
  return recordMissedDelete(dir, { format: 1, ...owner, recordedAt: 1, reason: 'test' });
}

/** An open that fails with `code` for the first `times` opens of `name`, then opens for real. */
function failingOpen(name: string, code: string, times = 1) {
  let left = times;
  return (path: string, flags: number): number => {
    if (path.endsWith(`/${name}`) && left > 0) {
      left -= 1;
      throw Object.assign(new Error(`${code}: too many open files, open '${path}' (injected)`), { code });
    }
    return openSync(path, flags);
  };
}

describe('MissedDeleteJournal: a read that fails is retried', () => {
  test('a file whose first read fails (EMFILE) at start becomes an intent on the next rescan, not never (issue 10)', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const name = writeIntent(dir).split('/').pop() as string;
    const j = consume({ dir, open: failingOpen(name, 'EMFILE') });
    try {
      const error = await j.next('the failed read reported', (e) => e.kind === 'error');
      assert.match(error.kind === 'error' ? error.message : '', /EMFILE.*will try again/);
      await j.next('the listing', (e) => e.kind === 'listed');
      assert.equal(j.events.filter((e) => e.kind === 'intent').length, 0);
      assert.deepEqual(pendingFiles(j.journal.dir), [name], 'the file is still there');
      j.journal.rescan();
      const intent = await j.next('the intent on the rescan', (e) => e.kind === 'intent');
      assert.deepEqual(intent, { kind: 'intent', name, entry: { format: 1, ...OWNER, recordedAt: 1, reason: 'test' } });
    } finally {
      await j.stop();
    }
  });

  test('a file written while the agent runs whose read keeps failing is tried on every rescan until it is read', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const name = journalFileName(OWNER);
    const j = consume({ dir, open: failingOpen(name, 'EIO', 2) });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      writeIntent(dir);
      await j.next('the first failed read', (e) => e.kind === 'error' && e.message.includes('EIO'));
      j.journal.rescan();
      await j.next('the second failed read', (e) => e.kind === 'error' && e.message.includes('EIO'));
      j.journal.rescan();
      await j.next('the intent', (e) => e.kind === 'intent' && e.name === name);
      assert.equal(j.events.filter((e) => e.kind === 'intent').length, 1, 'read once it could be, and only then');
    } finally {
      await j.stop();
    }
  });

  test('lists a file whose read failed as unread, with why, until a read of it succeeds or it is gone', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const name = writeIntent(dir).split('/').pop() as string;
    const other = writeIntent(dir, { ...OWNER, containerID: 'c-removed' })
      .split('/')
      .pop() as string;
    let failing = true;
    const open = (path: string, flags: number): number => {
      if (failing) throw Object.assign(new Error(`EIO: i/o error, open '${path}' (injected)`), { code: 'EIO' });
      return openSync(path, flags);
    };
    const j = consume({ dir, open });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      assert.deepEqual(
        j.journal.unread().map((u) => u.name),
        [name, other].sort(),
      );
      assert.match(j.journal.unread()[0]?.error ?? '', /EIO.*will try again on the next rescan/);
      rmSync(join(dir, other));
      assert.deepEqual(
        j.journal.unread().map((u) => u.name),
        [name],
        'a file removed meanwhile is not listed',
      );
      failing = false;
      j.journal.rescan();
      await j.next('the intent', (e) => e.kind === 'intent' && e.name === name);
      assert.deepEqual(j.journal.unread(), []);
    } finally {
      await j.stop();
    }
  });

  test('a rescan does not report again a file that was read', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    writeIntent(dir);
    const j = consume({ dir });
    try {
      await j.next('the intent', (e) => e.kind === 'intent');
      j.journal.rescan();
      // A fence: a file added after the rescan is reported; nothing for the first came before it.
      writeIntent(dir, { ...OWNER, ifname: 'eth1' });
      await j.next('the fence', (e) => e.kind === 'intent' && e.entry.ifname === 'eth1');
      // (A file written while watched may come more than once, as added and changed; one read at start does not.)
      assert.equal(j.events.filter((e) => e.kind === 'intent' && e.entry.ifname === 'eth0').length, 1);
    } finally {
      await j.stop();
    }
  });
});

/** The two sides of the journal, which must refuse the same directories. */
const sides: Array<[string, (dir: string) => void]> = [
  ['the plugin (checkJournalDir)', (dir) => checkJournalDir(dir)],
  [
    'the agent (MissedDeleteJournal.prepare)',
    (dir) => new MissedDeleteJournal({ dir, clock: new ManualClock() }).prepare(),
  ],
];

describe('MissedDeleteJournal: an empty file gets a second look', () => {
  test('a file caught between its creation and its write is read whole, not set aside (the e2e journal tests wrote this way)', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const j = consume({ dir });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      const name = journalFileName(OWNER);
      writeFileSync(join(dir, name), '');
      await waitFor('the empty file to be seen', () => (j.clock.pendingTimers > 0 ? true : undefined), DEADLINE_MS);
      writeFileSync(join(dir, name), encodeEntry({ format: 1, ...OWNER, recordedAt: 1, reason: 'written late' }));
      const intent = await j.next('the intent once written', (e) => e.kind === 'intent');
      assert.deepEqual(intent, {
        kind: 'intent',
        name,
        entry: { format: 1, ...OWNER, recordedAt: 1, reason: 'written late' },
      });
      assert.equal(j.events.filter((e) => e.kind === 'rejected').length, 0);
    } finally {
      await j.stop();
    }
  });

  test('a file that stays empty is set aside at the second look', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const j = consume({ dir });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      writeFileSync(join(dir, 'empty.release'), '');
      await waitFor('the empty file to be seen', () => (j.clock.pendingTimers > 0 ? true : undefined), DEADLINE_MS);
      assert.equal(j.events.filter((e) => e.kind === 'rejected').length, 0, 'not at the first look');
      j.clock.advance(1_000);
      const rejected = await j.next('the empty file set aside', (e) => e.kind === 'rejected');
      assert.match(rejected.kind === 'rejected' ? rejected.reason : '', /empty/);
    } finally {
      await j.stop();
    }
  });
});

describe('the journal directory: the agent refuses what the plugin refuses', {
  skip: isRoot() ? false : 'needs root to chown',
}, () => {
  for (const [side, prepare] of sides) {
    test(`${side}: refuses a symlink into another user's directory and changes nothing there (issue 10)`, () => {
      const root = tempDir();
      const theirs = join(root, 'theirs');
      mkdirSync(theirs, { mode: 0o755 });
      chmodSync(theirs, 0o755);
      chownSync(theirs, NOBODY, NOBODY);
      const link = join(root, 'journal');
      symlinkSync(theirs, link);
      assert.throws(
        () => prepare(link),
        (e: unknown) => isWarrenError(e, 'IO_FAILURE') && e.message.includes(link) && /symbolic link/.test(e.message),
      );
      assert.equal(statSync(theirs).mode & 0o777, 0o755, 'the target is not chmodded');
      assert.deepEqual(readdirSync(theirs), [], 'nothing is created in it');
    });

    test(`${side}: refuses a directory owned by another user`, () => {
      const dir = join(tempDir(), 'journal');
      mkdirSync(dir, { mode: 0o700 });
      chownSync(dir, NOBODY, NOBODY);
      assert.throws(
        () => prepare(dir),
        (e: unknown) =>
          isWarrenError(e, 'IO_FAILURE') && e.message.includes(dir) && /belongs to uid 65534/.test(e.message),
      );
      assert.deepEqual(readdirSync(dir), []);
    });

    test(`${side}: refuses a directory its group or others can write, and leaves its mode`, () => {
      for (const mode of [0o777, 0o770, 0o702]) {
        const dir = join(tempDir(), 'journal');
        mkdirSync(dir);
        chmodSync(dir, mode);
        assert.throws(
          () => prepare(dir),
          (e: unknown) =>
            isWarrenError(e, 'IO_FAILURE') &&
            e.message.includes(dir) &&
            /writable by its group or others/.test(e.message),
          mode.toString(8),
        );
        assert.equal(statSync(dir).mode & 0o777, mode);
      }
    });

    test(`${side}: refuses a file where the directory should be`, () => {
      const dir = join(tempDir(), 'journal');
      writeFileSync(dir, '');
      assert.throws(() => prepare(dir), /journal directory .* is not a directory/);
    });

    test(`${side}: creates a missing directory owner-only`, () => {
      const dir = join(tempDir(), 'deep', 'journal');
      prepare(dir);
      assert.ok(statSync(dir).isDirectory());
      assert.equal(statSync(dir).mode & 0o077, 0);
    });
  }

  test('the agent tightens a directory it owns that others can only read, and makes rejected/ beside it', () => {
    const dir = join(tempDir(), 'journal');
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    new MissedDeleteJournal({ dir, clock: new ManualClock() }).prepare();
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, REJECTED_DIR)).mode & 0o777, 0o700);
  });

  test("the agent refuses a rejected/ that is a symlink into another user's directory", () => {
    const root = tempDir();
    const theirs = join(root, 'theirs');
    mkdirSync(theirs);
    chownSync(theirs, NOBODY, NOBODY);
    const dir = join(root, 'journal');
    mkdirSync(dir, { mode: 0o700 });
    symlinkSync(theirs, join(dir, REJECTED_DIR));
    assert.throws(
      () => new MissedDeleteJournal({ dir, clock: new ManualClock() }).prepare(),
      /rejected is a symbolic link/,
    );
  });
});

describe('journal files of another user', { skip: isRoot() ? false : 'needs root to chown' }, () => {
  test('a valid intent file owned by another uid is set aside, never an intent (issue 10)', async () => {
    const dir = join(tempDir(), 'journal');
    checkJournalDir(dir);
    const planted = writeIntent(dir);
    chownSync(planted, NOBODY, NOBODY);
    const name = planted.split('/').pop() as string;
    const j = consume({ dir });
    try {
      const rejected = await j.next('the planted file set aside', (e) => e.kind === 'rejected');
      assert.equal(rejected.kind === 'rejected' && rejected.name, name);
      assert.match(rejected.kind === 'rejected' ? rejected.reason : '', /belongs to uid 65534, not to uid 0/);
      await j.next('the listing', (e) => e.kind === 'listed');
      // Live as well as at start: made theirs under a dot-name, then renamed in, as a plugin would.
      const liveOwner = { ...OWNER, containerID: 'live' };
      const liveName = journalFileName(liveOwner);
      const temp = join(dir, '.planting');
      writeFileSync(temp, encodeEntry({ format: 1, ...liveOwner, recordedAt: 1, reason: 'planted' }));
      chownSync(temp, NOBODY, NOBODY);
      renameSync(temp, join(dir, liveName));
      const liveRejected = await j.next(
        'the live planted file set aside',
        (e) => e.kind === 'rejected' && e.name === liveName,
      );
      assert.match(liveRejected.kind === 'rejected' ? liveRejected.reason : '', /belongs to uid 65534/);
      assert.equal(j.events.filter((e) => e.kind === 'intent' && e.name === name).length, 0);
      assert.equal(j.events.filter((e) => e.kind === 'intent').length, 0, 'nothing is released on their account');
      assert.deepEqual(pendingFiles(j.journal.dir), [], 'moved out of the journal proper');
      assert.equal(rejectedFiles(j.journal.dir).length, 2, 'set aside, not deleted');
    } finally {
      await j.stop();
    }
  });
});

describe('rejected/ is bounded', () => {
  /** Plants a bad file and waits until it is set aside; the clock moves a second per file. */
  async function plant(j: ReturnType<typeof consume>, dir: string, name: string, bytes = 10): Promise<JournalEvent> {
    j.clock.advance(1_000);
    writeFileSync(join(dir, name), 'x'.repeat(bytes));
    return j.next(`${name} set aside`, (e) => e.kind === 'rejected' && e.name === name);
  }

  test('keeps at most maxRejectedFiles, removing the oldest set aside first and saying which', async () => {
    const dir = join(tempDir(), 'journal');
    const j = consume({ dir, maxRejectedFiles: 3 });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      const pruned: string[] = [];
      for (const n of [1, 2, 3, 4, 5]) {
        const event = await plant(j, dir, `bad-${n}.release`);
        assert.equal(event.kind, 'rejected');
        if (event.kind === 'rejected' && event.pruned !== undefined) {
          pruned.push(...event.pruned.files);
          assert.match(event.pruned.why, /at most 3 files/);
        }
      }
      assert.deepEqual(
        pruned.map((p) => p.replace(/\.\d+$/, '')),
        ['bad-1.release', 'bad-2.release'],
      );
      assert.deepEqual(
        rejectedFiles(j.journal.dir).map((p) => p.replace(/\.\d+$/, '')),
        ['bad-3.release', 'bad-4.release', 'bad-5.release'],
      );
    } finally {
      await j.stop();
    }
  });

  test('keeps at most maxRejectedBytes, counting what was set aside before the agent started, oldest first', async () => {
    const dir = join(tempDir(), 'journal');
    const rejected = join(dir, REJECTED_DIR);
    mkdirSync(rejected, { recursive: true, mode: 0o700 });
    // Left by an earlier run, a day ago; set aside at the times their names say.
    const dayAgo = 1_700_000_000_000 - 86_400_000;
    writeFileSync(join(rejected, `old-b.release.${dayAgo + 1}`), 'x'.repeat(40));
    writeFileSync(join(rejected, `old-a.release.${dayAgo}`), 'x'.repeat(40));
    const j = consume({ dir, maxRejectedBytes: 100 });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      const first = await plant(j, dir, 'new-1.release', 30);
      assert.deepEqual(first.kind === 'rejected' ? first.pruned?.files : undefined, [`old-a.release.${dayAgo}`]);
      assert.equal(first.kind === 'rejected' ? first.pruned?.bytes : undefined, 40);
      const second = await plant(j, dir, 'new-2.release', 31);
      assert.deepEqual(second.kind === 'rejected' ? second.pruned?.files : undefined, [`old-b.release.${dayAgo + 1}`]);
      assert.deepEqual(
        rejectedFiles(j.journal.dir).map((p) => p.replace(/\.\d+$/, '')),
        ['new-1.release', 'new-2.release'],
      );
      const third = await plant(j, dir, 'new-3.release', 39);
      assert.equal(
        third.kind === 'rejected' ? third.pruned : 'not rejected',
        undefined,
        '100 bytes is within the bound',
      );
    } finally {
      await j.stop();
    }
  });

  test('a directory set aside is removed whole when its turn comes', async () => {
    const dir = join(tempDir(), 'journal');
    const j = consume({ dir, maxRejectedFiles: 1 });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      mkdirSync(join(dir, 'dir.release'));
      writeFileSync(join(dir, 'dir.release', 'inside'), 'x');
      const aside = await j.next('the directory set aside', (e) => e.kind === 'rejected' && e.name === 'dir.release');
      const next = await plant(j, dir, 'bad.release');
      assert.deepEqual(next.kind === 'rejected' ? next.pruned?.files : undefined, [
        aside.kind === 'rejected' ? aside.movedTo.split('/').pop() : '',
      ]);
      assert.deepEqual(
        rejectedFiles(j.journal.dir).map((p) => p.replace(/\.\d+$/, '')),
        ['bad.release'],
        'the directory went, with what was in it',
      );
    } finally {
      await j.stop();
    }
  });

  test('a file set aside twice under one name in one millisecond keeps both', async () => {
    const dir = join(tempDir(), 'journal');
    const j = consume({ dir });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      for (let i = 0; i < 2; i++) {
        writeFileSync(join(dir, 'same.release'), `garbage ${i}`);
        await j.next(`copy ${i} set aside`, (e) => e.kind === 'rejected' && e.name === 'same.release');
      }
      assert.equal(rejectedFiles(j.journal.dir).length, 2);
    } finally {
      await j.stop();
    }
  });

  test('a set-aside name stays within 255 bytes however long the file name was', async () => {
    const dir = join(tempDir(), 'journal');
    const j = consume({ dir });
    try {
      await j.next('the listing', (e) => e.kind === 'listed');
      const long = `${'l'.repeat(247)}.release`;
      writeFileSync(join(dir, long), 'garbage');
      const event = await j.next('the long name set aside', (e) => e.kind === 'rejected' && e.name === long);
      assert.ok(event.kind === 'rejected' && existsSync(event.movedTo));
      assert.deepEqual(pendingFiles(j.journal.dir), []);
    } finally {
      await j.stop();
    }
  });
});
