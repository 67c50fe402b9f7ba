/**
 * A KubeVirt VM's IPAMClaim through the CNI service of three nodes of one two-tier cluster (memory
 * tier), the claims and launcher pods served by the fake API server over its wire (KubeVirt's
 * IPAMClaim CRD loaded from test/fixtures/): the address belongs to the claim — it follows the VM
 * restarted on another node, both launcher pods of a live migration hold it at once while a burst
 * of other pods on every node never gets it, the claim's status shows it (CIDR form), and the
 * claim's deletion releases it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ClaimApi } from '../../../../src/agent/kubernetes/ipam-claims/claim-api.ts';
import { OnDemandClient } from '../../../../src/sources/kubernetes/on-demand-client.ts';
import { IpamClaims, storeClaimHoldings } from '../../../../src/agent/kubernetes/ipam-claims/ipam-claims.ts';
import { PodDirectory, podViewOf } from '../../../../src/agent/kubernetes/pod-directory.ts';
import { CniService } from '../../../../src/agent/server/cni-service.ts';
import { isHeldPlaceholder } from '../../../../src/allocator/holdings/holdings.ts';
import { parseCidr } from '../../../../src/ipam/address.ts';
import { KubeApiClient } from '../../../../src/store/kubernetes/api-client.ts';
import { failureOfError } from '../../../../src/sources/kubernetes/api-failure.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../../helpers/fake-kube-api.ts';
import { ipamClaimCrd } from '../../../helpers/ipamclaim-crd.ts';
import { silentLogger } from '../../../helpers/logger.ts';
import { waitFor } from '../../../helpers/processes.ts';
import { type TieredCluster, type TieredNode, tieredCluster } from '../../../store/tiered/nodes.ts';

const NS = 'vms';
const NETWORK = 'tenant-a';
const IFACE = 'pod4f1a2b';
const config = { cniVersion: '1.0.0', name: NETWORK, ipam: { type: 'warren', range: '10.77.0.0/24' } };

interface Node {
  readonly node: TieredNode;
  readonly service: CniService;
  readonly claims: IpamClaims;
}

describe('a VM whose network allows persistent IPs (IPAMClaim)', () => {
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  let client: KubeApiClient;
  let core: CoreV1Api;
  const stops: AbortController[] = [];
  const runs: Promise<void>[] = [];
  const clusters: TieredCluster[] = [];

  before(async () => {
    api = await startFakeKubeApi({ crds: [ipamClaimCrd()] });
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.kubeconfigPath);
    client = await KubeApiClient.open({ kubeConfig });
    core = kubeConfig.makeApiClient(CoreV1Api);
  });
  after(async () => {
    for (const s of stops) s.abort();
    await Promise.all(runs);
    for (const c of clusters) await c.close();
    client?.close();
    await api?.stop();
  });

  /** Three nodes, each with its CNI service planning through its own IpamClaims (watch running). */
  function cluster(): Node[] {
    const c = tieredCluster(['a', 'b', 'c']);
    clusters.push(c);
    const claimApi = new ClaimApi(new OnDemandClient(async () => client));
    return c.nodes.map((node) => {
      const pods = new PodDirectory({
        fetchPod: (namespace, name) => orNotFound(core.readNamespacedPod({ namespace, name })),
        fetchNamespace: (name) => orNotFound(core.readNamespace({ name })),
      });
      const claims = new IpamClaims({
        kubeConfig,
        api: claimApi,
        pod: (ref) => pods.pod(ref),
        holdings: storeClaimHoldings(node.store, node.allocator.holdings),
        clock: c.clock,
        logger: silentLogger,
      });
      const stop = new AbortController();
      stops.push(stop);
      runs.push(claims.run(stop.signal));
      const service = new CniService({
        allocator: node.allocator,
        readiness: async () => undefined,
        clock: c.clock,
        planners: [claims.planner],
        afterAdd: claims.afterAdd,
      });
      return { node, service, claims };
    });
  }

  async function orNotFound<T>(request: Promise<T>): Promise<T | undefined> {
    try {
      return await request;
    } catch (error) {
      if (failureOfError(error).code === 404) return undefined;
      throw error;
    }
  }

  async function createClaim(name: string): Promise<void> {
    const answer = await client.send('create a claim', {
      method: 'POST',
      path: `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${NS}/ipamclaims`,
      body: {
        apiVersion: 'k8s.cni.cncf.io/v1alpha1',
        kind: 'IPAMClaim',
        metadata: { name, namespace: NS, finalizers: [] },
        spec: { network: NETWORK, interface: IFACE },
      },
    });
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
  }

  /** A launcher pod of `vm` on `node`, whose network element names the VM's claim. */
  function launcher(vm: string, pod: string, node: string): void {
    const networks = [{ name: NETWORK, namespace: NS, interface: IFACE, 'ipam-claim-reference': `${vm}.${NETWORK}` }];
    api.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: pod,
        namespace: NS,
        uid: `uid-${pod}`,
        annotations: { 'kubevirt.io/domain': vm, 'k8s.v1.cni.cncf.io/networks': JSON.stringify(networks) },
      },
      spec: { nodeName: node, containers: [{ name: 'compute', image: 'virt-launcher' }] },
    });
  }

  function plainPod(pod: string, node: string): void {
    api.createPod({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pod, namespace: NS, uid: `uid-${pod}` },
      spec: { nodeName: node, containers: [{ name: 'c', image: 'x' }] },
    });
  }

  const cni = (n: Node, command: 'ADD' | 'DEL', pod: string, ifname = IFACE) =>
    n.service.handle({
      command,
      containerID: `sandbox-${pod}`,
      netns: `/var/run/netns/${pod}`,
      ifname,
      args: `K8S_POD_NAMESPACE=${NS};K8S_POD_NAME=${pod};K8S_POD_UID=uid-${pod}`,
      config,
    });

  /** The address an ADD answered, or the CNI error it answered as `error: <code> <msg>`. */
  async function add(n: Node, pod: string, ifname = IFACE): Promise<string> {
    const outcome = await cni(n, 'ADD', pod, ifname);
    if (outcome.kind === 'error') return `error: ${outcome.output.code} ${outcome.output.msg}`;
    assert.equal(outcome.kind, 'result');
    const ips = (outcome.output as { ips?: Array<{ address: string }> }).ips ?? [];
    return ips[0]?.address ?? '';
  }

  const claimStatus = (name: string) =>
    api.object('ipamclaims', name, NS)?.status as { ips?: string[]; ownerPod?: string } | undefined;

  async function statusShows(name: string, address: string, ownerPod: string): Promise<void> {
    await waitFor(`claim ${name} status to show ${address} held by ${ownerPod}`, () => {
      const s = claimStatus(name);
      return s?.ownerPod === ownerPod && s.ips?.length === 1 && s.ips[0] === address ? true : undefined;
    });
    // The CRD's rule (isCIDR), which the fake does not run: each entry is a CIDR.
    for (const ip of claimStatus(name)?.ips ?? []) assert.ok(parseCidr(ip) !== undefined, `${ip} is a CIDR`);
  }

  it('keeps the address through a restart on another node, and the status shows who holds it', async () => {
    const [a, b] = cluster() as [Node, Node];
    await createClaim(`vm1.${NETWORK}`);
    launcher('vm1', 'virt-launcher-vm1-aaaaa', 'a');
    const first = await add(a, 'virt-launcher-vm1-aaaaa');
    assert.match(first, /^10\.77\.0\.\d+\/24$/);
    await statusShows(`vm1.${NETWORK}`, first, 'virt-launcher-vm1-aaaaa');
    // The VM stops: its launcher pod goes (DEL), and starts again on node b.
    assert.equal((await cni(a, 'DEL', 'virt-launcher-vm1-aaaaa')).kind, 'silent');
    api.deletePod(NS, 'virt-launcher-vm1-aaaaa', { force: true });
    launcher('vm1', 'virt-launcher-vm1-bbbbb', 'b');
    // Node b's watch has the claim by now: its ADD reads no claim from the API server.
    await waitFor('node b to have the claim', () => b.claims.cache.peek({ namespace: NS, name: `vm1.${NETWORK}` }));
    const claimGets = () => api.requests.filter((r) => r.verb === 'get' && r.resource === 'ipamclaims').length;
    const before = claimGets();
    assert.equal(await add(b, 'virt-launcher-vm1-bbbbb'), first);
    assert.equal(claimGets(), before, 'no GET of the claim on the ADD path');
    await statusShows(`vm1.${NETWORK}`, first, 'virt-launcher-vm1-bbbbb');
  });

  it('gives both launcher pods of a live migration the address, and no other pod ever gets it', async () => {
    const nodes = cluster() as [Node, Node, Node];
    const [a, b] = nodes;
    await createClaim(`vm2.${NETWORK}`);
    launcher('vm2', 'virt-launcher-vm2-src', 'a');
    const held = await add(a, 'virt-launcher-vm2-src');
    const burst = async (round: string) => {
      const names = nodes.flatMap((n, i) => Array.from({ length: 12 }, (_, j) => [n, `p-${round}-${i}-${j}`] as const));
      for (const [n, pod] of names) plainPod(pod, n.node.name);
      return Promise.all(names.map(([n, pod]) => add(n, pod, 'net1')));
    };
    // The migration target starts on node b while the source still runs; other pods burst meanwhile.
    launcher('vm2', 'virt-launcher-vm2-dst', 'b');
    const [target, others] = await Promise.all([add(b, 'virt-launcher-vm2-dst'), burst('during')]);
    assert.equal(target, held, 'the target launcher holds the claim address too');
    for (const got of others) {
      assert.match(got, /^10\.77\.0\.\d+\/24$/);
      assert.notEqual(got, held);
    }
    // The source goes after the migration; the target keeps the address, other pods still never get it.
    assert.equal((await cni(a, 'DEL', 'virt-launcher-vm2-src')).kind, 'silent');
    for (const got of await burst('after')) assert.notEqual(got, held);
    const users = (await Promise.all(nodes.map((n) => n.node.store.list({ address: held.split('/')[0] }))))
      .flat()
      .filter((x) => !isHeldPlaceholder(x));
    assert.deepEqual(
      users.map((u) => u.podName),
      ['virt-launcher-vm2-dst'],
    );
    await statusShows(`vm2.${NETWORK}`, held, 'virt-launcher-vm2-dst');
  });

  it('releases the address when the claim is deleted', async () => {
    const [a] = cluster() as [Node];
    await createClaim(`vm3.${NETWORK}`);
    launcher('vm3', 'virt-launcher-vm3-aaaaa', 'a');
    const held = await add(a, 'virt-launcher-vm3-aaaaa');
    const key = `ipamclaim/${NS}/vm3.${NETWORK}`;
    assert.equal((await a.node.allocator.holdings.holdingOf(key)).length, 1);
    // The VM is deleted: its launcher pod goes, then KubeVirt deletes the claim.
    await cni(a, 'DEL', 'virt-launcher-vm3-aaaaa');
    api.deleteObject('ipamclaims', `vm3.${NETWORK}`, NS);
    await waitFor('the holding to end', async () =>
      (await a.node.allocator.holdings.holdingOf(key)).length === 0 ? true : undefined,
    );
    await waitFor('the placeholder to go', async () =>
      (await a.node.store.list()).some(isHeldPlaceholder) ? undefined : true,
    );
    // The address is free: a pod asking for it (on the node whose block holds it) gets it.
    plainPod('after-vm3', 'a');
    const ip = held.split('/')[0] as string;
    const outcome = await a.service.handle({
      command: 'ADD',
      containerID: 'sandbox-after-vm3',
      netns: '/var/run/netns/after-vm3',
      ifname: 'net1',
      args: `IP=${ip};K8S_POD_NAMESPACE=${NS};K8S_POD_NAME=after-vm3;K8S_POD_UID=uid-after-vm3`,
      config,
    });
    assert.equal(outcome.kind, 'result', JSON.stringify(outcome));
    assert.match(JSON.stringify(outcome.output), new RegExp(`"${ip.replaceAll('.', '\\.')}/24"`));
  });

  it('refuses a launcher pod naming a claim that does not exist (code 7, naming it)', async () => {
    const [a] = cluster() as [Node];
    launcher('vm4', 'virt-launcher-vm4-aaaaa', 'a');
    const got = await add(a, 'virt-launcher-vm4-aaaaa');
    assert.match(
      got,
      /^error: 7 pod vms\/virt-launcher-vm4-aaaaa .*IPAMClaim vms\/vm4\.tenant-a, which does not exist/,
    );
  });
});

