/**
 * Forgetting nodes deleted from Kubernetes on the kubernetes store, where an idle agent renews no
 * Lease (issue 36, liveness on demand: src/store/kubernetes/lease-ping.ts): agents on the fake API
 * server and a manual clock, each with its own tier. A node whose Node is deleted and whose agent
 * stopped is forgotten by exactly one agent once the ping went unanswered (its Lease lapsed or
 * not); a node whose Node is deleted but whose agent still runs answers, and keeps its blocks; one
 * whose Node is registered again while it is pinged is not forgotten.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesNodes } from '../../../src/agent/kubernetes/nodes.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { NodeItem } from '../../../src/sources/kubernetes/node-source.ts';
import type { Store } from '../../../src/store/store.ts';
import { nodeLeaseName } from '../../../src/store/kubernetes/names.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { waitFor } from '../../helpers/processes.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 300;
const PING_SECONDS = 30;
const RECHECK_MS = 60_000;

describe('KubernetesNodes on the kubernetes store, liveness asked', () => {
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
    for (const t of opened) await t.close();
    await fake.stop();
  });

  /** A node's agent on its own tier, announced, its Lease watched (where it answers pings). */
  const announced = async (clock: ManualClock, node: string): Promise<KubeTier> => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.kubeconfigPath);
    const t = await openKubeTier({
      kubeConfig,
      namespace: NAMESPACE,
      leaseSeconds: LEASE_SECONDS,
      pingSeconds: PING_SECONDS,
      clock,
    });
    opened.push(t);
    const from = fake.requests.length;
    await t.membership.announce(node, { since: clock.now(), version: 'test', instance: `i-${node}` });
    await waitFor('the watch of its Lease', () =>
      fake.requests.slice(from).some((r) => r.verb === 'watch' && r.resource === 'leases') ? true : undefined,
    );
    return t;
  };

  /** An agent of `node` forgetting nodes from the items pushed to it; `forgot` records what it forgot. */
  const forgetter = (
    clock: ManualClock,
    node: string,
    tier: KubeTier,
    forgot: string[],
    nodeExists: (name: string) => Promise<boolean> = async () => false, // the Node is deleted
    store: Store = {} as Store, // read only at a listing, which only the test of listings pushes
  ) => {
    const nodes = new KubernetesNodes({
      store,
      membership: tier.membership,
      allocator: {
        forgetNode: async (name) => {
          forgot.push(`${name} by ${node}`);
          return { released: [], blocks: [] };
        },
      },
      clock,
      logger: silentLogger,
      node,
      recheckMs: RECHECK_MS,
      nodeExists,
    });
    const items = new AsyncChannel<NodeItem>();
    const abort = new AbortController();
    abort.signal.addEventListener('abort', () => items.close(), { once: true });
    aborts.push(abort);
    runs.push(nodes.run(items, abort.signal));
    return { nodes, items };
  };

  it('forgets a node whose Node is deleted and whose agent stopped, by exactly one agent, once the ping went unanswered', async () => {
    const clock = new ManualClock(Date.now());
    const [a, b, lost] = [
      await announced(clock, 'kl-a'),
      await announced(clock, 'kl-b'),
      await announced(clock, 'kl-lost'),
    ];
    await lost.close(); // its agent stopped (kill -9: its Lease stays)
    clock.advance(LEASE_SECONDS * 1000 + 1000); // every Lease lapsed: nobody holds a chore
    const forgot: string[] = [];
    const agents = [forgetter(clock, 'kl-a', a, forgot), forgetter(clock, 'kl-b', b, forgot)];
    for (const agent of agents) agent.items.push({ kind: 'node-deleted', name: 'kl-lost' });
    const started = clock.monotonic();
    await waitFor('kl-lost forgotten', () => (forgot.length > 0 ? true : void clock.advance(1000)));
    assert.ok(clock.monotonic() - started >= PING_SECONDS * 1000, 'only after the ping time');
    for (let i = 0; i < 5; i++) clock.advance(RECHECK_MS);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(forgot.length, 1, `exactly one agent forgot it: ${forgot.join(', ')}`);
    assert.deepEqual(
      agents.map((x) => x.nodes.status().gone),
      [[], []],
      'neither looks at it again',
    );
  });

  it('keeps the blocks of a node whose Node is deleted while its agent runs: it answers the ping', async () => {
    const clock = new ManualClock(Date.now());
    const [a, running] = [await announced(clock, 'kr-a'), await announced(clock, 'kr-running')];
    clock.advance(LEASE_SECONDS * 1000 + 1000); // idle: its Lease lapsed, unrenewed
    const forgot: string[] = [];
    const agent = forgetter(clock, 'kr-a', a, forgot);
    const pongs = () =>
      fake.requests.filter((r) => r.verb === 'update' && r.path.endsWith(`/${nodeLeaseName('kr-running')}`)).length;
    const before = pongs();
    agent.items.push({ kind: 'node-deleted', name: 'kr-running' });
    // The winner of the chore pings; the running agent answers.
    await waitFor('the ping answered', () => (pongs() >= before + 2 ? true : void clock.advance(1000)));
    for (let i = 0; i < 3; i++) {
      clock.advance(RECHECK_MS);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(forgot, [], 'not forgotten');
    assert.deepEqual(agent.nodes.status().gone, ['kr-running'], 'looked at again while its Node is gone');
    assert.equal(running.membership.halted(), undefined, 'it serves on');
  });

  it('forgets a node deleted from Kubernetes whose agent died while its Lease still ran after one ping, not after the Lease', async () => {
    const clock = new ManualClock(Date.now());
    const [a, lost] = [await announced(clock, 'kd-a'), await announced(clock, 'kd-lost')];
    await lost.close(); // died just after its last renewal: its Lease runs for LEASE_SECONDS more
    const forgot: string[] = [];
    const agent = forgetter(clock, 'kd-a', a, forgot);
    const started = clock.monotonic();
    agent.items.push({ kind: 'node-deleted', name: 'kd-lost' });
    await waitFor('kd-lost forgotten', () => (forgot.length > 0 ? true : void clock.advance(1000)));
    const waited = clock.monotonic() - started;
    assert.ok(waited >= PING_SECONDS * 1000, `only after the ping time (${waited} ms)`);
    assert.ok(waited < LEASE_SECONDS * 1000, `before its Lease would have lapsed (${waited} ms)`);
    assert.deepEqual(forgot, ['kd-lost by kd-a']);
  });

  it('forgets at a listing a node Kubernetes no longer lists whose agent died holding no block: found by its Lease', async () => {
    // The soak (kubernetes seed 3817): a node's WarrenBlock moved to another node by hand just
    // before the node died; its Node was deleted while no agent watched Nodes, and the next
    // listing found nothing of it in the store, so it was never forgotten and its publication kept
    // listing its gone containers' addresses.
    const clock = new ManualClock(Date.now());
    const [a, lost] = [await announced(clock, 'ka-a'), await announced(clock, 'ka-lost')];
    await lost.close(); // kill -9: its Lease stays, held
    const forgot: string[] = [];
    const empty = { list: async () => [], ledgers: async () => [] } as unknown as Store; // nothing of it here
    const agent = forgetter(clock, 'ka-a', a, forgot, undefined, empty);
    agent.items.push({ kind: 'listed', names: new Set(['ka-a']) });
    await waitFor('ka-lost forgotten', () => (forgot.includes('ka-lost by ka-a') ? true : void clock.advance(1000)));
    // The listing found the other tests' agents too, alive: their pings wait on this clock. Ended here.
    aborts.at(-1)?.abort();
    let ended = false;
    void runs.at(-1)?.finally(() => (ended = true));
    await waitFor('the look under way to end', () => (ended ? true : void clock.advance(1000)));
    assert.deepEqual(forgot, ['ka-lost by ka-a'], 'only the dead one: the others answered');
  });

  it('does not forget a node whose Node is registered again while its agent is pinged', async () => {
    const clock = new ManualClock(Date.now());
    const [a, lost] = [await announced(clock, 'kb-a'), await announced(clock, 'kb-back')];
    await lost.close();
    const forgot: string[] = [];
    let registered = false;
    const agent = forgetter(clock, 'kb-a', a, forgot, async () => registered);
    const pings = () =>
      fake.requests.filter((r) => r.verb === 'update' && r.path.endsWith(`/${nodeLeaseName('kb-back')}`)).length;
    const before = pings();
    agent.items.push({ kind: 'node-deleted', name: 'kb-back' });
    await waitFor('the ping written', () => (pings() > before ? true : undefined));
    registered = true; // the machine came back and its kubelet registered its Node again
    const vacated = () =>
      fake.requests.filter((r) => r.verb === 'update' && r.path.endsWith(`/${nodeLeaseName('kb-back')}`)).length >=
      before + 2;
    await waitFor('the ping unanswered (its Lease vacated)', () => (vacated() ? true : void clock.advance(1000)));
    for (let i = 0; i < 3; i++) {
      clock.advance(RECHECK_MS);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(forgot, [], 'a node listed again is not forgotten');
    assert.deepEqual(agent.nodes.status().gone, [], 'nor looked at again');
  });
});
