/**
 * The config manager in a real agent process: `--manage-cni-config on` writes Warren's file into
 * the conf dir with the agent's socket in it, so the installed plugin reaches this agent with the
 * generated config as the runtime would hand it over; the readiness indicator turns STATUS to 50
 * and ADD to 11 with the reason while the config stays first (fail closed); `warren status` shows
 * the primary, the file, the last write and the problem; odd files in the conf dir (a FIFO, a link
 * to /dev/zero) neither block nor grow the agent.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { WARREN_BIN, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';

const PRIMARY = {
  cniVersion: '1.1.0',
  name: 'cfgnet',
  plugins: [{ type: 'bridge', bridge: 'cfg0', isGateway: true, ipam: { type: 'host-local', subnet: '10.242.0.0/24' } }],
};

async function status(agent: AgentHandle): Promise<AgentStatus> {
  const r = await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', agent.socket]);
  return JSON.parse(r.stdout) as AgentStatus;
}

describe('an agent that manages the CNI config', () => {
  const confDir = tempDir('warren-netd-');
  const readyDir = tempDir('warren-ready-');
  const indicator = join(readyDir, 'ready');
  let agent: AgentHandle | undefined;
  after(async () => {
    await agent?.kill();
    removeDir(confDir);
    removeDir(readyDir);
  });

  it('writes a config whose main plugin reaches this agent through the installed plugin', async () => {
    writeFileSync(indicator, '');
    writeFileSync(join(confDir, '10-cfg.conflist'), JSON.stringify(PRIMARY));
    agent = await startAgent({
      args: [
        '--manage-cni-config',
        'on',
        '--cni-conf-dir',
        confDir,
        '--readiness-indicator-file',
        indicator,
        '--cleanup-config-on-exit',
        'on',
      ],
    });
    const output = join(confDir, '00-warren.conflist');
    await waitFor('the generated config', () => (existsSync(output) ? true : undefined));
    const conf = JSON.parse(readFileSync(output, 'utf8')) as {
      cniVersion: string;
      name: string;
      plugins: Array<Record<string, unknown>>;
    };
    assert.equal(conf.cniVersion, '1.0.0', 'capped at --cni-version-max (default 1.0.0)');
    const ipam = conf.plugins[0]?.ipam as Record<string, unknown>;
    assert.equal(ipam.socket, agent.socket, "the agent's own socket, so the plugin finds it");
    // A range taken over from host-local is served once its reservations are imported (issue 24).
    await waitFor('the import', async () =>
      (await status(agent as AgentHandle)).cniConfig?.takeover?.[0]?.imported === true ? true : undefined,
    );
    // As libcni hands the main plugin over: its object with the list's name and version.
    const add = await warren({
      command: 'ADD',
      containerID: 'cfg1',
      netns: '/x',
      ifname: 'eth0',
      config: { ...conf.plugins[0], name: conf.name, cniVersion: conf.cniVersion },
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.match(
      JSON.stringify(add.json),
      /10\.242\.0\.2\/24/,
      'the first address after the gateway host-local implied',
    );
    const s = await status(agent);
    assert.equal(s.cniConfig?.state, 'current');
    assert.equal(s.cniConfig?.primary, join(confDir, '10-cfg.conflist'));
    assert.equal(s.cniConfig?.lastWrite?.from, join(confDir, '10-cfg.conflist'));
    const text = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket]);
    assert.match(
      text.stdout,
      /cni config: {2}current: .*00-warren\.conflist from .*10-cfg\.conflist \(network cfgnet\), cniVersion at most 1\.0\.0/,
    );
    assert.match(text.stdout, /last write: {2}\S+ from .*10-cfg\.conflist/);
  });

  // Changed for issue 24: the config used to be removed while the indicator was missing, which let
  // the primary's IPAM hand out Warren's addresses; it now stays first and fails closed.
  it('answers STATUS 50 and ADD 11 naming the missing readiness indicator, and keeps its config first meanwhile', async () => {
    assert.ok(agent !== undefined);
    const output = join(confDir, '00-warren.conflist');
    const conf = {
      cniVersion: '1.1.0',
      name: 'cfgnet',
      ipam: { type: 'warren', socket: agent.socket, range: '10.242.0.0/24', gateway: '10.242.0.1' },
    };
    unlinkSync(indicator);
    await waitFor('not ready', async () =>
      (await status(agent as AgentHandle)).cniConfig?.state === 'not-ready' ? true : undefined,
    );
    assert.ok(existsSync(output), "Warren's config stays: removing it would hand the primary's IPAM Warren's range");
    const reason = `not ready: readiness indicator ${indicator} is missing`;
    const st = await warren({ command: 'STATUS', config: conf });
    assert.notEqual(st.code, 0);
    assert.deepEqual(st.json, { cniVersion: '1.1.0', code: 50, msg: reason });
    const add = await warren({ command: 'ADD', containerID: 'cfg2', netns: '/x', ifname: 'eth0', config: conf });
    assert.notEqual(add.code, 0);
    assert.deepEqual(add.json, { cniVersion: '1.1.0', code: 11, msg: reason });
    const s = await status(agent);
    assert.equal(s.ready, false);
    assert.equal(s.notReady, reason);
    assert.equal(s.cniConfig?.state, 'not-ready');
    const text = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket]);
    assert.equal(text.code, 1, 'status exits 1 while not ready');
    assert.match(text.stdout, /readiness: {3}.* MISSING/);

    writeFileSync(indicator, '');
    await waitFor('ready again', async () =>
      (await status(agent as AgentHandle)).cniConfig?.state === 'current' ? true : undefined,
    );
    assert.equal((await warren({ command: 'STATUS', config: conf })).code, 0);
    assert.equal(
      (await warren({ command: 'ADD', containerID: 'cfg2', netns: '/x', ifname: 'eth0', config: conf })).code,
      0,
    );
  });

  // Changed for issue 24: a clean stop used to remove the config whatever Warren held.
  it('keeps its config on a clean stop with --cleanup-config-on-exit on while Warren holds addresses of its network', async () => {
    assert.ok(agent !== undefined);
    assert.equal(await agent.stop(), 0);
    agent = undefined;
    assert.ok(
      existsSync(join(confDir, '00-warren.conflist')),
      "the primary's IPAM would hand out cfg1's and cfg2's addresses again",
    );
    assert.ok(existsSync(join(confDir, '10-cfg.conflist')));
  });

  it('starts and serves with a FIFO and a link to /dev/zero named like configs in the conf dir, reporting both', async () => {
    execFileSync('mkfifo', [join(confDir, '05-x.conf')]);
    symlinkSync('/dev/zero', join(confDir, '06-zero.conf'));
    try {
      agent = await startAgent({
        args: ['--manage-cni-config', 'on', '--cni-conf-dir', confDir, '--readiness-indicator-file', indicator],
      });
      const s = await status(agent);
      assert.equal(s.cniConfig?.state, 'stale');
      assert.match(s.cniConfig?.problem ?? '', /05-x\.conf: cannot be read \(is a FIFO, not a regular file\)/);
      const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${agent.pid}/status`, 'utf8'))?.[1]);
      assert.ok(rss < 1024 * 1024, `the agent stays small (${rss} kB)`);
    } finally {
      unlinkSync(join(confDir, '05-x.conf'));
      unlinkSync(join(confDir, '06-zero.conf'));
    }
  });
});
