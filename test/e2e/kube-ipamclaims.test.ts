/**
 * KubeVirt VMs through IPAMClaims, end to end: two real agents on store `kubernetes` (child
 * processes, two nodes) against the fake API server with Warren's CRDs and KubeVirt's IPAMClaim CRD
 * (test/fixtures/), driven through the installed plugin as Multus drives it (CNI_ARGS naming the
 * launcher pod, CNI_IFNAME the interface of its network selection element). The claim's address
 * follows the VM restarted on the other node; a live migration's two launcher pods hold it at once
 * while other pods burst at the range on both nodes and never get it; the claim's status and
 * `warren allocations` show it; the claim's deletion releases it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { deployCrds } from '../helpers/fake-kube-api/crds.ts';
import { ipamClaimCrd } from '../helpers/ipamclaim-crd.ts';
import { networkConfig, observeTier, startKubeNode } from '../helpers/kube-store.ts';
import { WARREN_BIN, bounded, run, waitFor } from '../helpers/processes.ts';

const NODES = ['kc1', 'kc2'] as const;
const NS = 'vms';
const NETWORK = 'tenant-kc';
const IFACE = 'pod7e3a91';
/** 4 blocks of 16: the bursts need blocks of both nodes, and asks between them. */
const IPAM = { range: '10.252.0.0/26', block_size: 28 };

