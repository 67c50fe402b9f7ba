/**
 * The command line against a running agent: human output, --json, release, and clear failures.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { WARREN_BIN, run } from '../helpers/processes.ts';

describe('warren CLI', () => {
  let agent: AgentHandle;
  const cli = (...args: string[]) => run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket]);

  before(async () => {
    agent = await startAgent();
    const conf = { cniVersion: '1.0.0', name: 'clinet', ipam: { type: 'warren', socket: agent.socket, range: '10.219.0.0/28', exclude: ['10.219.0.8/29'] } };
    for (const id of ['cli-a', 'cli-b', 'cli-c']) {
      const r = await warren({ command: 'ADD', containerID: id, netns: '/x', ifname: 'eth0', args: `K8S_POD_NAMESPACE=team;K8S_POD_NAME=${id}-pod;K8S_POD_UID=uid-${id}`, config: conf });
      assert.equal(r.code, 0, r.stdout);
    }
  });
  after(async () => {
    await agent.stop();
  });

  it('shows status', async () => {
    const r = await cli('status');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /ready:\s+yes/);
    assert.match(r.stdout, /allocations: 3/);
    const json = JSON.parse((await cli('status', '--json')).stdout);
    assert.equal(json.node, 'test-node');
    assert.equal(json.allocations, 3);
  });

  it('shows pool utilisation', async () => {
    const r = await cli('pools');
    assert.match(r.stdout, /10\.219\.0\.0\/28\s+10\.219\.0\.1-10\.219\.0\.14\s+7\s+3\s+0\s+42\.9%/);
    const [pool] = JSON.parse((await cli('pools', '--json')).stdout);
    assert.deepEqual([pool.pool, pool.capacity, pool.allocated], ['10.219.0.0/28', '7', 3]);
  });

  it('lists and filters allocations', async () => {
    const all = JSON.parse((await cli('allocations', '--json')).stdout);
    assert.equal(all.length, 3);
    const one = JSON.parse((await cli('allocations', '--pod', 'cli-b-pod', '--json')).stdout);
    assert.deepEqual(one.map((a: { containerID: string; podUID: string }) => [a.containerID, a.podUID]), [['cli-b', 'uid-cli-b']]);
    const text = (await cli('allocations', '--namespace', 'team')).stdout;
    assert.match(text, /^ADDRESS\s+POOL/);
    assert.match(text, /team\/cli-a-pod/);
  });

  it('releases by address and by container, and says when there is nothing to release', async () => {
    const [a] = JSON.parse((await cli('allocations', '--container', 'cli-a', '--json')).stdout);
    const byAddress = await cli('release', '--address', a.address);
    assert.match(byAddress.stdout, new RegExp(`released ${a.address.replace(/\./g, '\\.')} from 10\\.219\\.0\\.0/28 \\(container cli-a`));
    const byContainer = JSON.parse((await cli('release', '--container', 'cli-b', '--json')).stdout);
    assert.equal(byContainer.released.length, 1);
    assert.match((await cli('release', '--container', 'cli-b')).stdout, /nothing to release/);
    assert.equal(JSON.parse((await cli('allocations', '--json')).stdout).length, 1);
  });

  it('exits 2 on a usage error and 1 when the agent is down', async () => {
    const bad = await run(process.execPath, [WARREN_BIN, 'frobnicate']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown command "frobnicate"/);
    const noFlag = await cli('release');
    assert.equal(noFlag.code, 2);
    const down = await run(process.execPath, [WARREN_BIN, 'status', '--socket', `${agent.dir}/none.sock`]);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /not reachable.*\n.*is the agent running/);
  });
});
