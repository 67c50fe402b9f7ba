/**
 * The agent process: owner-only socket and state, clean SIGTERM, one agent per state directory,
 * recovery from a kill -9, and starting as an unprivileged user.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { CHILD_PATH, WARREN_BIN, isRoot, run, tempDir, track, waitFor } from '../helpers/processes.ts';

describe('the agent process', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });
  const start = async (dir?: string) => {
    const a = await startAgent(dir === undefined ? {} : { dir });
    agents.push(a);
    return a;
  };

  it('serves on a socket and keeps state only its owner can open', async () => {
    const agent = await start();
    const add = await warren({ command: 'ADD', containerID: 'm1', netns: '/x', ifname: 'eth0', config: { cniVersion: '1.0.0', name: 'm', ipam: { type: 'warren', socket: agent.socket, range: '10.217.0.0/24' } } });
    assert.equal(add.code, 0, add.stdout);
    assert.equal(statSync(agent.socket).mode & 0o777, 0o600, 'socket is 0600');
    assert.ok(statSync(agent.socket).isSocket());
    for (const name of ['warren.db', 'agent.lock']) {
      assert.equal(statSync(join(agent.dir, name)).mode & 0o077, 0, `${name} has no group or other permissions`);
    }
  });

  it('stops cleanly on SIGTERM: exit 0, socket and lock removed', async () => {
    const agent = await start();
    assert.equal(await agent.stop(), 0);
    assert.equal(existsSync(agent.socket), false);
    assert.equal(existsSync(join(agent.dir, 'agent.lock')), false);
  });

  it('refuses a second agent on the same state directory', async () => {
    const agent = await start();
    const second = await run(process.execPath, [WARREN_BIN, 'agent', '--state-dir', agent.dir, '--socket', join(agent.dir, 'other.sock')]);
    assert.equal(second.code, 1);
    assert.match(second.stderr, new RegExp(`another Warren agent \\(pid ${agent.pid}\\)`));
    const status = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket]);
    assert.equal(status.code, 0, 'the first agent still serves');
  });

  it('starts again after a kill -9 left its lock and socket behind, keeping allocations', async () => {
    const agent = await start();
    const conf = { cniVersion: '1.0.0', name: 'k', ipam: { type: 'warren', socket: agent.socket, range: '10.218.0.0/24' } };
    const add = await warren({ command: 'ADD', containerID: 'k1', netns: '/x', ifname: 'eth0', config: conf });
    await agent.kill();
    assert.ok(existsSync(agent.socket) && existsSync(join(agent.dir, 'agent.lock')), 'kill -9 leaves both behind');
    const again = await start(agent.dir);
    const held = await again.allocations('?containerID=k1');
    assert.deepEqual(held.map((a) => `${a.address}/24`), (add.json?.ips as Array<{ address: string }>).map((i) => i.address));
  });

  it('starts as an unprivileged user with no flags, in a state directory it can write', { skip: isRoot() ? false : 'needs root to switch user' }, async () => {
    const home = tempDir('warren-home-');
    chmodSync(home, 0o777);
    const stateDir = join(home, '.local', 'state', 'warren');
    const socket = join(stateDir, 'warren.sock');
    // nobody/nogroup: uid and gid 65534 on Debian.
    const child = track(spawn(process.execPath, [WARREN_BIN, 'agent'], { env: { PATH: CHILD_PATH, HOME: home }, cwd: home, uid: 65534, gid: 65534, stdio: 'ignore' }));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(`an unprivileged agent on ${socket}`, async () => {
        if (child.exitCode !== null) throw new Error(`agent exited with ${child.exitCode}`);
        return (await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', socket])).code === 0 ? true : undefined;
      });
      const status = await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', socket]);
      assert.equal(JSON.parse(status.stdout).ready, true);
      assert.equal(statSync(stateDir).uid, 65534);
      assert.equal(statSync(stateDir).mode & 0o777, 0o700);
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0);
  });
});
