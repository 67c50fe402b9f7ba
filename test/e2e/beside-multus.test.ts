/**
 * Warren beside Multus, as a real agent and the real CLI see it: Multus' config is the node's
 * primary and Warren is the IPAM of the attachment definitions, so nothing about the node's CNI
 * config is wrong. With the config manager off (deploy/overlays/multus), `warren status` shows
 * nothing about it and `warren doctor` finds no missing Warren config; with it on, the manager
 * writes nothing, shows one line saying why and no problem (not a "stale" state and the Multus
 * file named as shadowing Warren's).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import type { Finding } from '../../src/cli/doctor/finding.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { WARREN_BIN, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';

/** Multus' thick-plugin config as its daemon writes it, delegating to the cluster network's. */
const MULTUS = {
  cniVersion: '0.3.1',
  name: 'multus-cni-network',
  type: 'multus-shim',
  logLevel: 'verbose',
  socketDir: '/run/multus/',
};
const CLUSTER_NETWORK = {
  cniVersion: '1.0.0',
  name: 'k8s-pod-network',
  plugins: [{ type: 'bridge', bridge: 'mlt0', ipam: { type: 'host-local', subnet: '10.246.0.0/24' } }],
};

describe('Warren beside Multus', () => {
  const agents: AgentHandle[] = [];
  const dirs: string[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
    for (const d of dirs) removeDir(d);
  });

  function confDir(): string {
    const dir = tempDir('warren-multus-netd-');
    dirs.push(dir);
    writeFileSync(join(dir, '00-multus.conf'), JSON.stringify(MULTUS));
    writeFileSync(join(dir, '10-cluster.conflist'), JSON.stringify(CLUSTER_NETWORK));
    return dir;
  }
  const cli = (agent: AgentHandle, ...args: string[]) =>
    run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket]);

  it('shows nothing about the CNI config as a problem with the config manager off', async () => {
    const dir = confDir();
    const agent = await startAgent({ args: ['--manage-cni-config', 'off', '--cni-conf-dir', dir] });
    agents.push(agent);
    const text = await cli(agent, 'status');
    assert.equal(text.code, 0, text.stderr);
    assert.doesNotMatch(text.stdout, /problem|stale/i, text.stdout);
    const doctor = await cli(agent, 'doctor', '--json', '--cni-conf-dir', dir);
    const findings = JSON.parse(doctor.stdout) as { findings: Finding[] };
    const ids = findings.findings.map((f) => `${f.severity}:${f.id}`);
    assert.ok(ids.includes('ok:beside-multus'), ids.join(' '));
    assert.ok(!ids.some((id) => id.endsWith(':no-warren-config')), ids.join(' '));
  });

  it('with the config manager on, writes nothing and says why in one line, with no problem', async () => {
    const dir = confDir();
    const agent = await startAgent({ args: ['--manage-cni-config', 'on', '--cni-conf-dir', dir] });
    agents.push(agent);
    const status = async () => JSON.parse((await cli(agent, 'status', '--json')).stdout) as AgentStatus;
    const c = await waitFor('the config manager to look', async () => {
      const s = (await status()).cniConfig;
      return s !== undefined && s.state !== 'waiting' ? s : undefined;
    });
    assert.equal(c.state, 'beside-multus');
    assert.equal(c.problem, undefined);
    assert.equal(c.shadowedBy, undefined);
    assert.deepEqual(readdirSync(dir).sort(), ['00-multus.conf', '10-cluster.conflist']);
    assert.equal(existsSync(join(dir, '00-warren.conflist')), false);
    const text = (await cli(agent, 'status')).stdout;
    assert.match(text, /cni config: {2}beside Multus: .*00-multus\.conf is the node's primary/);
    assert.doesNotMatch(text, /problem|stale/i, text);
  });
});
