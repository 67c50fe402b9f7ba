/**
 * Group commit on the SQLite store at --sync FULL (src/store/sqlite/wal-sync.ts): a commit asked to
 * be durable later is applied and answered at once with the promise of its sync, one sync serves
 * the commits made while another runs, a sync always begins after the commits it covers, and a
 * failed sync fails every later one. Real files, real fdatasync.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import { WalSync } from '../../../src/store/sqlite/wal-sync.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { LedgerOp } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/processes.ts';

const allocate = (pool: string, address: string, containerID: string): LedgerOp => ({
  op: 'allocate',
  allocation: {
    pool,
    address,
    network: 'net',
    containerID,
    ifname: 'eth0',
    node: 'n1',
    createdAt: 1,
  },
});

describe('WalSync', () => {
  it('serves the callers that ask while a sync runs with one more sync, not one each', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'w.db') });
    try {
      await store.commit('p', 0, [allocate('p', '10.0.0.1', 'c0')]); // the WAL file exists
      const wal = new WalSync(store.description.slice('sqlite:'.length));
      const first = wal.sync();
      const joined = Array.from({ length: 19 }, () => wal.sync());
      await Promise.all([first, ...joined]);
      assert.equal(wal.syncs, 2, 'the first, and one for everyone who came while it ran');
    } finally {
      await store.close();
    }
  });

  it('begins the sync that covers a caller after the call, never earlier', async () => {
    const path = join(tempDir(), 'w.db');
    writeFileSync(`${path}-wal`, '');
    const wal = new WalSync(path);
    const running = wal.sync();
    const began = wal.syncs;
    const later = wal.sync(); // the one running began before this call
    assert.equal(wal.syncs, began, 'not begun yet: it waits for the one running');
    await running;
    await later;
    assert.equal(wal.syncs, began + 1);
  });

  it('has nothing to sync without a WAL file', async () => {
    const wal = new WalSync(join(tempDir(), 'none.db'));
    await wal.sync();
    wal.syncNow();
  });

  it('fails every sync after one that failed, naming the database (a dropped page is never called durable)', async () => {
    const file = join(tempDir(), 'not-a-dir');
    writeFileSync(file, '');
    const wal = new WalSync(join(file, 'w.db')); // its WAL cannot be opened: ENOTDIR
    const first = await wal.sync().catch((error: unknown) => error);
    assert.ok(isWarrenError(first, 'IO_FAILURE'), String(first));
    assert.match((first as Error).message, /not-a-dir\/w\.db: its write-ahead log could not be synced/);
    assert.equal(await wal.sync().catch((error: unknown) => error), first);
    assert.throws(
      () => wal.syncNow(),
      (error) => error === first,
    );
  });

  it('leaves no unhandled rejection behind a failed sync nobody waited for (a later one stood for it)', async () => {
    const file = join(tempDir(), 'not-a-dir');
    writeFileSync(file, '');
    const unhandled: unknown[] = [];
    const listen = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listen);
    try {
      const wal = new WalSync(join(file, 'w.db'));
      const last = wal.sync(); // nobody waits for the ones below: as when later ADDs' syncs stand for them
      wal.sync();
      await last.catch(() => undefined);
      wal.sync();
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', listen);
    }
  });
});

describe('SqliteStore commits durable later', () => {
  it('answers a commit asked durable later at once, with the promise of its sync; the commit is applied', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'w.db') });
    try {
      const result = await store.commit('p', 0, [allocate('p', '10.0.0.1', 'c1')], undefined, { durableLater: true });
      assert.equal(result.kind, 'committed');
      assert.ok(result.kind === 'committed' && result.durable instanceof Promise);
      assert.deepEqual(
        (await store.list()).map((a) => a.address),
        ['10.0.0.1'],
        'visible before it is durable',
      );
      await (result.kind === 'committed' ? result.durable : undefined);
      const plain = await store.commit('p', 1, [allocate('p', '10.0.0.2', 'c2')]);
      assert.deepEqual(plain, { kind: 'committed', revision: 2 }, 'a plain commit is durable when answered');
    } finally {
      await store.close();
    }
  });

  it('makes each of 20 commits in flight durable, every one applied', async () => {
    const store = new SqliteStore({ path: join(tempDir(), 'w.db') });
    try {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.commit(`p${i}`, 0, [allocate(`p${i}`, `10.0.${i}.1`, `c${i}`)], undefined, { durableLater: true }),
        ),
      );
      const durable = results.map((r) => (r.kind === 'committed' ? r.durable : Promise.reject(new Error(r.reason))));
      await Promise.all(durable);
      assert.equal((await store.list()).length, 20);
    } finally {
      await store.close();
    }
  });

  it('makes no promise where there is nothing to sync later: NORMAL, or a database in memory', async () => {
    for (const store of [
      new SqliteStore({ path: join(tempDir(), 'n.db'), synchronous: 'NORMAL' }),
      new SqliteStore({ path: ':memory:' }),
    ]) {
      const result = await store.commit('p', 0, [allocate('p', '10.0.0.1', 'c1')], undefined, { durableLater: true });
      assert.deepEqual(result, { kind: 'committed', revision: 1 });
      await store.close();
    }
  });

  it('keeps what it answered across a reopen (the WAL holds it)', async () => {
    const path = join(tempDir(), 'w.db');
    const store = new SqliteStore({ path });
    const result = await store.commit('p', 0, [allocate('p', '10.0.0.1', 'c1')], undefined, { durableLater: true });
    await (result.kind === 'committed' ? result.durable : undefined);
    await store.close();
    const again = new SqliteStore({ path });
    try {
      assert.deepEqual(
        (await again.list()).map((a) => a.address),
        ['10.0.0.1'],
      );
    } finally {
      await again.close();
    }
  });
});
