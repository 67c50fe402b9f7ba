/**
 * Many plugin processes at once, and the agent killed in the middle of them: no duplicate, no
 * failure while the agent is up, and every address a successful ADD reported survives a kill -9.
 * Every call goes through Warren as installed (helpers/cni.ts): the native forwarder, which hands
 * the calls that meet a dead agent to the TypeScript plugin beside it.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { bounded } from '../helpers/processes.ts';

describe('concurrent plugin processes', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it('serves 50 ADDs from 50 plugin processes at once with no duplicate and no failure', async () => {
    const agent = await startAgent();
    agents.push(agent);
    const conf = {
      cniVersion: '1.1.0',
      name: 'burst',
      ipam: {
        type: 'warren',
        socket: agent.socket,
        ipRanges: [{ range: '10.214.0.0/24' }, { range: 'fd00:214::/64' }],
      },
    };
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        warren({
          command: 'ADD',
          containerID: `burst-${i}`,
          netns: `/var/run/netns/burst-${i}`,
          ifname: 'eth0',
          config: conf,
        }),
      ),
    );
    const failures = replies.filter((r) => r.code !== 0);
    assert.deepEqual(
      failures.map((f) => f.stdout),
      [],
    );
    const addresses = replies.flatMap(resultAddresses);
    assert.equal(addresses.length, 100);
    assert.equal(new Set(addresses).size, 100, 'no address twice');
    const stored = await agent.allocations('?network=burst');
    assert.equal(stored.length, 100);
    for (const [i, r] of replies.entries()) {
      const mine = stored
        .filter((a) => a.containerID === `burst-${i}`)
        .map((a) => a.address)
        .sort();
      assert.deepEqual(mine, resultAddresses(r).sort());
    }
  });

  it('keeps every reported allocation across a SIGKILL in the middle of a burst of 200 ADDs, with no duplicate', async () => {
    let agent = await startAgent();
    agents.push(agent);
    const dir = agent.dir;
    const conf = (socket: string) => ({
      cniVersion: '1.0.0',
      name: 'crash',
      ipam: { type: 'warren', socket, range: '10.215.0.0/22' },
    });
    const socket = agent.socket;
    const total = 200;
    let succeeded = 0;
    let killed: Promise<void> | undefined;
    // 200 ADDs, 50 in flight; the agent dies once a quarter of them have succeeded.
    const replies: Array<CniReply & { id: string }> = await bounded(
      50,
      Array.from({ length: total }, (_, i) => async () => {
        const id = `crash-${i}`;
        const reply = await warren({
          command: 'ADD',
          containerID: id,
          netns: `/var/run/netns/${id}`,
          ifname: 'eth0',
          config: conf(socket),
        });
        if (reply.code === 0) succeeded += 1;
        if (succeeded >= total / 4 && killed === undefined) killed = agent.kill();
        return { ...reply, id };
      }),
    );
    await killed;
    assert.ok(killed !== undefined, 'the agent was killed during the burst');
    const failed = replies.filter((r) => r.code !== 0);
    assert.ok(failed.length > 0, 'some ADDs met a dead agent');
    for (const f of failed) assert.equal(f.json?.code, 11, `a failed ADD says try again later: ${f.stdout}`);

    agent = await startAgent({ dir });
    agents.push(agent);
    const stored = await agent.allocations('?network=crash');
    const byAddress = new Map<string, string>();
    for (const a of stored) {
      assert.equal(byAddress.has(a.address), false, `${a.address} allocated twice`);
      byAddress.set(a.address, a.containerID);
    }
    const ok = replies.filter((r) => r.code === 0);
    for (const r of ok) {
      const [address] = resultAddresses(r);
      assert.equal(byAddress.get(address as string), r.id, `${r.id} keeps ${address} after the crash`);
    }
    // A failed ADD may have committed before the agent died; its retry gets that same address.
    for (const f of failed.slice(0, 10)) {
      const retry = await warren({
        command: 'ADD',
        containerID: f.id,
        netns: `/var/run/netns/${f.id}`,
        ifname: 'eth0',
        config: conf(agent.socket),
      });
      assert.equal(retry.code, 0, retry.stdout);
      const [address] = resultAddresses(retry);
      const before = stored.find((a) => a.containerID === f.id);
      if (before !== undefined) assert.equal(address, before.address);
    }
    const after = await agent.allocations('?network=crash');
    assert.equal(new Set(after.map((a) => a.address)).size, after.length);
  });
});
