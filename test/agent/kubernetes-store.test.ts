/**
 * The agent on the two-tier store (`--store kubernetes`), wired as it runs: opening the store needs
 * Kubernetes credentials whatever the pod source says, and agents on one cluster (a MemoryTier
 * standing for the API server, each agent with its own SQLite file) announce themselves through the
 * tier's membership, refuse a second agent with one node name, and never hand out one address twice.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { openStore } from '../../src/agent/settings/store-kind.ts';
import type { CniOutcome } from '../../src/api/protocol.ts';
import { systemClock } from '../../src/core/clock.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';
import { TieredStore } from '../../src/store/tiered-store.ts';
import { silentLogger } from '../helpers/logger.ts';
import { removeDir, tempDir } from '../helpers/processes.ts';
import { MemoryTier } from '../store/memory-tier.ts';

const options = (dir: string, flags: Parameters<typeof resolveAgentOptions>[0] = {}) =>
  resolveAgentOptions(
    {
      stateDir: dir,
      socket: join(dir, 'w.sock'),
      journalDir: join(dir, 'journal'),
      netnsDirs: '',
      containerd: 'off',
      metricsAddress: '',
      pluginsDir: '',
      warmUpRounds: '0',
      store: 'kubernetes',
      ...flags,
    },
    {},
  );

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
    const start = async (node: string, tier: MemoryTier): Promise<{ agent: Agent; socket: string }> => {
      const d = dir();
      const o = options(d, { nodeName: node });
      const local = new SqliteStore({ path: join(d, 'warren.db'), clock: systemClock });
      const store = new TieredStore({ local, tier, node, clock: systemClock });
      store.start();
      const agent = new Agent(o, { logger: silentLogger, store: { kind: 'kubernetes', store } });
      await agent.start();
      agents.push(agent);
      return { agent, socket: o.socket };
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
    assert.equal(new Set(got).size, got.length, `no address twice: ${got.join(', ')}`);
  });
});
