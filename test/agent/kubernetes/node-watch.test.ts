/**
 * One watch of the cluster's Nodes (issue 36, fan-out): three agents on the kubernetes store, each
 * with its own credentials on the fake API server (so each request is told apart by client) and a
 * manual clock. Exactly one — the holder of the chore `nodes` — lists and watches Nodes, and a Node
 * deleted is forgotten once, by it. When it stops, another agent takes the chore once its Lease
 * lapsed, opens the watch, and its first listing finds the Node deleted while nobody watched — also
 * one whose `forget-node` chore the stopped holder had claimed (its agent was alive then): the next
 * holder, refused, asks again at its rechecks and forgets it once that claim lapsed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { NodeWatch } from '../../../src/agent/kubernetes/node-watch.ts';
import { KubernetesNodes } from '../../../src/agent/kubernetes/nodes.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { NodeSource } from '../../../src/sources/kubernetes/node-source.ts';
import type { Store } from '../../../src/store/store.ts';
import { nodeLeaseName, taskLeaseName } from '../../../src/store/kubernetes/names.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { waitFor } from '../../helpers/processes.ts';

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
  /** Each test's agents in a namespace of their own: their chores' Leases apart from the other test's. */
  let namespace = 'warren-nw-1';
  const store = {
    list: async () => [],
    ledgers: async () => [],
    cluster: { owners: { holders: async () => [...holders] } },
  } as unknown as Store;

  /** A node's agent on its own tier and credentials, announced (where it answers pings). */
  const announced = async (clock: ManualClock, node: string) => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.clientKubeconfig(node));
    const tier = await openKubeTier({ kubeConfig, namespace, leaseSeconds: LEASE_SECONDS, clock });
    opened.push(tier);
    fake.createNode(node);
    await tier.membership.announce(node, { since: clock.now(), version: 'test', instance: `i-${node}` });
    return { kubeConfig, tier };
  };

  /** The agent of `node`, announced, its NodeWatch running. */
  const agent = async (clock: ManualClock, node: string) => {
    const { kubeConfig, tier } = await announced(clock, node);
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
    return { node, tier, watch, forget, abort, run };
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
    for (const a of survivors) {
      a.abort.abort();
      await a.run;
    }
  });

  it('forgets a node whose forget-node chore the stopped holder kept: the next holder asks again until it lapsed', async () => {
    const clock = new ManualClock(Date.now());
    namespace = 'warren-nw-2';
    forgot.length = 0;
    holders.clear();
    holders.add('hx');
    const x = await announced(clock, 'hx'); // its agent runs: its Node is deleted first
    const agents = [await agent(clock, 'hx-a'), await agent(clock, 'hx-b')];
    for (const a of agents) await a.watch.check();
    const holder = agents.find((a) => a.watch.status().watcher) as (typeof agents)[number];
    await waitFor('the holder to watch the Nodes', () => (nodeWatchers().includes(holder.node) ? true : undefined));
    clock.advance(200_000);
    const chore = taskLeaseName('forget-node/hx');
    const asked = (client: string, verb: string, from: number) =>
      fake.requests.slice(from).some((r) => r.client === client && r.verb === verb && r.path.endsWith(`/${chore}`));
    const deleted = fake.requests.length;
    fake.deleteNode('hx');
    // The holder claims forget-node/hx, pings its agent (its Node was deleted: a running Lease is
    // asked too), is answered and keeps it to look at again.
    const lease = nodeLeaseName('hx');
    const leaseRequests = (client: string, verb: string) =>
      fake.requests
        .slice(deleted)
        .filter((r) => r.client === client && r.verb === verb && r.path.endsWith(`/${lease}`));
    await waitFor("hx to answer the holder's ping", () =>
      leaseRequests('hx', 'update').length > 0 ? true : void clock.advance(1_000),
    );
    const answered = fake.requests.length;
    await waitFor('the holder to read the answer', () =>
      fake.requests
        .slice(answered)
        .some((r) => r.client === holder.node && r.verb === 'get' && r.path.endsWith(`/${lease}`))
        ? true
        : void clock.advance(1_000),
    );
    assert.ok(
      fake.requests
        .slice(deleted)
        .some((r) => r.client === holder.node && r.verb === 'create' && r.resource === 'leases'),
      'the holder claimed the chore of forgetting hx',
    );
    assert.deepEqual(forgot, [], 'an agent that answers is not forgotten');
    // Both stop before the holder finished (kill -9: their Leases stay).
    holder.abort.abort();
    await holder.run;
    await holder.tier.close();
    await x.tier.close();
    clock.advance(101_000); // `nodes` lapsed with the holder's announcement; forget-node/hx not yet
    const successor = agents.find((a) => a !== holder) as (typeof agents)[number];
    const from = fake.requests.length;
    await successor.watch.check();
    assert.equal(successor.watch.status().watcher, true, 'the other agent took the chore `nodes`');
    await waitFor('the successor to be refused forget-node/hx after its first listing', () =>
      asked(successor.node, 'get', from) ? true : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(forgot, [], 'not forgotten while the stopped holder still holds its chore');
    await waitFor('hx forgotten by the successor once that chore lapsed and the ping went unanswered', () =>
      forgot.length > 0 ? true : void clock.advance(5_000),
    );
    assert.deepEqual(forgot, [`hx by ${successor.node}`]);
  });
});
