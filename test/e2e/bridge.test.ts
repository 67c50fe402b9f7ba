/**
 * Warren as the IPAM of the real `bridge` plugin (containernetworking-plugins), in real network
 * namespaces: what Warren hands out is what the container's interface carries, and every CNI verb
 * behaves as the spec says. Needs root and /usr/lib/cni/bridge (installed by .ci/run).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { haveReferencePlugins, reference, resultAddresses, warren } from '../helpers/cni.ts';
import { addressesIn, bridgeName, createNetns, deleteLink, deleteNetns } from '../helpers/netns.ts';
import { isRoot } from '../helpers/processes.ts';

const skip = !isRoot() || !haveReferencePlugins() ? 'needs root and containernetworking-plugins' : false;

describe('Warren under the real bridge plugin', { skip }, () => {
  let agent: AgentHandle;
  const bridge = bridgeName();
  const namespaces: string[] = [];

  const netconf = (ipam: Record<string, unknown>, version = '1.0.0') => ({
    cniVersion: version,
    name: 'bridgenet',
    type: 'bridge',
    bridge,
    isGateway: false,
    ipMasq: false,
    ipam: { type: 'warren', socket: agent.socket, ...ipam },
  });
  const v4 = () => netconf({ range: '10.213.7.0/24', gateway: '10.213.7.1' });

  async function container(): Promise<{ name: string; path: string }> {
    const ns = await createNetns();
    namespaces.push(ns.name);
    return ns;
  }

  // GC here lists attachments after their ADDs answered: no grace is needed for ADDs in flight.
  const args = ['--gc-grace', '0'];
  before(async () => {
    agent = await startAgent({ args });
  });
  after(async () => {
    await agent?.stop();
    for (const ns of namespaces) await deleteNetns(ns);
    await deleteLink(bridge);
  });

  it('puts the address Warren allocated on the container interface, and DEL releases it', async () => {
    const ns = await container();
    const add = await reference('bridge', {
      command: 'ADD',
      containerID: 'ctr-a',
      netns: ns.path,
      ifname: 'eth0',
      config: v4(),
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const [address] = resultAddresses(add);
    assert.ok(address?.startsWith('10.213.7.'));
    assert.deepEqual(await addressesIn(ns.name, 'eth0'), [`${address}/24`]);
    const held = await agent.allocations('?containerID=ctr-a');
    assert.deepEqual(
      held.map((a) => [a.address, a.ifname, a.netns]),
      [[address, 'eth0', ns.path]],
    );

    const del = await reference('bridge', {
      command: 'DEL',
      containerID: 'ctr-a',
      netns: ns.path,
      ifname: 'eth0',
      config: v4(),
    });
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(await agent.allocations('?containerID=ctr-a'), []);
    const again = await reference('bridge', {
      command: 'DEL',
      containerID: 'ctr-a',
      netns: ns.path,
      ifname: 'eth0',
      config: v4(),
    });
    assert.equal(again.code, 0, 'a repeated DEL succeeds');
  });

  it('answers a retried ADD with the same address', async () => {
    const ns = await container();
    const first = await reference('bridge', {
      command: 'ADD',
      containerID: 'ctr-retry',
      netns: ns.path,
      ifname: 'eth0',
      config: v4(),
    });
    assert.equal(first.code, 0, first.stdout);
    const retry = await warren({
      command: 'ADD',
      containerID: 'ctr-retry',
      netns: ns.path,
      ifname: 'eth0',
      config: v4(),
    });
    assert.equal(retry.code, 0, retry.stdout);
    assert.deepEqual(resultAddresses(retry), resultAddresses(first));
    assert.equal((await agent.allocations('?containerID=ctr-retry')).length, 1);
  });

  it('gives a dual-stack container one IPv4 and one IPv6 address', async () => {
    const ns = await container();
    const conf = netconf({ ipRanges: [{ range: '10.213.8.0/24' }, { range: 'fd00:213:8::/64' }] });
    const add = await reference('bridge', {
      command: 'ADD',
      containerID: 'ctr-dual',
      netns: ns.path,
      ifname: 'eth0',
      config: conf,
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const addresses = resultAddresses(add);
    assert.equal(addresses.length, 2);
    assert.ok(addresses[0]?.startsWith('10.213.8.'));
    assert.ok(addresses[1]?.startsWith('fd00:213:8::'));
    const onInterface = await addressesIn(ns.name, 'eth0');
    assert.deepEqual(onInterface.sort(), [`${addresses[0]}/24`, `${addresses[1]}/64`].sort());
  });

  it('passes CHECK for a live container and fails it once the address is released', async () => {
    const ns = await container();
    const conf = v4();
    const add = await reference('bridge', {
      command: 'ADD',
      containerID: 'ctr-check',
      netns: ns.path,
      ifname: 'eth0',
      config: conf,
    });
    assert.equal(add.code, 0, add.stdout);
    const withPrev = { ...conf, prevResult: add.json };
    const ok = await reference('bridge', {
      command: 'CHECK',
      containerID: 'ctr-check',
      netns: ns.path,
      ifname: 'eth0',
      config: withPrev,
    });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const released = await warren({
      command: 'DEL',
      containerID: 'ctr-check',
      netns: ns.path,
      ifname: 'eth0',
      config: conf,
    });
    assert.equal(released.code, 0);
    const failed = await reference('bridge', {
      command: 'CHECK',
      containerID: 'ctr-check',
      netns: ns.path,
      ifname: 'eth0',
      config: withPrev,
    });
    assert.notEqual(failed.code, 0);
    assert.equal(failed.json?.code, 102, failed.stdout);
    assert.match(String(failed.json?.msg), /holds no address/);
  });

  it('GC releases exactly the attachments missing from the valid list', async () => {
    const conf = (v: string) => ({
      cniVersion: v,
      name: 'gcnet',
      ipam: { type: 'warren', socket: agent.socket, range: '10.213.9.0/24' },
    });
    const ids = ['gc-1', 'gc-2', 'gc-3', 'gc-4'];
    for (const id of ids) {
      const r = await warren({
        command: 'ADD',
        containerID: id,
        netns: '/proc/self/ns/net',
        ifname: 'eth0',
        config: conf('1.1.0'),
      });
      assert.equal(r.code, 0, r.stdout);
    }
    const other = await warren({
      command: 'ADD',
      containerID: 'gc-1',
      netns: '/proc/self/ns/net',
      ifname: 'net1',
      config: conf('1.1.0'),
    });
    assert.equal(other.code, 0);
    const valid = [
      { containerID: 'gc-1', ifname: 'eth0' },
      { containerID: 'gc-3', ifname: 'eth0' },
    ];
    const gc = await warren({ command: 'GC', config: { ...conf('1.1.0'), 'cni.dev/valid-attachments': valid } });
    assert.equal(gc.code, 0, gc.stdout);
    const left = (await agent.allocations('?network=gcnet')).map((a) => `${a.containerID}/${a.ifname}`).sort();
    assert.deepEqual(left, ['gc-1/eth0', 'gc-3/eth0']);
    // Other networks are never touched by this network's GC.
    assert.ok((await agent.allocations('?network=bridgenet')).length > 0);
  });

  it('answers STATUS 0 while the agent is up and 50 when it is down', async () => {
    const conf = {
      cniVersion: '1.1.0',
      name: 'statusnet',
      ipam: { type: 'warren', socket: agent.socket, range: '10.213.10.0/24' },
    };
    const up = await warren({ command: 'STATUS', config: conf });
    assert.equal(up.code, 0, up.stdout);
    assert.equal(up.stdout, '');
    const down = await warren({
      command: 'STATUS',
      config: { ...conf, ipam: { ...conf.ipam, socket: `${agent.dir}/nobody.sock` } },
    });
    assert.equal(down.code, 1);
    assert.equal(down.json?.code, 50, down.stdout);
  });

  it('fails ADD with code 11 while the agent is down and leaves nothing allocated', async () => {
    const ns = await container();
    const dir = agent.dir;
    await agent.stop();
    try {
      const add = await reference('bridge', {
        command: 'ADD',
        containerID: 'ctr-down',
        netns: ns.path,
        ifname: 'eth0',
        config: v4(),
      });
      assert.notEqual(add.code, 0);
      assert.equal(add.json?.code, 11, add.stdout);
      assert.match(String(add.json?.msg), /not reachable/);
    } finally {
      agent = await startAgent({ dir, args });
    }
    assert.deepEqual(await agent.allocations('?containerID=ctr-down'), []);
  });
});
