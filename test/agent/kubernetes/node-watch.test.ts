/**
 * One watch of the cluster's Nodes (issue 36, fan-out): three agents on the kubernetes store, each
 * with its own credentials on the fake API server (so each request is told apart by client) and a
 * manual clock. Exactly one — the holder of the chore `nodes` — lists and watches Nodes, and a Node
 * deleted is forgotten once, by it. When it stops, another agent takes the chore once its Lease
 * lapsed, opens the watch, and its first listing finds the Node deleted while nobody watched.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { NodeWatch } from '../../../src/agent/kubernetes/node-watch.ts';
import { KubernetesNodes } from '../../../src/agent/kubernetes/nodes.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { NodeSource } from '../../../src/sources/kubernetes/node-source.ts';
import type { Store } from '../../../src/store/store.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { waitFor } from '../../helpers/processes.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 300;
const INTERVAL_MS = 10_000;

describe('NodeWatch: only the holder of the chore `nodes` watches Nodes', () => {
  let fake: FakeKubeApi;
  const opened: KubeTier[] = [];
  const aborts: AbortController[] = [];
  const runs: Array<Promise<void>> = [];

  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const a of aborts) a.abort();
    await Promise.allSettled(runs);
    for (const t of opened) await t.close().catch(() => undefined);
    await fake.stop();
  });

  /** Nodes gone from Kubernetes that still hold blocks in the store, as the cluster's claims say. */
  const holders = new Set<string>();
  const forgot: string[] = [];
  const store = {
    list: async () => [],
    ledgers: async () => [],
    cluster: { owners: { holders: async () => [...holders] } },
  } as unknown as Store;

  /** The agent of `node`: its own tier and credentials, announced, its NodeWatch running. */
  const agent = async (clock: ManualClock, node: string) => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.clientKubeconfig(node));
    const tier = await openKubeTier({ kubeConfig, namespace: NAMESPACE, leaseSeconds: LEASE_SECONDS, clock });
    opened.push(tier);
    fake.createNode(node);
    await tier.membership.announce(node, { since: clock.now(), version: 'test', instance: `i-${node}` });
    const forget = new KubernetesNodes({
      store,
      membership: tier.membership,
      allocator: {
        forgetNode: async (name) => {
          forgot.push(`${name} by ${node}`);
          holders.delete(name);
          return { released: [], blocks: [`block of ${name}`] };
        },
      },
      clock,
      logger: silentLogger,
      node,
      recheckMs: LEASE_SECONDS * 1000,
    });
    const watch = new NodeWatch({
      membership: tier.membership,
      openSource: () => new NodeSource({ kubeConfig, clock, logger: silentLogger }),
      forget,
      clock,
      logger: silentLogger,
      intervalMs: INTERVAL_MS,
    });
    const abort = new AbortController();
    aborts.push(abort);
    const run = watch.run(abort.signal);
    runs.push(run);
    return { node, tier, watch, abort, run };
  };

  /** The clients that opened a watch of Nodes since `from` (an index into the fake's requests). */
  const nodeWatchers = (from = 0) => [
    ...new Set(
      fake.requests
        .slice(from)
        .filter((r) => r.verb === 'watch' && r.resource === 'nodes')
        .map((r) => r.client),
    ),
  ];

  it('opens one Node watch in the cluster; a Node deleted is forgotten once; the next holder finds what was deleted meanwhile', async () => {
    const clock = new ManualClock(Date.now());
    fake.createNode('gone-1');
    fake.createNode('gone-2');
    holders.add('gone-1');
    holders.add('gone-2');
    const agents = [await agent(clock, 'nw-a'), await agent(clock, 'nw-b'), await agent(clock, 'nw-c')];
    for (const a of agents) await a.watch.check();
    const watching = agents.filter((a) => a.watch.status().watcher);
    assert.equal(watching.length, 1, 'exactly one agent holds the chore `nodes`');
    const holder = watching[0] as (typeof agents)[number];
    await waitFor('the holder to watch the Nodes', () => (nodeWatchers().length > 0 ? true : undefined));
    assert.deepEqual(nodeWatchers(), [holder.node], 'only the holder opened a watch of Nodes');
    assert.equal(
      fake.requests.filter((r) => r.verb === 'list' && r.resource === 'nodes' && r.client !== holder.node).length,
      0,
      'no other agent listed the Nodes',
    );
    for (const other of agents.filter((a) => a !== holder))
      assert.equal(other.watch.status().watcher, false, `${other.node} does not watch`);

    fake.deleteNode('gone-1');
    await waitFor('gone-1 forgotten', () => (forgot.length > 0 ? true : undefined));
    assert.deepEqual(forgot, [`gone-1 by ${holder.node}`], 'forgotten once, by the holder');

    // The holder stops (its Leases stay, as after kill -9); a Node is deleted while nobody watches.
    holder.abort.abort();
    await holder.run;
    await holder.tier.close();
    await waitFor('the watch of Nodes closed with its agent', () =>
      fake.watchCount('nodes') === 0 ? true : undefined,
    );
    const from = fake.requests.length;
    fake.deleteNode('gone-2');
    const survivors = agents.filter((a) => a !== holder);
    for (const a of survivors) await a.watch.check();
    assert.ok(
      survivors.every((a) => !a.watch.status().watcher),
      'the chore is not taken before its Lease lapsed',
    );
    clock.advance(LEASE_SECONDS * 1000 + 1000);
    for (const a of survivors) await a.watch.check();
    const next = survivors.filter((a) => a.watch.status().watcher);
    assert.equal(next.length, 1, 'exactly one agent took the chore over');
    const successor = next[0] as (typeof agents)[number];
    await waitFor('gone-2 forgotten by the next holder', () => (forgot.length > 1 ? true : undefined));
    assert.deepEqual(forgot, [`gone-1 by ${holder.node}`, `gone-2 by ${successor.node}`]);
    assert.deepEqual(nodeWatchers(from), [successor.node], 'only the next holder opened a watch of Nodes');
    assert.equal(fake.watchCount('nodes'), 1);
  });
});
