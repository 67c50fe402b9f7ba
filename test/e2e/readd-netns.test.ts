/**
 * A container ADDed again in a new network namespace without a DEL in between (podman restarting a
 * crashed container: same ID, new netns), with real namespaces, the plugin as installed and a real
 * agent whose namespace sweep watches /var/run/netns. The allocation must follow the container to
 * its new namespace: the old one's removal is not the container's end. Needs root.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { createNetns, deleteNetns } from '../helpers/netns.ts';
import { HANG_BOUND_MS, isRoot, waitFor } from '../helpers/processes.ts';

describe('a re-ADD in a new network namespace', { skip: isRoot() ? false : 'needs root (ip netns)' }, () => {
  let agent: AgentHandle;
  const namespaces: string[] = [];

  const config = () => ({
    cniVersion: '1.0.0',
    name: 'readd-netns',
    type: 'warren',
    ipam: { type: 'warren', range: '10.237.41.0/29', socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
  });
  const add = async (containerID: string, netns: string): Promise<string> => {
    const r = await warren({ command: 'ADD', containerID, netns, ifname: 'eth0', config: config() });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const [address] = resultAddresses(r);
    assert.ok(address !== undefined, r.stdout);
    return address;
  };
  const netns = async () => {
    const ns = await createNetns();
    namespaces.push(ns.name);
    return ns;
  };

  before(async () => {
    agent = await startAgent({ defaultNetnsDirs: true, args: ['--netns-grace', '0', '--reconcile-interval', '0.2'] });
  });
  after(async () => {
    await agent?.stop();
    for (const ns of namespaces) await deleteNetns(ns);
  });

  it('a re-ADD in a new namespace never lets the old namespace release the address', async () => {
    const a = await netns();
    const b = await netns();
    const first = await add('readd-c1', a.path);
    // Restarted after a crash: same container and interface, a new namespace, no DEL.
    const again = await add('readd-c1', b.path);
    assert.equal(again, first, 'a re-ADD of the same attachment keeps its address');

    // A witness whose namespace goes at the same moment: once the sweep has released it, the sweep
    // has judged namespace A too.
    const w = await netns();
    const witness = await add('readd-witness', w.path);
    await deleteNetns(a.name);
    await deleteNetns(w.name);
    await waitFor(
      'the namespace sweep to release the witness',
      async () => ((await agent.allocations('?containerID=readd-witness')).length === 0 ? true : undefined),
      HANG_BOUND_MS,
    );

    assert.deepEqual(
      (await agent.allocations('?containerID=readd-c1')).map((x) => x.address),
      [first],
      'c1 still holds its address',
    );
    assert.deepEqual(
      (await agent.allocations('?containerID=readd-c1')).map((x) => x.netns),
      [b.path],
      'the allocation records where the container lives now',
    );
    // The next containers get other addresses: c1's is not handed out again.
    const others = [await add('readd-c2', (await netns()).path), await add('readd-c3', (await netns()).path)];
    assert.ok(!others.includes(first), `${first} was handed out again: ${others.join(', ')} (witness had ${witness})`);
  });
});
