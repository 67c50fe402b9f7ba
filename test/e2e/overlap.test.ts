/**
 * Overlapping ranges through the real plugin executable and agent: an address is unique within a
 * network_name whatever the ranges of its configs say (issue: two configs with 10.232.2.0/24 and
 * 10.232.2.0/25 each handed out 10.232.2.1); both are served (issue 37), the /25 from the /24's pool.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';

describe('overlapping ranges', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it('serves a /24 and a /25 of one network, never handing out 10.232.2.1 twice', async () => {
    const agent = await startAgent();
    agents.push(agent);
    const conf = (name: string, ipam: Record<string, unknown>) => ({
      cniVersion: '1.0.0',
      name,
      ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), ...ipam },
    });
    const add = (id: string, config: unknown) =>
      warren({ command: 'ADD', containerID: id, netns: '/var/run/netns/x', ifname: 'eth0', config });
    const first = await add('o1', conf('wide', { range: '10.232.2.0/24' }));
    assert.deepEqual(resultAddresses(first), ['10.232.2.1']);
    // The /25 lies inside the /24 used first: served from it (issue 37), never 10.232.2.1 again.
    const second = await add('o2', conf('narrow', { range: '10.232.2.0/25' }));
    assert.deepEqual(resultAddresses(second), ['10.232.2.2'], second.stdout);
    assert.match(second.stdout, /10\.232\.2\.2\/25/, 'the result carries the /25’s own prefix');
    // CHECK finds the /25's address in the /24's pool, where it lives.
    const narrowConf = conf('narrow', { range: '10.232.2.0/25' });
    const check = await warren({
      command: 'CHECK',
      containerID: 'o2',
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      config: { ...narrowConf, prevResult: second.json },
    });
    assert.equal(check.code, 0, check.stdout + check.stderr);

    const one = await add(
      'o3',
      conf('both', {
        ipRanges: [{ range: '10.232.4.0/23' }, { range: '10.232.5.0/24' }],
        enable_overlapping_ranges: true,
      }),
    );
    assert.equal(one.json?.code, 7, `one config whose ranges overlap: ${one.stdout}`);
    assert.match(String(one.json?.msg), /10\.232\.5\.0\/24/);
    assert.match(String(one.json?.msg), /10\.232\.4\.0\/23/);

    const stored = await agent.allocations();
    assert.equal(new Set(stored.map((a) => a.address)).size, stored.length, 'no address is held twice');
  });
});
