/**
 * The agent on the two-tier store (`--store kubernetes`), wired as it runs: opening the store needs
 * Kubernetes credentials whatever the pod source says, and agents on one cluster (a MemoryTier
 * standing for the API server, each agent with its own SQLite file) announce themselves through the
 * tier's membership, refuse a second agent with one node name, and never hand out one address twice.
 * Then on the fake Kubernetes API (test/helpers/fake-kube-api.ts): the default store with the pod
 * source on, the block and the Lease written there, and a node deleted from Kubernetes forgotten.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { openStore } from '../../src/agent/settings/store-kind.ts';
import { ApiClient } from '../../src/api/client.ts';
import type { CniOutcome } from '../../src/api/protocol.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { systemClock } from '../../src/core/clock.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { TieredStore } from '../../src/store/tiered/store.ts';
import { silentLogger } from '../helpers/logger.ts';
import { removeDir, tempDir, waitFor } from '../helpers/processes.ts';
import { MemoryTier } from '../store/tiered/memory-tier.ts';
import { startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { nodeLeaseName } from '../../src/store/kubernetes/names.ts';

/** The agent's options on a private dir; `--store kubernetes` unless the flags give `store: 'default'`. */
const options = (dir: string, given: Parameters<typeof resolveAgentOptions>[0] = {}) => {
  const { store = 'kubernetes', ...flags } = given;
  return resolveAgentOptions(
    {
      stateDir: dir,
      socket: join(dir, 'w.sock'),
      journalDir: join(dir, 'journal'),
      netnsDirs: '',
      containerd: 'off',
      metricsAddress: '',
      pluginsDir: '',
      warmUpRounds: '0',
      ...(store === 'default' ? {} : { store }),
      ...flags,
    },
    {},
  );
};

