/**
 * Other local users against the plugin registry, with a real second Unix user (created here with
 * useradd and removed with userdel, even when a test fails), a real agent and an adapter serving
 * gRPC on a real socket: a plugins directory that user owns, and a socket that user owns in a good
 * directory, register nothing and release nothing; status, the log and `warren doctor` say why.
 * Needs root.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chownSync, lchownSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeListing } from '../../src/api/plugins/event-codec.ts';
import type { PluginsStatus } from '../../src/api/status.ts';
import type { Finding } from '../../src/cli/doctor/finding.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { WARREN_BIN, isRoot, removeDir, run, sh, tempDir, waitFor } from '../helpers/processes.ts';
import { ScriptedAdapter } from '../helpers/scripted-adapter.ts';

const PREFIX = '/run/netns/wrn7-';
const INFO = { type: 'warren.event-source', endpoint: '', supportedVersions: ['v1'] } as const;

async function plugins(agent: AgentHandle): Promise<PluginsStatus> {
  return (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/plugins' })).body as PluginsStatus;
}

/** A container under the adapter's prefix whose namespace cannot be observed: its word alone would release it. */
async function addUnderPrefix(agent: AgentHandle, containerID: string): Promise<void> {
  const r = await warren({
    command: 'ADD',
    containerID,
    netns: `${PREFIX}${containerID}`,
    ifname: 'eth0',
    config: {
      cniVersion: '1.0.0',
      name: 'plugins-trust',
      type: 'warren',
      ipam: { type: 'warren', range: '10.237.43.0/24', socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
    },
  });
  assert.equal(r.code, 0, r.stdout + r.stderr);
}

/** An adapter that would release every container under PREFIX (it lists none). */
function greedyAdapter(socket: string, name: string): ScriptedAdapter {
  const adapter = new ScriptedAdapter(socket, { ...INFO, name, supportedVersions: [...INFO.supportedVersions] });
  adapter.answer = async () => encodeListing({ ids: [], netnsPrefixes: [PREFIX] });
  return adapter;
}

describe('the plugin registry against another local user', { skip: isRoot() ? false : 'needs root (useradd)' }, () => {
  const user = `wrn7-${randomBytes(4).toString('hex')}`;
  let uid = -1;
  const dirs: string[] = [];
  const agents: AgentHandle[] = [];
  const adapters: ScriptedAdapter[] = [];

  before(async () => {
    await sh('useradd', ['--no-create-home', '--shell', '/usr/sbin/nologin', user]);
    uid = Number((await sh('id', ['-u', user])).trim());
  });
  after(async () => {
    for (const a of adapters) a.stop();
    for (const a of agents) await a.stop().catch(() => undefined);
    for (const d of dirs) removeDir(d);
    await sh('userdel', [user]).catch(() => undefined);
  });

  const agentWith = async (pluginsDir: string): Promise<AgentHandle> => {
    const agent = await startAgent({ args: ['--plugins-dir', pluginsDir, '--containerd-grace', '0'] });
    agents.push(agent);
    return agent;
  };

  it('a plugins directory another user owns registers nothing and releases nothing, and doctor says so', async () => {
    const dir = tempDir('warren-plugins-trust-');
    dirs.push(dir);
    const pluginsDir = join(dir, 'plugins');
    mkdirSync(pluginsDir, { mode: 0o700 });
    chownSync(pluginsDir, uid, uid);
    const agent = await agentWith(pluginsDir);
    await addUnderPrefix(agent, 'owned-dir-victim');
    // Planted by that user (root makes it here; the directory is what is under test).
    const adapter = greedyAdapter(join(pluginsDir, 'planted.sock'), 'planted');
    adapters.push(adapter);
    await adapter.start();
    const status = await waitFor('the registry to judge the planted socket', async () => {
      const s = await plugins(agent);
      // Judged one way or the other: refused or retrying with a reason, or (what must not be) registered.
      return s.plugins.some((p) => p.socket === adapter.socket && (p.error !== undefined || p.state === 'registered'))
        ? s
        : undefined;
    });
    assert.equal(status.registered, 0, JSON.stringify(status));
    assert.match(status.problem ?? '', new RegExp(`plugins directory ${pluginsDir} belongs to uid ${uid}`));
    assert.match(status.plugins[0]?.error ?? '', /belongs to uid/);
    assert.equal(status.registered, 0);
    assert.equal(adapter.lists, 0, 'the planted adapter was never asked anything');
    assert.deepEqual(adapter.notified, []);
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['owned-dir-victim'],
    );
    await waitFor('the distrust in the agent log', () =>
      /the plugins directory is not trusted/.test(agent.log()) ? true : undefined,
    );

    const doctor = await run(process.execPath, [WARREN_BIN, 'doctor', '--socket', agent.socket, '--json']);
    const findings = (JSON.parse(doctor.stdout) as { findings: Finding[] }).findings;
    const finding = findings.find((f) => f.id === 'plugins-dir-untrusted');
    assert.equal(finding?.severity, 'error', doctor.stdout);
    assert.match(finding?.detail ?? '', new RegExp(`belongs to uid ${uid}`));
  });

  it('a socket another user owns, in a good plugins directory, is refused and releases nothing', async () => {
    const dir = tempDir('warren-plugins-trust-');
    dirs.push(dir);
    const pluginsDir = join(dir, 'plugins');
    const staging = join(dir, 'staging');
    mkdirSync(pluginsDir, { mode: 0o700 });
    mkdirSync(staging, { mode: 0o700 });
    const agent = await agentWith(pluginsDir);
    await addUnderPrefix(agent, 'owned-socket-victim');
    // Bound and given to that user before it appears in the directory, so the registry never sees
    // it as root's.
    const adapter = greedyAdapter(join(staging, 'theirs.sock'), 'theirs');
    adapters.push(adapter);
    await adapter.start();
    lchownSync(adapter.socket, uid, uid);
    const socket = join(pluginsDir, 'theirs.sock');
    renameSync(adapter.socket, socket);
    const entry = await waitFor('the registry to judge the socket', async () =>
      (await plugins(agent)).plugins.find(
        (p) => p.socket === socket && (p.state === 'refused' || p.state === 'registered'),
      ),
    );
    assert.equal(entry.state, 'refused', JSON.stringify(entry));
    assert.match(
      entry.error ?? '',
      new RegExp(`socket ${socket} belongs to uid ${uid}, not to root, which runs Warren`),
    );
    assert.equal(adapter.lists, 0, 'the socket was never dialed');
    assert.deepEqual(adapter.notified, []);
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['owned-socket-victim'],
    );
    // The log line is written as the refusal is made, but reaches this process through the agent's
    // stderr pipe after the status may already say so: waited for, with a deadline.
    await waitFor('the refusal in the agent log', () => (/plugin refused/.test(agent.log()) ? true : undefined));
  });
});
