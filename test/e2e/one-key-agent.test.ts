/**
 * The cluster benchmark's second layout, each range in one etcd key, comes from its own agent
 * entry (bench/one-key-agent.ts), not from a flag of `warren agent` (issue 25): the benchmark
 * still measures what it says, and the agent ships no setting only the benchmark uses.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { REPO, WARREN_BIN, run } from '../helpers/processes.ts';

type Pools = Array<{ pool: string; blockPrefix?: number }>;

async function poolsAfterOneAdd(agent: AgentHandle): Promise<Pools> {
  const config = { cniVersion: '1.1.0', name: 'layout', ipam: { type: 'warren', range: '10.241.0.0/16' } };
  const body = { command: 'ADD', containerID: 'c1', netns: '/var/run/netns/c1', ifname: 'eth0', config };
  const added = await requestJson({ socket: agent.socket, method: 'POST', path: '/v1/cni', body, timeoutMs: 60_000 });
  assert.equal((added.body as { kind?: string }).kind, 'result', JSON.stringify(added.body));
  return (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/pools' })).body as Pools;
}

describe("the cluster benchmark's one-key agent", () => {
  let etcd: EtcdCluster;
  const agents: AgentHandle[] = [];
  const start = async (prefix: string, entry?: readonly string[]): Promise<AgentHandle> => {
    const args = ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(','), '--etcd-prefix', prefix];
    args.push('--metrics-address', '');
    const agent = await startAgent({ args, ...(entry === undefined ? {} : { entry }) });
    agents.push(agent);
    return agent;
  };

  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    for (const agent of agents) await agent.kill();
    await etcd?.stop();
  });

  it('keeps a range in one key, where warren agent splits it into blocks', async () => {
    const split = await poolsAfterOneAdd(await start('/layout-blocks/'));
    assert.ok(
      split.some((p) => p.pool.includes('#')),
      `warren agent claims a block: ${JSON.stringify(split)}`,
    );
    const whole = await poolsAfterOneAdd(await start('/layout-one-key/', [join(REPO, 'bench', 'one-key-agent.ts')]));
    assert.deepEqual(
      whole.map((p) => [p.pool, p.blockPrefix]),
      [['10.241.0.0/16', undefined]],
    );
  });

  it('is the only way to it: warren agent refuses --blocks as a usage error', async () => {
    // With --help: were the flag taken, the agent would print its usage, not start.
    const refused = await run(process.execPath, [WARREN_BIN, 'agent', '--blocks', 'off', '--help']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /--blocks/);
  });
});
