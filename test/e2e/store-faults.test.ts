/**
 * The agent and its SQLite store under the faults a node gives them, through the real plugin
 * executable: another process holding the database, a full disk (a real tmpfs), a database
 * truncated or corrupt at start, and a runtime's GC racing its own ADDs.
 */
import assert from 'node:assert/strict';
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { holdDatabase } from '../helpers/sqlite-holder.ts';
import { WARREN_BIN, isRoot, run, sh, tempDir, waitFor } from '../helpers/processes.ts';

describe('store faults', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });
  const start = async (args: readonly string[], dir?: string) => {
    const a = await startAgent({ args, ...(dir === undefined ? {} : { dir }) });
    agents.push(a);
    return a;
  };
  const conf = (agent: AgentHandle, range = '10.231.0.0/24', version = '1.0.0') => ({
    cniVersion: version,
    name: 'faults',
    ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), range },
  });
  const call = (agent: AgentHandle, command: string, containerID: string, extra: Record<string, unknown> = {}) =>
    warren({
      command,
      containerID,
      netns: '/var/run/netns/faults',
      ifname: 'eth0',
      config: { ...conf(agent), ...extra },
    });
  const intents = (agent: AgentHandle) => readdirSync(join(agent.dir, 'journal')).filter((n) => n.endsWith('.release'));
  const agentStatus = async (agent: AgentHandle) =>
    (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus;

  it('a DEL journaled while another process held the database never releases the address the next ADD got', async () => {
    // The journal retries the DEL on its own clock: each retry fails while the lock is held and
    // waits longer (1 s, 2 s, 4 s). The race the test is named after: the lock goes away, and the
    // runtime starts a container of the same ID and interface again before the next retry.
    const agent = await start(['--db-busy-timeout', '0.2', '--reconcile-interval', '0.5']);
    const first = await call(agent, 'ADD', 'c1');
    assert.equal(first.code, 0, first.stdout);
    const holder = await holdDatabase(join(agent.dir, 'warren.db'));
    let released = false;
    try {
      const del = await call(agent, 'DEL', 'c1');
      assert.equal(del.code, 0, del.stdout);
      assert.equal(intents(agent).length, 1, 'the DEL is journaled');
      // Release the lock only once no retry is under way and the next is seconds away.
      await waitFor("the journaled DEL's next retry to be at least 2.5 s away", async () => {
        const pending = (await agentStatus(agent)).reconciler.pending.find((p) => p.containerID === 'c1');
        const next = pending?.nextAttemptAt === undefined ? 0 : Date.parse(pending.nextAttemptAt);
        return next - Date.now() >= 2_500 ? true : undefined;
      });
      await holder.release();
      released = true;
      const again = await call(agent, 'ADD', 'c1');
      assert.equal(again.code, 0, again.stdout);
      await waitFor('the journaled DEL to be done with', () => (intents(agent).length === 0 ? true : undefined));
      const held = await agent.allocations('?containerID=c1');
      assert.deepEqual(
        held.map((a) => a.address),
        resultAddresses(again),
        'the address the new container uses is still allocated',
      );
      assert.notDeepEqual(resultAddresses(again), resultAddresses(first), 'and it is not the one the DEL gave up');
    } finally {
      if (!released) await holder.release();
    }
  });

  it('an ADD that cannot have the database within the busy timeout answers try again (11), naming the file', async () => {
    const agent = await start(['--db-busy-timeout', '0.2']);
    const holder = await holdDatabase(join(agent.dir, 'warren.db'));
    try {
      const blocked = await call(agent, 'ADD', 'b1');
      assert.equal(blocked.json?.code, 11, `a busy database is try-again, not an internal error: ${blocked.stdout}`);
      assert.match(String(blocked.json?.msg), /warren\.db is locked by another process/);
    } finally {
      await holder.release();
    }
    assert.equal((await call(agent, 'ADD', 'b1')).code, 0);
  });

  it('an outside lock on the database does not freeze the agent: status answers while an ADD waits', async () => {
    const agent = await start(['--db-busy-timeout', '60']);
    const holder = await holdDatabase(join(agent.dir, 'warren.db'));
    let released = false;
    try {
      let addDone = false;
      const add = call(agent, 'ADD', 'w1').finally(() => (addDone = true));
      const status = await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status', timeoutMs: 30_000 });
      const body = status.body as AgentStatus;
      assert.equal(addDone, false, 'the status answer came while the ADD was still waiting for the lock');
      assert.equal(body.ready, false);
      assert.match(body.store.error ?? '', /locked by another process/);
      await holder.release();
      released = true;
      const result = await add;
      assert.equal(result.code, 0, `once the lock is gone the waiting ADD commits: ${result.stdout}`);
    } finally {
      if (!released) await holder.release();
    }
  });

  const needsRoot = { skip: isRoot() ? false : 'needs root to mount a tmpfs' };
  /** An agent whose state lives on a real 2 MiB tmpfs of its own; unmounted after `body`. */
  const onTmpfs = async (body: (agent: AgentHandle, mount: string) => Promise<void>, args: readonly string[] = []) => {
    const mount = tempDir('warren-tmpfs-');
    await sh('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', mount]);
    let agent: AgentHandle | undefined;
    try {
      const dir = join(mount, 'state');
      mkdirSync(dir, { mode: 0o700 });
      agent = await startAgent({ dir, args: ['--db-busy-timeout', '0.2', ...args] });
      await body(agent, mount);
    } finally {
      await agent?.kill();
      await sh('umount', [mount]);
    }
  };
  /** Fills the file system to the last block, then frees `room` bytes of it; returns the filler. */
  const fillDisk = (mount: string, room = 0) => {
    const filler = join(mount, 'filler');
    const fd = openSync(filler, 'a');
    try {
      for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 9, 1]) {
        const chunk = Buffer.alloc(size, 0x55);
        for (;;) {
          try {
            writeSync(fd, chunk);
          } catch {
            break;
          }
        }
      }
      if (room > 0) ftruncateSync(fd, Math.max(0, fstatSync(fd).size - room));
    } finally {
      closeSync(fd);
    }
    return filler;
  };
  const cniStatus = (agent: AgentHandle) =>
    warren({ command: 'STATUS', config: conf(agent, '10.231.0.0/24', '1.1.0') });

  it(
    'STATUS is not ready while the disk is full, says why, and is ready again once there is room and a commit succeeded',
    needsRoot,
    () =>
      onTmpfs(async (agent, mount) => {
        const ok = await call(agent, 'ADD', 'd1');
        assert.equal(ok.code, 0, ok.stdout);
        assert.equal((await cniStatus(agent)).code, 0);
        const filler = fillDisk(mount);
        const add = await call(agent, 'ADD', 'd2');
        assert.equal(add.json?.code, 5, add.stdout);
        assert.match(String(add.json?.msg), /disk is full/);
        const status = await cniStatus(agent);
        assert.equal(status.json?.code, 50, `STATUS must not say ready while ADD cannot commit: ${status.stdout}`);
        assert.match(String(status.json?.msg), /disk is full/);
        rmSync(filler);
        const room = await cniStatus(agent);
        assert.equal(room.json?.code, 50, `the ping succeeds again, but no commit has yet: ${room.stdout}`);
        assert.match(String(room.json?.msg), /a commit failed: .*disk is full/);
        assert.equal((await call(agent, 'ADD', 'd2')).code, 0);
        const back = await cniStatus(agent);
        assert.equal(back.code, 0, back.stdout);
      }),
  );

  it(
    "the kubelet's probes: /readyz is 503 naming the failed commit while the disk is full, /livez stays 200",
    needsRoot,
    () =>
      onTmpfs(
        async (agent, mount) => {
          const address = await waitFor('the metrics address', async () => (await agentStatus(agent)).metrics?.address);
          const probe = async (path: string) => {
            const r = await fetch(`http://${address}${path}`);
            return { status: r.status, text: await r.text() };
          };
          assert.equal((await call(agent, 'ADD', 'p1')).code, 0);
          assert.equal((await probe('/readyz')).status, 200);
          const filler = fillDisk(mount);
          assert.equal((await call(agent, 'ADD', 'p2')).json?.code, 5);
          const ready = await probe('/readyz');
          assert.equal(ready.status, 503, ready.text);
          assert.match(ready.text, /^not ready: .*disk is full/);
          assert.deepEqual(await probe('/livez'), { status: 200, text: 'ok\n' }, 'busy or failing is not dead');
          rmSync(filler);
          assert.equal((await call(agent, 'ADD', 'p2')).code, 0);
          assert.equal((await probe('/readyz')).status, 200);
        },
        ['--metrics-address', '127.0.0.1:0'],
      ),
  );

  it(
    'STATUS is not ready while ADDs fail on a nearly full disk where the one-row readiness write still fits',
    needsRoot,
    () =>
      onTmpfs(async (agent, mount) => {
        assert.equal((await call(agent, 'ADD', 'n0')).code, 0);
        // 8 KiB left: an ADD's commit adds three 4 KiB pages to the WAL, the readiness ping one,
        // and the ping goes on fitting in the WAL space the failed ADD took (measured). A WAL that
        // was just checkpointed is written over from its start: fill again until an ADD fails.
        let filler = '';
        let failed: Awaited<ReturnType<typeof call>> | undefined;
        let id = '';
        for (let i = 1; i <= 3 && failed === undefined; i++) {
          filler = fillDisk(mount, 8 * 1024);
          id = `n${i}`;
          const add = await call(agent, 'ADD', id);
          if (add.code !== 0) failed = add;
        }
        assert.equal(failed?.json?.code, 5, `an ADD does not fit: ${failed?.stdout}`);
        assert.match(String(failed?.json?.msg), /disk is full/);
        const status = await cniStatus(agent);
        assert.equal(status.json?.code, 50, `STATUS must not say ready while every ADD fails: ${status.stdout}`);
        // "a commit failed", not "is not usable": the ping itself succeeded, only the commit says no.
        assert.match(String(status.json?.msg), /a commit failed: .*disk is full/);
        const body = await agentStatus(agent);
        assert.equal(body.ready, false);
        assert.match(body.notReady ?? '', /a commit failed: .*disk is full/);
        rmSync(filler);
        assert.equal((await call(agent, 'ADD', id)).code, 0);
        assert.equal((await cniStatus(agent)).code, 0);
        assert.equal((await agentStatus(agent)).ready, true);
      }),
  );

  it('refuses to start on a database truncated to nothing, naming the file', async () => {
    const dir = tempDir('warren-empty-');
    writeFileSync(join(dir, 'warren.db'), '');
    const r = await run(process.execPath, [
      WARREN_BIN,
      'agent',
      '--state-dir',
      dir,
      '--journal-dir',
      join(dir, 'journal'),
      '--socket',
      join(dir, 's.sock'),
      '--containerd',
      'off',
    ]);
    assert.equal(r.code, 1, 'an empty file would be taken for a new database and every address handed out again');
    assert.match(r.stderr, new RegExp(`database ${join(dir, 'warren.db').replace(/[.]/g, '\\.')} is an empty file`));
  });

  it('names the file when the database is corrupt', async () => {
    const dir = tempDir('warren-corrupt-');
    writeFileSync(join(dir, 'warren.db'), Buffer.alloc(8192, 0x42));
    const r = await run(process.execPath, [
      WARREN_BIN,
      'agent',
      '--state-dir',
      dir,
      '--journal-dir',
      join(dir, 'journal'),
      '--socket',
      join(dir, 's.sock'),
      '--containerd',
      'off',
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /database \S+warren\.db is corrupt/);
  });

  it('a GC whose list was taken before an ADD committed does not release that ADD', async () => {
    const agent = await start([]);
    const gcConf = (valid: Array<{ containerID: string; ifname: string }>) => ({
      ...conf(agent, '10.231.0.0/24', '1.1.0'),
      'cni.dev/valid-attachments': valid,
    });
    // The runtime listed its attachments (none), then this ADD committed, then the GC arrived.
    const add = await call(agent, 'ADD', 'g1');
    assert.equal(add.code, 0);
    const gc = await warren({ command: 'GC', config: gcConf([]) });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual(
      (await agent.allocations('?containerID=g1')).map((a) => a.address),
      resultAddresses(add),
      'a young allocation survives GC',
    );
  });

  it('GC still releases what the runtime no longer lists once it is older than the grace', async () => {
    const agent = await start(['--gc-grace', '0']);
    const gcConf = (valid: Array<{ containerID: string; ifname: string }>) => ({
      ...conf(agent, '10.231.0.0/24', '1.1.0'),
      'cni.dev/valid-attachments': valid,
    });
    assert.equal((await call(agent, 'ADD', 'keep')).code, 0);
    assert.equal((await call(agent, 'ADD', 'gone')).code, 0);
    const gc = await warren({ command: 'GC', config: gcConf([{ containerID: 'keep', ifname: 'eth0' }]) });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['keep'],
    );
  });
});