describe('a cluster without KubeVirt (no IPAMClaim CRD)', () => {
  it('does not watch claims, and an ADD naming one is refused saying the CRD is missing', async () => {
    const api = await startFakeKubeApi();
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.kubeconfigPath);
    const client = await KubeApiClient.open({ kubeConfig });
    const c = tieredCluster(['a']);
    const stop = new AbortController();
    try {
      const node = c.nodes[0] as TieredNode;
      const claims = new IpamClaims({
        kubeConfig,
        api: new ClaimApi(new OnDemandClient(async () => client)),
        pod: async () =>
          podViewOf({
            metadata: {
              name: 'launcher',
              namespace: NS,
              uid: 'u',
              annotations: {
                'k8s.v1.cni.cncf.io/networks': `[{"name":"x","interface":"net1","ipam-claim-reference":"vm.x"}]`,
              },
            },
          }),
        holdings: storeClaimHoldings(node.store, node.allocator.holdings),
        clock: c.clock,
        logger: silentLogger,
      });
      const running = claims.run(stop.signal);
      await waitFor('the discovery answer', () => (claims.status().served === false ? true : undefined));
      assert.equal(api.requests.filter((r) => r.resource === 'ipamclaims').length, 0, 'no listing of a CRD not there');
      // Asked at once, then again one recheck interval (5 minutes) after the answer, on the clock.
      assert.deepEqual(claims.status().servedCheck, {
        runs: 1,
        failures: 0,
        lastRunAt: new Date(c.clock.now()).toISOString(),
      });
      c.clock.advance(5 * 60_000 - 1);
      assert.equal(claims.status().servedCheck.runs, 1);
      c.clock.advance(1);
      assert.equal(claims.status().servedCheck.runs, 2);
      const service = new CniService({
        allocator: node.allocator,
        readiness: async () => undefined,
        clock: c.clock,
        planners: claims.planners,
      });
      const outcome = await service.handle({
        command: 'ADD',
        containerID: 'c1',
        netns: '/var/run/netns/c1',
        ifname: 'net1',
        args: `K8S_POD_NAMESPACE=${NS};K8S_POD_NAME=launcher`,
        config,
      });
      assert.equal(outcome.kind, 'error');
      assert.equal(outcome.output.code, 7);
      assert.match(
        outcome.output.msg,
        /does not serve ipamclaims\.k8s\.cni\.cncf\.io .*IPAMClaim CustomResourceDefinition/,
      );
      stop.abort();
      await running;
    } finally {
      stop.abort();
      await c.close();
      client.close();
      await api.stop();
    }
  });
});
