/**
 * WarrenPools end to end: a real agent on store `kubernetes` against the fake API server (with
 * Warren's CRDs from deploy/), pools created through the API as an operator applies them (checked
 * against the CRD's schema), namespaces and pods as Kubernetes has them, and ADDs through the
 * installed plugin with the pod named in CNI_ARGS, as the runtime calls it:
 * - the pool the order says (pod annotation > namespace annotation > config) for each combination;
 * - a pool whose nodeSelector does not match this node, or whose namespaceSelector does not admit
 *   the pod's namespace, refused with code 7 naming the selector;
 * - no GET of a pod or namespace (and no request for the pools) on an ADD whose pod the watch holds;
 * - the pool's status (capacity, used) written by the agent, shown by `warren pools` and the metrics;
 * - a whereabouts config (inline range) beside them, unchanged.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import { CNI_CODES } from '../../src/cni/errors.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import { Resource, warrenKind } from '../../src/store/kubernetes/resources.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { kubeStoreArgs, networkConfig } from '../helpers/kube-store.ts';
import { sample, scrape } from '../helpers/prometheus.ts';
import { WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const NODE = 'kpool1';
const ANNOTATION = 'warren.dev/pools';

const POOLS = [
  { name: 'cfg-pool', spec: { ranges: [{ range: '10.91.1.0/24' }] } },
  { name: 'ns-pool', spec: { ranges: [{ range: '10.91.2.0/24' }] } },
  {
    name: 'pod-pool',
    spec: { ranges: [{ range: '10.91.3.0/24', gateway: '10.91.3.1' }], routes: [{ dst: '10.0.0.0/8' }] },
  },
  { name: 'rack2-pool', spec: { ranges: [{ range: '10.91.4.0/24' }], nodeSelector: { matchLabels: { rack: 'r2' } } } },
  {
    name: 'tenant-pool',
    spec: {
      ranges: [{ range: '10.91.5.0/24' }],
      namespaceSelector: { matchExpressions: [{ key: 'tenant', operator: 'In', values: ['blue'] }] },
    },
  },
];

/** The pods of this node: namespace, name, and the pools their annotation names. */
const PODS: ReadonlyArray<readonly [string, string, string | undefined]> = [
  ['plain', 'by-config', undefined],
  ['annotated', 'by-namespace', undefined],
  ['plain', 'by-pod', 'pod-pool'],
  ['annotated', 'by-pod-over-namespace', 'pod-pool'],
  ['plain', 'other-rack', 'rack2-pool'],
  ['red', 'wrong-tenant', 'tenant-pool'],
  ['blue', 'right-tenant', 'tenant-pool'],
  ['plain', 'whereabouts', undefined],
];

async function status(agent: AgentHandle): Promise<AgentStatus> {
  const r = await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status', timeoutMs: 10_000 });
  return r.body as AgentStatus;
}

