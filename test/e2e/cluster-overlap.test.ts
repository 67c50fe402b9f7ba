/**
 * Overlapping ranges of one network_name across nodes, end to end (issue 10, defect #1; issue 37:
 * nested ranges are served from the pools that cover them, not refused): two real agents as two
 * nodes on one real etcd, driven through the real plugin executable. Each agent
 * admits a range on its own and caches that; an address must still be unique within the
 * network_name, whichever node's config names which range, and whenever each node first used it.
 * The agents run with their metrics on, as the tests' agents do, so the store they use is the
 * measured one wrapped around etcd. Two tiers (`--store etcd`): each node's addresses are in its own
 * file, and a drained range holds its claimed block until the node gives it back (--block-grace).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';

describe('overlapping ranges on two nodes sharing etcd', () => {
  let etcd: EtcdCluster;
  const agents: AgentHandle[] = [];

  before(async () => {
    etcd = await startEtcd(1);
    for (const name of ['n1', 'n2']) {
      const args = [
        '--node-name',
        name,
        '--store',
        'etcd',
        '--etcd-endpoints',
        etcd.endpoints.join(','),
        '--etcd-prefix',
        '/cluster-overlap/',
        '--block-grace',
        '0',
        '--upkeep-interval',
        '1',
      ];
      agents.push(await startAgent({ args }));
    }
  });
  after(async () => {
    for (const a of agents) await a.kill();
    await etcd?.stop();
  });

  const call = (
    command: 'ADD' | 'DEL',
    agent: AgentHandle,
    id: string,
    name: string,
    ipam: Record<string, unknown>,
  ): Promise<CniReply> =>
    warren({
      command,
      containerID: id,
      netns: `/var/run/netns/${id}`,
      ifname: 'eth0',
      config: {
        cniVersion: '1.0.0',
        name,
        ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), ...ipam },
      },
    });
  it('serves a range inside the range another node drained from that range’s pool, never handing out 10.232.2.1 twice', async () => {
    const [n1, n2] = agents as [AgentHandle, AgentHandle];
    const wide = { range: '10.232.2.0/24' };
    const narrow = { range: '10.232.2.0/25' };
    const first = await call('ADD', n1, 'o1', 'wide', wide);
    assert.deepEqual(resultAddresses(first), ['10.232.2.1'], first.stdout);
    assert.equal((await call('DEL', n1, 'o1', 'wide', wide)).code, 0);
    // The /25 of the same (unnamed) network_name lies inside the /24 admitted first: served from it.
    const second = await call('ADD', n2, 'o2', 'narrow', narrow);
    assert.equal(second.code, 0, second.stdout);
    const [inner] = resultAddresses(second);
    assert.match(inner ?? '', /^10\.232\.2\.([1-9]|[1-9]\d|1[01]\d|12[0-6])$/, 'inside the /25');
    assert.ok(
      (await n2.allocations()).some((a) => a.address === inner && a.pool.startsWith('10.232.2.0/24#')),
      'held in a block of the /24',
    );
    const third = await call('ADD', n1, 'o3', 'wide', wide);
    assert.equal(third.code, 0, third.stdout);
    assert.notEqual(resultAddresses(third)[0], inner);
  });

  it('of two nodes first using nested ranges at once, serves both', async () => {
    const [n1, n2] = agents as [AgentHandle, AgentHandle];
    for (let round = 0; round < 5; round++) {
      const network_name = `race-${round}`;
      const [a, b] = await Promise.all([
        call('ADD', n1, `r${round}-a`, 'wide', { range: '10.232.4.0/24', network_name }),
        call('ADD', n2, `r${round}-b`, 'narrow', { range: '10.232.4.0/25', network_name }),
      ]);
      assert.equal(a.code, 0, `round ${round}: ${a.stdout}`);
      assert.equal(b.code, 0, `round ${round}: ${b.stdout}`);
      assert.notEqual(resultAddresses(a)[0], resultAddresses(b)[0]);
    }
  });

  it('leaves no address held twice within a network_name', async () => {
    const held = new Map<string, string>();
    // Two tiers: each node's allocations are in its own file; both are looked at.
    const all = [
      ...(await (agents[0] as AgentHandle).allocations()),
      ...(await (agents[1] as AgentHandle).allocations()),
    ];
    for (const a of all) {
      const key = `${a.pool.split('#')[0]?.split('@')[1] ?? ''} ${a.address}`;
      assert.equal(held.get(key), undefined, `${a.address} held twice: ${held.get(key)} and ${a.pool}`);
      held.set(key, a.pool);
    }
    assert.ok(held.size >= 6, 'the earlier tests allocated');
  });
});
