/**
 * Sticky StatefulSet addresses end to end: three real agents on store `kubernetes` against the fake
 * API server (CRDs of deploy/crds/, StatefulSets and pods over the real wire), ADDs through the
 * installed plugin with the pod's CNI_ARGS, the holdings planner reading each agent's pod watch.
 * A StatefulSet pod deleted and re-created (new UID) on another node gets its old address; the old
 * pod's late DEL on its node releases nothing of the new pod's; `warren allocations` shows the use
 * with what holds it; scaled to zero, the holding ends after --sticky-release-grace, once no pod
 * uses it, and the address is the range's again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { networkConfig, observeTier, startKubeNode } from '../helpers/kube-store.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const NODES = ['sticky1', 'sticky2', 'sticky3'] as const;
const NS = 'db';
const NETWORK = 'sticky';
const IPAM = { range: '10.251.0.0/24', sticky: true };
const KEY = `statefulset/${NS}/web/0`;

describe('sticky StatefulSet addresses across three agents', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  let observer: ClusterTier;
  const agents = new Map<string, AgentHandle>();
  const agent = (node: string): AgentHandle => agents.get(node) as AgentHandle;

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.kubeconfigPath);
    client = await KubeApiClient.open({ kubeConfig });
    for (const node of NODES)
      agents.set(
        node,
        await startKubeNode(api, node, { extra: ['--sticky-release-grace', '2', '--block-grace', '1'] }),
      );
    observer = await observeTier(api);
  });
  after(async () => {
    for (const a of agents.values()) await a.kill();
    await observer?.close();
    client?.close();
    await api?.stop();
  });

  const statefulSets = `/apis/apps/v1/namespaces/${NS}/statefulsets`;
  async function statefulSet(replicas: number): Promise<void> {
    const current = await client.send('read the StatefulSet', { method: 'GET', path: `${statefulSets}/web` });
    const body = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name: 'web',
        namespace: NS,
        ...(current.status === 200
          ? { resourceVersion: (current.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion }
          : {}),
      },
      spec: { replicas, serviceName: 'web', selector: { matchLabels: { app: 'web' } } },
    };
    const answer =
      current.status === 200
        ? await client.send('scale the StatefulSet', { method: 'PUT', path: `${statefulSets}/web`, body })
        : await client.send('make the StatefulSet', { method: 'POST', path: statefulSets, body });
    assert.ok(answer.status === 200 || answer.status === 201, JSON.stringify(answer.body));
  }

  /** Pod web-<ordinal> of the StatefulSet, as its controller makes it, bound to `node`. */
  function pod(ordinal: number, uid: string, node: string): void {
    api.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `web-${ordinal}`,
        namespace: NS,
        uid,
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: 'uid-web', controller: true },
        ],
      },
      spec: { nodeName: node, containers: [{ name: 'db', image: 'db' }] },
    });
  }

  const cni = (command: 'ADD' | 'DEL', node: string, ordinal: number, uid: string, sandbox: string) =>
    warren({
      command,
      containerID: sandbox,
      netns: `/var/run/netns/${sandbox}`,
      ifname: 'eth0',
      args: `K8S_POD_NAMESPACE=${NS};K8S_POD_NAME=web-${ordinal};K8S_POD_UID=${uid}`,
      config: networkConfig(agent(node), NETWORK, IPAM),
    });

  /** What `node` holds of the network, its own SQLite truth. */
  const held = (node: string) => agent(node).allocations(`?network=${NETWORK}&node=${node}`);

  it("gives the re-created pod its old address on another node; the old pod's late DEL takes nothing of it", async () => {
    await statefulSet(2);
    pod(0, 'uid-web-0-a', 'sticky1');
    // The pod watch of sticky1 must have it before the planner reads it (a GET on a miss covers it too).
    const first = await cni('ADD', 'sticky1', 0, 'uid-web-0-a', 'sandbox-a');
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const [address] = resultAddresses(first);
    assert.ok(address);
    pod(1, 'uid-web-1', 'sticky2');
    const other = await cni('ADD', 'sticky2', 1, 'uid-web-1', 'sandbox-w1');
    assert.notDeepEqual(resultAddresses(other), [address]);
    // The StatefulSet's pod is deleted (force: its node is slow) and made again, new UID, on sticky2.
    api.deletePod(NS, 'web-0', { force: true });
    pod(0, 'uid-web-0-b', 'sticky2');
    const again = await cni('ADD', 'sticky2', 0, 'uid-web-0-b', 'sandbox-b');
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.deepEqual(resultAddresses(again), [address]);
    // The old pod's DEL comes late, on its node: it releases its own use, nothing of the new pod's.
    assert.equal((await cni('DEL', 'sticky1', 0, 'uid-web-0-a', 'sandbox-a')).code, 0);
    const uses = (await held('sticky2')).filter((a) => a.address === address);
    assert.deepEqual(
      uses.map((a) => a.podUID),
      ['uid-web-0-b'],
    );
    const record = (await observer.holdings?.ofHolder(KEY)) ?? [];
    assert.deepEqual(
      record.map((r) => [r.address, r.owner]),
      [[address, 'sticky1']],
    );
    // The operator sees the use with what holds it.
    const listed = await run(process.execPath, [WARREN_BIN, 'allocations', '--socket', agent('sticky2').socket]);
    assert.equal(listed.code, 0, listed.stderr);
    const row = listed.stdout.split('\n').find((line) => line.startsWith(`${address} `)) ?? '';
    assert.match(row, /^\S+\s+10\.251\.0\.0\/24\s/, listed.stdout);
    assert.ok(row.includes(` ${KEY} `), `the row names its holder: ${row}`);
    // The uses reach the record (sticky2's upkeep reports them).
    await waitFor('the use of web-0 in its holding', async () => {
      const [r] = (await observer.holdings?.ofHolder(KEY)) ?? [];
      return r?.uses.some((u) => u.node === 'sticky2' && u.podUID === 'uid-web-0-b') === true ? true : undefined;
    });
  });

  it('ends the holding once the StatefulSet is scaled below the ordinal, after the grace, with no pod using it', async () => {
    const [record] = (await observer.holdings?.ofHolder(KEY)) ?? [];
    assert.ok(record);
    await statefulSet(0);
    // The pod still runs (its use is reported): the holding stays.
    assert.equal(((await observer.holdings?.ofHolder(KEY)) ?? []).length, 1);
    api.deletePod(NS, 'web-0', { force: true });
    assert.equal((await cni('DEL', 'sticky2', 0, 'uid-web-0-b', 'sandbox-b')).code, 0);
    await waitFor('the holding of web-0 to end', async () =>
      ((await observer.holdings?.ofHolder(KEY)) ?? []).length === 0 ? true : undefined,
    );
    // Its owner then releases the placeholder (after its block grace): the address is free again.
    await waitFor('the placeholder to go', async () =>
      (await agent(record.owner).allocations(`?address=${record.address}`)).length === 0 ? true : undefined,
    );
    // The chore's holder says so in its status; every agent reports the chore's rounds in one shape.
    const reports = async () => {
      const all = [];
      for (const node of NODES) {
        const r = await requestJson({
          socket: agent(node).socket,
          method: 'GET',
          path: '/v1/status',
          timeoutMs: 10_000,
        });
        all.push((r.body as AgentStatus).kubernetes?.planning?.stickyRelease);
      }
      return all;
    };
    const shown = await waitFor('every agent to report a round of the sticky release', async () => {
      const all = await reports();
      return all.every((r) => (r?.chore.runs ?? 0) >= 1) ? all : undefined;
    });
    assert.ok(shown.reduce((n, r) => n + (r?.ended ?? 0), 0) >= 1, JSON.stringify(shown));
    for (const r of shown) assert.equal(r?.listed, true, JSON.stringify(r));
  });
});