describe('WarrenPools through the installed plugin on the fake API server', () => {
  let api: FakeKubeApi;
  let agent: AgentHandle;
  let client: KubeApiClient;

  const add = (namespace: string, name: string, ipam: Record<string, unknown>): Promise<CniReply> =>
    warren({
      command: 'ADD',
      containerID: `c-${namespace}-${name}`,
      netns: `/var/run/netns/${name}`,
      ifname: 'net1',
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=${api.getPod(namespace, name)?.metadata.uid}`,
      config: networkConfig(agent, 'tenants', ipam),
    });

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath) });
    const pools = new Resource(client, warrenKind('warrenpools'));
    for (const p of POOLS) {
      const created = await pools.create(`create pool ${p.name}`, {
        apiVersion: 'warren.dev/v1alpha1',
        kind: 'WarrenPool',
        metadata: { name: p.name },
        spec: p.spec,
      });
      assert.equal(created.kind, 'created', p.name);
    }
    api.createNode({ metadata: { name: NODE, labels: { rack: 'r1' } }, spec: {}, status: {} });
    api.createNamespace('plain');
    api.createNamespace('annotated', { annotations: { [ANNOTATION]: 'ns-pool' } });
    api.createNamespace('red', { labels: { tenant: 'red' } });
    api.createNamespace('blue', { labels: { tenant: 'blue' } });
    for (const [namespace, name, pools] of PODS)
      api.createPod({
        metadata: { namespace, name, ...(pools === undefined ? {} : { annotations: { [ANNOTATION]: pools } }) },
        spec: { nodeName: NODE, containers: [{ name: 'c', image: 'pause' }] },
      });
    agent = await startAgent({ args: kubeStoreArgs(api, NODE, ['--metrics-address', '127.0.0.1:0']) });
    // The watches have brought the pods, namespaces, pools and the node's labels.
    await waitFor('the agent to hold the pods, namespaces and WarrenPools', async () => {
      const planning = (await status(agent)).kubernetes?.planning;
      const ready =
        planning !== undefined &&
        planning.directory.pods >= PODS.length &&
        planning.directory.namespacesListed &&
        planning.pools?.listed === true &&
        planning.pools.list.length === POOLS.length &&
        planning.pools.nodeLabelsRead;
      return ready ? true : undefined;
    });
  });
  after(async () => {
    await agent?.kill();
    client?.close();
    await api?.stop();
  });

  it('gives each pod the pool the order says, with no GET of a pod or namespace, and refuses by selector', async () => {
    const before = api.requestCounts();
    const config = { pools: ['cfg-pool'] };
    const got = new Map<string, CniReply>();
    for (const [namespace, name] of PODS) {
      if (name === 'whereabouts') continue;
      got.set(name, await add(namespace, name, config));
    }
    const address = (name: string) => {
      const reply = got.get(name) as CniReply;
      assert.equal(reply.code, 0, `${name}: ${reply.stdout}`);
      return resultAddresses(reply)[0] as string;
    };
    assert.match(address('by-config'), /^10\.91\.1\./);
    assert.match(address('by-namespace'), /^10\.91\.2\./);
    assert.match(address('by-pod'), /^10\.91\.3\./);
    assert.match(address('by-pod-over-namespace'), /^10\.91\.3\./);
    assert.match(address('right-tenant'), /^10\.91\.5\./);
    const byPod = got.get('by-pod')?.json as { routes?: unknown[]; ips?: Array<{ gateway?: string }> };
    assert.deepEqual(byPod.routes, [{ dst: '10.0.0.0/8' }], "the pool's routes");
    assert.equal(byPod.ips?.[0]?.gateway, '10.91.3.1', "the pool's gateway");

    const rack = got.get('other-rack') as CniReply;
    assert.equal(rack.json?.code, CNI_CODES.INVALID_CONFIG, rack.stdout);
    assert.match(String(rack.json?.msg), /rack2-pool's nodeSelector \(rack=r2\) does not match the node's labels/);
    const tenant = got.get('wrong-tenant') as CniReply;
    assert.equal(tenant.json?.code, CNI_CODES.INVALID_CONFIG, tenant.stdout);
    assert.match(String(tenant.json?.msg), /not for namespace red: its namespaceSelector \(tenant=blue\)/);

    const afterAdds = api.requestCounts();
    for (const key of ['get pods', 'get namespaces', 'get warrenpools', 'list warrenpools', 'list namespaces'])
      assert.equal(afterAdds[key] ?? 0, before[key] ?? 0, `${key}: the watches held what the ADDs read`);
  });

  it('keeps a whereabouts config with its inline range as it was, annotations or not', async () => {
    const reply = await add('plain', 'whereabouts', { range: '192.168.91.0/28', datastore: 'kubernetes' });
    assert.equal(reply.code, 0, reply.stdout);
    assert.match(resultAddresses(reply)[0] as string, /^192\.168\.91\./);
  });

  it("writes each pool's capacity and use to its status, and warren pools shows them", async () => {
    // The writer writes one pool after another: wait for the three this test reads, each counted.
    const written = await waitFor('the status of the four pools the test reads to count their addresses', () => {
      const status = (name: string) =>
        api.object('warrenpools', name)?.status as { used?: number; capacity?: string } | undefined;
      const [cfg, pod, unused, tenant] = ['cfg-pool', 'pod-pool', 'rack2-pool', 'tenant-pool'].map(status);
      const counted = cfg?.used === 1 && pod?.used === 2 && unused?.used !== undefined && tenant?.used === 1;
      return counted ? { cfg, pod, unused } : undefined;
    });
    assert.equal(written.cfg.capacity, '254');
    assert.equal(written.pod.capacity, '253', 'the gateway is not handed out');
    assert.equal(written.unused.used, 0);

    const shown = await waitFor('warren pools to show the status', async () => {
      const r = await run(WARREN_BIN, ['pools', '--socket', agent.socket]);
      assert.equal(r.code, 0, r.stderr);
      const both =
        /cfg-pool\s+10\.91\.1\.0\/24\s+254\s+1\b/.test(r.stdout) && /tenant-pool\s+\S+\s+254\s+1\b/.test(r.stdout);
      return both ? r.stdout : undefined;
    });
    assert.match(shown, /WarrenPools:/);
    const families = await scrape((await status(agent)).metrics?.address as string);
    assert.equal(sample(families, 'warren_warrenpool_used_addresses', { warrenpool: 'pod-pool' }), 2);
    assert.equal(sample(families, 'warren_warrenpool_capacity_addresses', { warrenpool: 'pod-pool' }), 253);
    assert.match(shown, /rack2-pool\s+10\.91\.4\.0\/24\s+254\s+0\s+\S+\s+rack=r2\s+\(every namespace\)\s+no/);
    assert.match(shown, /tenant-pool\s+10\.91\.5\.0\/24\s+254\s+1\s+1\s+\(every node\)\s+tenant=blue\s+no/);
  });
});
