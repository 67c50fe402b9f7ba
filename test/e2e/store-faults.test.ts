/**
 * The agent and its SQLite store under the faults a node gives them, through the real plugin
 * executable: another process holding the database, a full disk (a real tmpfs), a database
 * truncated or corrupt at start, and a runtime's GC racing its own ADDs.
 */
import assert from 'node:assert/strict';
import { closeSync, mkdirSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { AgentStatus } from '../../src/api/protocol.ts';
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
    warren({ command, containerID, netns: '/var/run/netns/faults', ifname: 'eth0', config: { ...conf(agent), ...extra } });
  const intents = (agent: AgentHandle) => readdirSync(join(agent.dir, 'journal')).filter((n) => n.endsWith('.release'));

  it('a DEL journaled while another process held the database never releases the address the next ADD got', async () => {
    const agent = await start(['--db-busy-timeout', '0.2']);
    const first = await call(agent, 'ADD', 'c1');
    assert.equal(first.code, 0, first.stdout);
    const holder = await holdDatabase(join(agent.dir, 'warren.db'));
    let released = false;
    try {
      const blocked = await call(agent, 'ADD', 'c2');
      assert.equal(blocked.json?.code, 11, `a busy database is try-again, not an internal error: ${blocked.stdout}`);
      assert.match(String(blocked.json?.msg), /warren\.db is locked by another process/);
      const del = await call(agent, 'DEL', 'c1');
      assert.equal(del.code, 0, del.stdout);
      assert.equal(intents(agent).length, 1, 'the DEL is journaled');
      await holder.release();
      released = true;
      // The runtime starts a container with the same ID and interface again.
      const again = await call(agent, 'ADD', 'c1');
      assert.equal(again.code, 0, again.stdout);
      await waitFor('the journaled DEL to be done with', () => (intents(agent).length === 0 ? true : undefined));
      const held = await agent.allocations('?containerID=c1');
      assert.deepEqual(held.map((a) => a.address), resultAddresses(again), 'the address the new container uses is still allocated');
      assert.notDeepEqual(resultAddresses(again), resultAddresses(first), 'and it is not the one the DEL gave up');
    } finally {
      if (!released) await holder.release();
    }
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

  it('STATUS is not ready while the disk is full, says why, and is ready again when there is room', { skip: isRoot() ? false : 'needs root to mount a tmpfs' }, async () => {
    const mount = tempDir('warren-tmpfs-');
    await sh('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', mount]);
    let agent: AgentHandle | undefined;
    try {
      const dir = join(mount, 'state');
      mkdirSync(dir, { mode: 0o700 });
      agent = await startAgent({ dir, args: ['--db-busy-timeout', '0.2'] });
      const ok = await call(agent, 'ADD', 'd1');
      assert.equal(ok.code, 0, ok.stdout);
      assert.equal((await call(agent, 'STATUS', '', { cniVersion: '1.1.0' })).code, 0);
      // Fill the file system to the last block.
      const filler = join(mount, 'filler');
      const fd = openSync(filler, 'w');
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
      } finally {
        closeSync(fd);
      }
      const add = await call(agent, 'ADD', 'd2');
      assert.equal(add.json?.code, 5, add.stdout);
      assert.match(String(add.json?.msg), /disk is full/);
      const status = await warren({ command: 'STATUS', config: conf(agent, '10.231.0.0/24', '1.1.0') });
      assert.equal(status.json?.code, 50, `STATUS must not say ready while ADD cannot commit: ${status.stdout}`);
      assert.match(String(status.json?.msg), /disk is full/);
      rmSync(filler);
      const back = await warren({ command: 'STATUS', config: conf(agent, '10.231.0.0/24', '1.1.0') });
      assert.equal(back.code, 0, back.stdout);
      assert.equal((await call(agent, 'ADD', 'd2')).code, 0);
    } finally {
      await agent?.kill();
      await sh('umount', [mount]);
    }
  });

  it('refuses to start on a database truncated to nothing, naming the file', async () => {
    const dir = tempDir('warren-empty-');
    writeFileSync(join(dir, 'warren.db'), '');
    const r = await run(process.execPath, [WARREN_BIN, 'agent', '--state-dir', dir, '--journal-dir', join(dir, 'journal'), '--socket', join(dir, 's.sock'), '--containerd', 'off']);
    assert.equal(r.code, 1, 'an empty file would be taken for a new database and every address handed out again');
    assert.match(r.stderr, new RegExp(`database ${join(dir, 'warren.db').replace(/[.]/g, '\\.')} is an empty file`));
  });

  it('names the file when the database is corrupt', async () => {
    const dir = tempDir('warren-corrupt-');
    writeFileSync(join(dir, 'warren.db'), Buffer.alloc(8192, 0x42));
    const r = await run(process.execPath, [WARREN_BIN, 'agent', '--state-dir', dir, '--journal-dir', join(dir, 'journal'), '--socket', join(dir, 's.sock'), '--containerd', 'off']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /database \S+warren\.db is corrupt/);
  });

  it('a GC whose list was taken before an ADD committed does not release that ADD', async () => {
    const agent = await start([]);
    const gcConf = (valid: Array<{ containerID: string; ifname: string }>) => ({ ...conf(agent, '10.231.0.0/24', '1.1.0'), 'cni.dev/valid-attachments': valid });
    // The runtime listed its attachments (none), then this ADD committed, then the GC arrived.
    const add = await call(agent, 'ADD', 'g1');
    assert.equal(add.code, 0);
    const gc = await warren({ command: 'GC', config: gcConf([]) });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual((await agent.allocations('?containerID=g1')).map((a) => a.address), resultAddresses(add), 'a young allocation survives GC');
  });

  it('GC still releases what the runtime no longer lists once it is older than the grace', async () => {
    const agent = await start(['--gc-grace', '0']);
    const gcConf = (valid: Array<{ containerID: string; ifname: string }>) => ({ ...conf(agent, '10.231.0.0/24', '1.1.0'), 'cni.dev/valid-attachments': valid });
    assert.equal((await call(agent, 'ADD', 'keep')).code, 0);
    assert.equal((await call(agent, 'ADD', 'gone')).code, 0);
    const gc = await warren({ command: 'GC', config: gcConf([{ containerID: 'keep', ifname: 'eth0' }]) });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual((await agent.allocations()).map((a) => a.containerID), ['keep']);
  });
});
