/**
 * Issue 36's churn writes, through a real agent with the default publication settings (16
 * addresses announced, 600 s settle): once its block is published, ADDs and DELs spread over time
 * write nothing to the API server (the addresses they take were announced, their releases settle),
 * and a clean stop publishes what was pending, so the published view names every container then.
 * Counted by the fake API server itself. The in-process count over 200 ADDs and DELs on an injected
 * clock is test/store/tiered/publish-ahead.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { cniCall, kubeStoreArgs, observeTier, publishedBlocks } from '../helpers/kube-store.ts';
import { waitFor } from '../helpers/processes.ts';

const NODE = 'pahead1';
const IPAM = { range: '10.79.0.0/24', block_size: 26 };
/** The agent's own defaults (test/helpers/agent.ts sets the test agents' otherwise). */
const DEFAULTS = { WARREN_PUBLISH_SETTLE: '600', WARREN_PUBLISH_AHEAD: '16' };

const writes = (api: FakeKubeApi): number => {
  const counts = api.requestCounts();
  return (counts['create warrenblockpublications'] ?? 0) + (counts['update warrenblockpublications'] ?? 0);
};

describe('an agent publishing with the default settings (issue 36)', () => {
  let api: FakeKubeApi | undefined;
  let agent: AgentHandle | undefined;
  after(async () => {
    await agent?.kill();
    await api?.stop();
  });

  it('writes no publication for ADDs and DELs of announced addresses, and publishes them when it stops', async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    api.createNode(NODE);
    agent = await startAgent({ args: kubeStoreArgs(api, NODE), env: DEFAULTS });
    const add = async (id: string) =>
      assert.equal((await cniCall('ADD', agent as AgentHandle, 'ahead', IPAM, id)).code, 0);
    await add('first');
    const observer = await observeTier(api);
    const announced = async () => (await publishedBlocks(observer, '10.79.0.0/24')).flatMap((b) => b.ahead ?? []);
    const ahead = await waitFor('the block published', async () => {
      const found = await announced();
      return found.length > 0 ? found : undefined;
    });
    assert.equal(ahead.length, 16);
    api.clearRequests();

    for (const id of ['c1', 'c2', 'c3', 'c4', 'c5']) await add(id);
    assert.equal((await cniCall('DEL', agent, 'ahead', IPAM, 'c2')).code, 0);
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // a publication run (every 2 s) has passed
    assert.equal(writes(api), 0, JSON.stringify(api.requestCounts()));

    assert.equal(await agent.stop(), 0);
    assert.equal(writes(api), 1, 'the stop published the block once');
    const named = (await publishedBlocks(observer, '10.79.0.0/24')).flatMap((b) =>
      b.allocations.map((a) => a.containerID),
    );
    assert.deepEqual(named.sort(), ['c1', 'c3', 'c4', 'c5', 'first']);
    await observer.close();
  });
});