describe('a KubeVirt VM on two nodes sharing a range through the Kubernetes API (IPAMClaim)', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  let observer: ClusterTier;
  const agents = new Map<string, AgentHandle>();
  const agent = (node: string): AgentHandle => agents.get(node) as AgentHandle;

  before(async () => {
    api = await startFakeKubeApi({ crds: [...deployCrds(), ipamClaimCrd()] });
    for (const node of NODES) agents.set(node, await startKubeNode(api, node));
    client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath) });
    observer = await observeTier(api);
  });
  after(async () => {
    for (const a of agents.values()) await a.kill();
    await observer?.close();
    client?.close();
    await api?.stop();
  });

  async function createClaim(name: string): Promise<void> {
    const answer = await client.send('create a claim', {
      method: 'POST',
      path: `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${NS}/ipamclaims`,
      body: {
        apiVersion: 'k8s.cni.cncf.io/v1alpha1',
        kind: 'IPAMClaim',
        metadata: { name, namespace: NS },
        spec: { network: NETWORK, interface: IFACE },
      },
    });
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
  }

  function launcher(vm: string, pod: string, node: string): void {
    const element = { name: NETWORK, namespace: NS, interface: IFACE, 'ipam-claim-reference': `${vm}.${NETWORK}` };
    api.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: pod,
        namespace: NS,
        uid: `uid-${pod}`,
        annotations: { 'kubevirt.io/domain': vm, 'k8s.v1.cni.cncf.io/networks': JSON.stringify([element]) },
      },
      spec: { nodeName: node, containers: [{ name: 'compute', image: 'virt-launcher' }] },
    });
  }

  /** The launcher's CNI call as Multus makes it on `node`. */
  const launcherCall = (command: 'ADD' | 'DEL', node: string, pod: string): Promise<CniReply> =>
    warren({
      command,
      containerID: `sandbox-${pod}`,
      netns: `/var/run/netns/${pod}`,
      ifname: IFACE,
      args: `K8S_POD_NAMESPACE=${NS};K8S_POD_NAME=${pod};K8S_POD_UID=uid-${pod}`,
      config: networkConfig(agent(node), NETWORK, IPAM),
    });

  async function launcherAdd(node: string, pod: string): Promise<string> {
    const reply = await launcherCall('ADD', node, pod);
    assert.equal(reply.code, 0, `${pod} ADD on ${node}: ${reply.stdout}${reply.stderr}`);
    const [address] = resultAddresses(reply);
    return address as string;
  }

  /** ADDs of `perNode` plain containers on every node at once. */
  const burst = (tag: string, perNode: number) =>
    bounded(
      16,
      NODES.flatMap((node) =>
        Array.from({ length: perNode }, (_, i) => async () => {
          const reply = await warren({
            command: 'ADD',
            containerID: `${tag}-${node}-${i}`,
            netns: `/var/run/netns/${tag}-${node}-${i}`,
            ifname: 'net1',
            config: networkConfig(agent(node), NETWORK, IPAM),
          });
          assert.equal(reply.code, 0, `${tag}-${node}-${i}: ${reply.stdout}`);
          return resultAddresses(reply)[0] as string;
        }),
      ),
    );

  const statusOf = (claim: string) =>
    api.object('ipamclaims', claim, NS)?.status as { ips?: string[]; ownerPod?: string } | undefined;

  const statusShows = (claim: string, address: string, pod: string) =>
    waitFor(`${claim}'s status to show ${address} held by ${pod}`, () => {
      const s = statusOf(claim);
      return s?.ownerPod === pod && s.ips?.length === 1 && s.ips[0] === `${address}/26` ? true : undefined;
    });

  it('keeps the address of a VM restarted on the other node; the status and `warren allocations` show it', async () => {
    const claim = `vm1.${NETWORK}`;
    await createClaim(claim);
    launcher('vm1', 'virt-launcher-vm1-a', 'kc1');
    const address = await launcherAdd('kc1', 'virt-launcher-vm1-a');
    await statusShows(claim, address, 'virt-launcher-vm1-a');
    // The VM stops (its launcher's DEL, the pod deleted) and starts on kc2.
    assert.equal((await launcherCall('DEL', 'kc1', 'virt-launcher-vm1-a')).code, 0);
    api.deletePod(NS, 'virt-launcher-vm1-a', { force: true });
    launcher('vm1', 'virt-launcher-vm1-b', 'kc2');
    assert.equal(await launcherAdd('kc2', 'virt-launcher-vm1-b'), address);
    await statusShows(claim, address, 'virt-launcher-vm1-b');
    const listed = await run(process.execPath, [WARREN_BIN, 'allocations', '--socket', agent('kc2').socket]);
    assert.equal(listed.code, 0, listed.stderr);
    const line = listed.stdout.split('\n').find((l) => l.startsWith(`${address} `));
    assert.ok(line, listed.stdout);
    // warren status says what the claim watch holds and what followed from it.
    const status = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent('kc2').socket]);
    assert.match(
      status.stdout,
      /ipamclaims: +watching, [1-9]\d* claims; [1-9]\d* statuses written, \d+ holdings ended/,
    );
    // The use shows its range as POOL, the launcher as POD and the claim as HELD BY.
    assert.match(line, /^\S+\s+10\.252\.0\.0\/26\s/, listed.stdout);
    assert.match(line, new RegExp(`vms/virt-launcher-vm1-b\\s+ipamclaim/vms/${claim.replace('.', '\\.')}\\s`));
  });

  it('gives both launcher pods of a live migration the address while other pods burst, and none of them gets it', async () => {
    const claim = `vm2.${NETWORK}`;
    await createClaim(claim);
    launcher('vm2', 'virt-launcher-vm2-src', 'kc1');
    const address = await launcherAdd('kc1', 'virt-launcher-vm2-src');
    launcher('vm2', 'virt-launcher-vm2-dst', 'kc2');
    const [target, during] = await Promise.all([launcherAdd('kc2', 'virt-launcher-vm2-dst'), burst('during', 12)]);
    assert.equal(target, address);
    assert.ok(!during.includes(address), `a plain pod got the claim's ${address}`);
    // Both launcher pods hold it now, each on its node.
    for (const node of NODES) {
      const pods = (await agent(node).allocations(`?address=${address}`)).map((a) => a.podName);
      assert.ok(
        pods.some((p) => p?.startsWith('virt-launcher-vm2-')),
        `${node}: ${JSON.stringify(pods)}`,
      );
    }
    // The migration completes: the source goes; the target keeps the address; no other pod gets it.
    assert.equal((await launcherCall('DEL', 'kc1', 'virt-launcher-vm2-src')).code, 0);
    api.deletePod(NS, 'virt-launcher-vm2-src', { force: true });
    const after = await burst('after', 6);
    assert.ok(!after.includes(address), `a plain pod got the claim's ${address}`);
    await statusShows(claim, address, 'virt-launcher-vm2-dst');
  });

  it("releases the address once the claim is deleted (and its last launcher's DEL came)", async () => {
    const claim = `vm3.${NETWORK}`;
    const key = `ipamclaim/${NS}/${claim}`;
    await createClaim(claim);
    launcher('vm3', 'virt-launcher-vm3-a', 'kc2');
    const address = await launcherAdd('kc2', 'virt-launcher-vm3-a');
    assert.equal((await observer.holdings?.ofHolder(key))?.length, 1);
    assert.equal((await launcherCall('DEL', 'kc2', 'virt-launcher-vm3-a')).code, 0);
    api.deleteObject('ipamclaims', claim, NS);
    await waitFor(`${key}'s holding to end`, async () =>
      (await observer.holdings?.ofHolder(key))?.length === 0 ? true : undefined,
    );
    await waitFor(`the placeholder of ${address} to go`, async () => {
      const held = await Promise.all(NODES.map((n) => agent(n).allocations(`?address=${address}`)));
      return held.flat().length === 0 ? true : undefined;
    });
  });
});