describe('the agent on --store kubernetes', () => {
  const dirs: string[] = [];
  const agents: Agent[] = [];
  after(async () => {
    for (const agent of agents) await agent.stop().catch(() => undefined);
    for (const dir of dirs) removeDir(dir);
  });
  const dir = (): string => {
    const d = tempDir('warren-kstore-');
    dirs.push(d);
    return d;
  };

  it('refuses to open without Kubernetes credentials, naming what is missing, even with the pod source off', async (t) => {
    if (process.env.KUBERNETES_SERVICE_HOST !== undefined) return t.skip('runs inside a pod: in-cluster credentials');
    const o = options(dir(), { kubernetes: 'off' });
    const opening = { clock: systemClock, notice: () => undefined };
    await assert.rejects(
      openStore(o, opening),
      (e: Error & { code?: string }) =>
        e.code === 'INVALID_CONFIG' &&
        /^--store kubernetes needs Kubernetes credentials: no Kubernetes credentials: no --kubeconfig/.test(e.message),
    );
    const missing = options(dir(), { kubeconfig: '/nonexistent/kubeconfig' });
    await assert.rejects(openStore(missing, opening), /needs Kubernetes credentials: cannot load the kubeconfig/);
  });

  it('announces each node through the cluster, refuses a second agent with one node name, and hands out no address twice', async () => {
    const cluster = new MemoryTier({ clock: systemClock });
    const start = async (node: string, tier: MemoryTier) => {
      const d = dir();
      const o = options(d, { nodeName: node });
      const local = new SqliteStore({ path: join(d, 'warren.db'), clock: systemClock });
      const store = new TieredStore({ local, tier, node, clock: systemClock });
      store.start();
      const published = tier.published.bind(tier);
      const agent = new Agent(o, { logger: silentLogger, store: { kind: 'kubernetes', store, published } });
      agents.push(agent);
      await agent.start();
      return { agent, socket: o.socket, store };
    };
    const a = await start('kn-1', cluster);
    const b = await start('kn-2', cluster.session());
    const live = (await cluster.membership.liveNodes()).map((n) => n.node).sort();
    assert.deepEqual(live, ['kn-1', 'kn-2'], 'both announced through the tier');
    await assert.rejects(
      start('kn-1', cluster.session()),
      (e: Error & { code?: string }) => e.code === 'ALREADY_RUNNING',
    );

    // A range smaller than a block, used from both nodes: every address once.
    const config = { cniVersion: '1.0.0', name: 'shared', ipam: { type: 'warren', range: '10.77.0.0/28' } };
    const add = async (socket: string, id: string): Promise<string | undefined> => {
      const reply = await requestJson({
        socket,
        method: 'POST',
        path: '/v1/cni',
        body: { command: 'ADD', containerID: id, netns: `/var/run/netns/${id}`, ifname: 'net1', config },
      });
      const outcome = reply.body as CniOutcome;
      if (outcome.kind !== 'result') return undefined;
      return (outcome.output as { ips: Array<{ address: string }> }).ips[0]?.address;
    };
    const got: string[] = [];
    for (let i = 0; i < 3; i++) {
      for (const [node, socket] of [
        ['a', a.socket],
        ['b', b.socket],
      ] as const) {
        const address = await add(socket, `${node}${i}`);
        if (address !== undefined) got.push(address);
      }
    }
    assert.equal(got.length, 6, `every ADD of both nodes served: ${got.join(', ')}`);

    // Each node lists its own; with --cluster, every node's as published, a page at a time.
    assert.equal((await new ApiClient({ socket: a.socket }).allocations()).length, 3);
    await Promise.all([a.store.flush(), b.store.flush()]);
    const everyNode: Allocation[] = [];
    for await (const x of new ApiClient({ socket: a.socket }).allAllocations({}, { cluster: true, pageSize: 2 }))
      everyNode.push(x);
    assert.deepEqual(everyNode.map((x) => x.address).sort(), got.map((x) => x.split('/')[0]).sort());
    assert.deepEqual([...new Set(everyNode.map((x) => x.node))].sort(), ['kn-1', 'kn-2']);
    assert.equal(new Set(got).size, got.length, `no address twice: ${got.join(', ')}`);
  });

  it('opens on the Kubernetes API by default with --kubernetes on: its blocks and its Lease there, its addresses in its own file', async () => {
    const api = await startFakeKubeApi({ crds: 'deploy' });
    try {
      const d = dir();
      const o = options(d, { store: 'default', kubernetes: 'on', kubeconfig: api.kubeconfigPath, nodeName: 'kn-api' });
      assert.equal(o.store, 'kubernetes');
      const agent = new Agent(o, { logger: silentLogger });
      agents.push(agent);
      await agent.start();
      const client = new ApiClient({ socket: o.socket });
      const config = { cniVersion: '1.0.0', name: 'shared', ipam: { type: 'warren', range: '10.78.0.0/24' } };
      const outcome = await client.cni({
        command: 'ADD',
        containerID: 'c1',
        netns: '/var/run/netns/c1',
        ifname: 'net1',
        config,
      });
      assert.equal(outcome.kind, 'result', JSON.stringify(outcome));
      assert.equal(api.objects('warrenblocks').length, 1, 'the block claimed in the cluster');
      assert.equal(api.object('leases', nodeLeaseName('kn-api'), 'warren') === undefined, false, 'announced');
      assert.equal((await client.doctor()).store.kind, 'kubernetes');
      assert.equal((await client.allocations()).length, 1);
      assert.ok(existsSync(o.database), "the node's addresses in its own SQLite file");
      // A second start of this node name elsewhere is refused while this one lives.
      const other = options(dir(), { kubeconfig: api.kubeconfigPath, nodeName: 'kn-api' });
      const second = new Agent(other, { logger: silentLogger });
      await assert.rejects(second.start(), (e: Error & { code?: string }) => e.code === 'ALREADY_RUNNING');
      await agent.stop();
      assert.equal(api.object('leases', nodeLeaseName('kn-api'), 'warren'), undefined, 'withdrawn at a clean stop');
    } finally {
      await api.stop();
    }
  });

  it("frees the blocks of a node deleted from Kubernetes once its Lease lapsed, through the tier's chores", async () => {
    const api = await startFakeKubeApi({ crds: 'deploy' });
    try {
      const start = async (node: string) => {
        api.createNode(node);
        const flags = { store: 'default', kubernetes: 'on', kubeconfig: api.kubeconfigPath, nodeName: node } as const;
        const o = options(dir(), { ...flags, nodeLeaseSeconds: '2', upkeepIntervalSeconds: '0.5' });
        const agent = new Agent(o, { logger: silentLogger });
        agents.push(agent);
        await agent.start();
        return { agent, client: new ApiClient({ socket: o.socket }) };
      };
      const staying = await start('kn-stay');
      const leaving = await start('kn-gone');
      const config = { cniVersion: '1.0.0', name: 'shared', ipam: { type: 'warren', range: '10.79.0.0/24' } };
      const add = { command: 'ADD', containerID: 'g1', netns: '/var/run/netns/g1', ifname: 'net1', config };
      assert.equal((await leaving.client.cni(add)).kind, 'result');
      const blocksOf = (node: string) =>
        api.objects('warrenblocks').filter((b) => (b.spec as { node?: string } | undefined)?.node === node);
      assert.equal(blocksOf('kn-gone').length, 1);
      await leaving.agent.stop();
      api.deleteNode('kn-gone');
      await waitFor('the gone node to be forgotten', () => (blocksOf('kn-gone').length === 0 ? true : undefined));
      await staying.agent.stop();
    } finally {
      await api.stop();
    }
  });
});
