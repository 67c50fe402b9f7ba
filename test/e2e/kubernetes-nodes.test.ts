/**
 * A node leaves the cluster: three agents (child processes, real plugin executable) share pools on
 * a real etcd and watch Nodes through the fake API server (real wire, TLS, bearer token). When a
 * Node is deleted and its agent's announcement has expired, exactly one of the others forgets it:
 * its addresses are released, its blocks freed and reused, and one Event records it. When the node
 * comes back it announces itself again (giving the chore up), claims blocks anew, and is forgotten
 * again if it leaves again. Two tiers (`--store etcd`): what the cluster holds of a node is its claims
 * and what it published, read through an etcd tier on the same prefix; its addresses were in its file.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { REASON_NODE_FORGOTTEN } from '../../src/agent/kubernetes/nodes.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type EtcdTier, openEtcdTier } from '../../src/store/etcd-tier/tier.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { waitFor } from '../helpers/processes.ts';

const PREFIX = '/kube-nodes-test/';

describe('a node deleted from Kubernetes', () => {
  let etcd: EtcdCluster;
  let api: FakeKubeApi;
  let observer: EtcdTier;
  let raw: Etcd3;
  const agents = new Map<string, AgentHandle>();

  const args = (name: string) => [
    '--node-name',
    name,
    '--store',
    'etcd',
    '--etcd-endpoints',
    etcd.endpoints.join(','),
    '--etcd-prefix',
    PREFIX,
    '--node-lease',
    '2',
    '--kubernetes',
    'on',
    '--kubeconfig',
    api.kubeconfigPath,
  ];
  const config = (agent: AgentHandle) => ({
    cniVersion: '1.1.0',
    name: 'kn',
    ipam: { type: 'warren', socket: agent.socket, range: '10.246.0.0/24', block_size: 28 },
  });

  before(async () => {
    etcd = await startEtcd(1);
    api = await startFakeKubeApi();
    for (const name of ['kn1', 'kn2', 'kn3']) {
      api.createNode(name);
      agents.set(name, await startAgent({ args: args(name) }));
    }
    observer = await openEtcdTier({ endpoints: etcd.endpoints, prefix: PREFIX, leaseSeconds: 15 });
    const { Etcd3: Client } = await import('etcd3');
    raw = new Client({ hosts: etcd.endpoints });
  });
  after(async () => {
    for (const a of agents.values()) await a.kill();
    await observer?.close();
    raw?.close();
    await api?.stop();
    await etcd?.stop();
  });

  it('is forgotten by exactly one agent once its announcement expired; its blocks are freed and reused', async () => {
    const kn3 = agents.get('kn3') as AgentHandle;
    const added: string[] = [];
    for (let i = 0; i < 3; i++) {
      const reply = await warren({
        command: 'ADD',
        containerID: `kn3-c${i}`,
        netns: `/var/run/netns/kn3-c${i}`,
        ifname: 'eth0',
        config: config(kn3),
      });
      assert.equal(reply.code, 0, reply.stdout);
      added.push(...resultAddresses(reply));
    }
    const kn3Blocks = (await observer.claimsOf('kn3')).map((c) => c.key);
    assert.ok(kn3Blocks.length >= 1, 'kn3 claimed a block');
    // The node's machine dies: its agent is gone without withdrawing, and Kubernetes deletes the Node.
    await kn3.kill();
    agents.delete('kn3');
    api.deleteNode('kn3');
    await waitFor("kn3's addresses to be released and its blocks freed", async () =>
      (await observer.claimsOf('kn3')).length === 0 && (await observer.published({ node: 'kn3' })).items.length === 0
        ? true
        : undefined,
    );
    // The store shows the forget before the agent's log line has come through its pipe.
    const forgot = (a: AgentHandle) => a.log().includes('forgot a node deleted from Kubernetes');
    await waitFor('an agent to log that it forgot kn3', () => ([...agents.values()].some(forgot) ? true : undefined));
    const forgetters = [...agents.values()].filter(forgot);
    assert.equal(
      forgetters.length,
      1,
      `exactly one agent forgot kn3; logs: ${[...agents.values()]
        .map((a) =>
          a
            .log()
            .split('\n')
            .filter((l) => /kn3|forg/.test(l))
            .join('\n'),
        )
        .join('\n---\n')}`,
    );
    const events = await waitFor('the Event on the Node', () => {
      const found = api.listEvents('default').filter((e) => e.reason === REASON_NODE_FORGOTTEN);
      return found.length > 0 ? found : undefined;
    });
    assert.equal(events.length, 1);
    // Two tiers: kn3's addresses were in its own file; the forget frees its claims (and publications).
    assert.match(String(events[0]?.message), /freed [1-9][0-9]* /);
    const statuses = await Promise.all(
      [...agents.values()].map(
        async (a) => (await requestJson({ socket: a.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus,
      ),
    );
    assert.deepEqual(
      statuses.flatMap((s) => s.kubernetes?.nodes?.forgotten ?? []),
      ['kn3'],
    );
    // Reused: a block kn3 held is claimed by a live node once it needs one.
    const kn1 = agents.get('kn1') as AgentHandle;
    for (let i = 0; i < 40; i++) {
      const reply = await warren({
        command: 'ADD',
        containerID: `kn1-c${i}`,
        netns: `/var/run/netns/kn1-c${i}`,
        ifname: 'eth0',
        config: config(kn1),
      });
      assert.equal(reply.code, 0, reply.stdout);
    }
    const owners = new Map(
      await Promise.all(kn3Blocks.map(async (b) => [b, (await observer.claimOf(b))?.node] as const)),
    );
    assert.ok(
      kn3Blocks.some((b) => owners.get(b) === 'kn1'),
      `one of kn3's former blocks (${kn3Blocks.join(', ')}) is now kn1's`,
    );
  });

  it('comes back: announces itself again, which gives the chore up, claims blocks anew, and is forgotten again when it leaves again', async () => {
    const chore = `${PREFIX}tasks/forget-node/kn3`;
    assert.notEqual(await raw.get(chore).string(), null, 'the chore of forgetting kn3 is still claimed by its winner');
    api.createNode('kn3');
    const kn3 = await startAgent({ args: args('kn3') });
    agents.set('kn3', kn3);
    await waitFor('kn3 to announce itself and give the chore up', async () =>
      (await raw.get(chore).string()) === null ? true : undefined,
    );
    const reply = await warren({
      command: 'ADD',
      containerID: 'kn3-back',
      netns: '/var/run/netns/kn3-back',
      ifname: 'eth0',
      config: config(kn3),
    });
    assert.equal(reply.code, 0, reply.stdout);
    const [address] = resultAddresses(reply);
    const blocks = await observer.claimsOf('kn3');
    assert.equal(blocks.length, 1, 'kn3 claimed a block anew');
    // Its claim was published before its first address (empty); the address at the next run.
    const published = await waitFor('kn3 to publish its block with its address', async () => {
      const items = (await observer.published({ node: 'kn3' })).items;
      return items.some((b) => b.allocations.length > 0) ? items : undefined;
    });
    assert.deepEqual(
      published.flatMap((b) => b.allocations.map((a) => [a.address, a.pool])),
      [[address, blocks[0]?.key]],
      'its address is from its new block',
    );

    // It leaves again: the chore, given up, is won again, by exactly one agent.
    await kn3.kill();
    agents.delete('kn3');
    api.deleteNode('kn3');
    await waitFor('kn3 to be forgotten a second time', async () =>
      (await observer.claimsOf('kn3')).length === 0 && (await observer.published({ node: 'kn3' })).items.length === 0
        ? true
        : undefined,
    );
    // Said twice: a second Event, or the first one's count raised to 2 when the message repeats word
    // for word within the aggregation window (agent/kubernetes/events.ts: no storm of equal Events).
    const reported = (events: readonly object[]) =>
      events.reduce((n, e) => n + ((e as { count?: number }).count ?? 1), 0);
    const events = await waitFor('kn3 forgotten a second time, said by an Event', () => {
      const found = api.listEvents('default').filter((e) => e.reason === REASON_NODE_FORGOTTEN);
      return reported(found) > 1 ? found : undefined;
    });
    assert.equal(reported(events), 2);
    const statuses = await Promise.all(
      [...agents.values()].map(
        async (a) => (await requestJson({ socket: a.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus,
      ),
    );
    assert.deepEqual(
      statuses.flatMap((s) => s.kubernetes?.nodes?.forgotten ?? []),
      ['kn3', 'kn3'],
      'forgotten once per departure',
    );
  });
});
