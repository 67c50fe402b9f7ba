/**
 * A range shared by two nodes, filled: two real agents on store `kubernetes` (the fake API server),
 * driven through the installed plugin, sharing a /27 split into two blocks of 15. Issue 34 saw
 * "pool … has no free address (14 allocated)" when 30 of 30 were in use across two nodes, and
 * `warren pools` showing 50% used while the node could allocate nothing. The refusal and `warren
 * pools` say this node's share and the range across the cluster, as the nodes published it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PoolReport } from '../../src/api/protocol.ts';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { cniCall, observeTier, publishedBlocks, startKubeNode } from '../helpers/kube-store.ts';
import { CHILD_PATH, WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const SHARED = { range: '10.249.0.0/27', block_size: 28 };
const POOL = '10.249.0.0/27';

describe('a range shared by two nodes, full', () => {
  let api: FakeKubeApi;
  let agents: AgentHandle[] = [];
  let observer: ClusterTier;

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    agents = [await startKubeNode(api, 'fa'), await startKubeNode(api, 'fb')];
    observer = await observeTier(api);
  });
  after(async () => {
    for (const agent of agents) await agent.kill();
    await observer?.close();
    await api?.stop();
  });

  const pools = (agent: AgentHandle, ...args: string[]) =>
    run(process.execPath, [WARREN_BIN, 'pools', ...args, '--socket', agent.socket], {
      env: { ...process.env, PATH: CHILD_PATH },
    });

  it("refuses the 31st ADD saying this node's share and the range across the cluster, as warren pools does", async () => {
    const [fa, fb] = agents as [AgentHandle, AgentHandle];
    for (const [agent, name] of [
      [fa, 'fa'],
      [fb, 'fb'],
    ] as const) {
      for (let i = 0; i < 15; i++) {
        const added = await cniCall('ADD', agent, 'shared', SHARED, `${name}-${i}`);
        assert.equal(added.code, 0, `ADD ${i + 1} on ${name}: ${added.stdout}`);
      }
    }
    await waitFor('both nodes published 15 each', async () => {
      const blocks = await publishedBlocks(observer, POOL);
      const total = blocks.reduce((n, b) => n + b.counts.allocated, 0);
      return total === 30 && new Set(blocks.map((b) => b.node)).size === 2 ? true : undefined;
    });

    const refused = await cniCall('ADD', fa, 'shared', SHARED, 'fa-16th');
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(
      String(refused.json?.msg),
      new RegExp(
        `^pool ${POOL.replaceAll('.', '\\.')} has no free address on node fa \\(15 allocated here, 0 resting ` +
          'after release\\); across the cluster 30 of 30 allocated, 0 resting \\(fa 15, fb 15\\), as published$',
      ),
      refused.stdout,
    );

    const text = await pools(fa);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /^10\.249\.0\.0\/27 +10\.249\.0\.1-10\.249\.0\.30 +30 +15 +0 +50\.0% +30\/30 \(100\.0%\) on 2 nodes, 0 free +1 blocks of \/28$/m,
      `this node's half and the full range, side by side:\n${text.stdout}`,
    );
    assert.match(text.stdout, /CLUSTER is the range across every node/);
    const [range] = (JSON.parse((await pools(fa, '--json')).stdout) as PoolReport[]).filter((p) => p.pool === POOL);
    assert.deepEqual(range?.cluster, {
      allocated: 30,
      resting: 0,
      lent: 0,
      free: '0',
      utilisation: 1,
      nodes: 2,
      blocks: 2,
      byNode: [
        { node: 'fa', blocks: 1, allocated: 15, resting: 0, borrowed: 0 },
        { node: 'fb', blocks: 1, allocated: 15, resting: 0, borrowed: 0 },
      ],
    });
    const shares = await pools(fa, '--by-node');
    assert.match(
      shares.stdout,
      /^10\.249\.0\.0\/27 by node:\nNODE +BLOCKS +ALLOCATED +RESTING +BORROWED\nfa +1 +15 +0 +0\nfb +1 +15 +0 +0$/m,
    );
  });
});
