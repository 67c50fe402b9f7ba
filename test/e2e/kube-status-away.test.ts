/**
 * `warren status` while the API server is away (issue 34: it failed whole, "TRY_AGAIN … could not be
 * reached (list live nodes)", on every agent while they were ready and serving): a real agent on
 * store `kubernetes` against the fake API server, its listening socket closed (ECONNREFUSED, as
 * while an apiserver restarts). The command an operator runs during an outage shows what the agent
 * knows — itself, its store, readiness, its allocations and blocks — and says plainly what it could
 * not read now and why, with the live nodes as last read and when. It exits 0 while the agent is
 * ready: being ready is what the exit status says (the agent still serves the blocks it holds), and
 * the outage is on its own line.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { cniCall, startKubeNode } from '../helpers/kube-store.ts';
import { CHILD_PATH, WARREN_BIN, run } from '../helpers/processes.ts';

const RANGE = { range: '10.254.0.0/24', block_size: 26 };

describe('warren status with the API server away', () => {
  let api: FakeKubeApi;
  let agent: AgentHandle;

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    agent = await startKubeNode(api, 'st1');
    const added = await cniCall('ADD', agent, 'statusaway', RANGE, 'c1');
    assert.equal(added.code, 0, added.stdout);
  });
  after(async () => {
    await agent?.kill();
    await api?.stop();
  });

  const status = (...args: string[]) =>
    run(process.execPath, [WARREN_BIN, 'status', ...args, '--socket', agent.socket], {
      env: { ...process.env, PATH: CHILD_PATH },
    });

  it("shows the agent's state and marks the live nodes it could not read, exit 0 while ready", async () => {
    const before = JSON.parse((await status('--json')).stdout) as AgentStatus;
    assert.deepEqual(before.cluster?.liveNodes, ['st1']);
    assert.equal(before.cluster?.unread, undefined);

    await api.setUnavailable(true, 'refuse');
    const text = await status();
    assert.equal(text.code, 0, `status exits 0 while the agent is ready: ${text.stdout}${text.stderr}`);
    assert.match(text.stdout, /^node: +st1$/m);
    assert.match(text.stdout, /^ready: +yes$/m);
    assert.match(text.stdout, /^allocations: 1$/m);
    assert.match(
      text.stdout,
      /^cluster: +NOT READ NOW: the live nodes could not be read: .*(API server|Kubernetes API).*$/m,
      'says what it could not read, and why',
    );
    assert.match(
      text.stdout,
      /^cluster: +as last read at \S+: 1 nodes alive \(st1\); this node announced, holding 1 blocks$/m,
    );

    const away = JSON.parse((await status('--json')).stdout) as AgentStatus;
    assert.equal(away.ready, true);
    assert.deepEqual(away.cluster?.liveNodes, ['st1'], 'as last read');
    assert.ok(away.cluster?.liveNodesReadAt !== undefined, 'dated');
    assert.match(String(away.cluster?.unread), /could not be read/);

    await api.setUnavailable(false);
    const back = JSON.parse((await status('--json')).stdout) as AgentStatus;
    assert.equal(back.cluster?.unread, undefined, 'read again once the server is back');
    assert.equal(back.cluster?.liveNodesReadAt, undefined);
  });
});
