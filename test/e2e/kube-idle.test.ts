/**
 * Issue 36's silence, through real agents: the DaemonSet's flags (the Kubernetes sources on, the
 * kubernetes store, its default timers but a 90 s Lease). Two nodes: the first started holds the
 * cluster's chores (pool status, sticky release) and one address in a shared range; the second
 * holds no chore. From one renewal of the first one's Lease to the next (three runs of its cluster
 * chores), the fake API server's log shows no LIST, no write of the first but that renewal, and no
 * write at all of the second: an agent holding no chore renews nothing (liveness on demand,
 * src/store/kubernetes/lease-ping.ts). What the agents must know they learn from the watches they
 * opened, each listed once when it opened. The window is the chore holder's own renewals, not a
 * time the test picks; the in-process budget at 50 nodes on an injected clock is
 * test/store/scale/idle-budget.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../src/api/client.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { startAgent } from '../helpers/agent.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { KUBE_NAMESPACE, breakdown, cniCall, kubeStoreArgs } from '../helpers/kube-store.ts';
import { nodeLeaseName } from '../../src/store/kubernetes/names.ts';
import { waitFor } from '../helpers/processes.ts';

const NODE = 'kidle1';
/** A second node, started after the first took the chores: it holds none. */
const IDLE_NODE = 'kidle2';
const IPAM = { range: '10.78.0.0/24' };
/** What the agent watches once it holds a block (its claims, spaces, requests' and holdings' views, its Lease, the state object). */
const WATCHED = ['warrenblocks', 'warrenaddressspaces', 'warrenaddressrequests', 'warrenaddressholdings', 'leases'];
/** A lease of 90 s is written every 30 s: a window of three chore runs between two renewals. */
const LEASE = '90';

describe('an idle agent on the kubernetes store (the DaemonSet flags, default timers)', () => {
  let api: FakeKubeApi;
  let agent: AgentHandle;
  let idle: AgentHandle;
  /** The DaemonSet's flags for `node`, with a kubeconfig of its own (its requests told apart). */
  const argsOf = (node: string) =>
    kubeStoreArgs(api, node, ['--node-lease', LEASE], 'default').map((a) =>
      a === api.kubeconfigPath ? api.clientKubeconfig(node) : a,
    );

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    api.createNode(NODE);
    api.createNode(IDLE_NODE);
    agent = await startAgent({ args: argsOf(NODE) });
  });
  after(async () => {
    await idle?.kill();
    await agent?.kill();
    await api?.stop();
  });

  it('makes no LIST and writes nothing but its Lease between two of its renewals', async () => {
    const added = await cniCall('ADD', agent, 'idle', IPAM, 'kidle-c1');
    assert.equal(added.code, 0, JSON.stringify(added));
    const chores = () => api.objects('leases').filter((l) => l.metadata.labels?.['warren.dev/lease'] === 'task');
    await waitFor('the first node to hold the chores', () => (chores().length >= 1 ? true : undefined));
    idle = await startAgent({ args: argsOf(IDLE_NODE) });
    await waitFor('the second node announced', () =>
      api.object('leases', nodeLeaseName(IDLE_NODE), KUBE_NAMESPACE) === undefined ? undefined : true,
    );
    // Settled: every watch open and the block published.
    await waitFor('the watches open', () => (WATCHED.every((r) => api.watchCount(r) > 0) ? true : undefined));
    await waitFor('the block published', () => (api.objects('warrenblockpublications').length > 0 ? true : undefined));
    // The window runs from one renewal of the node's Lease to the next (read from the fake's storage,
    // not over the API): a third of the lease, three of the chores' 10 s runs.
    const version = () => api.object('leases', nodeLeaseName(NODE), KUBE_NAMESPACE)?.metadata.resourceVersion;
    const renewedFrom = async (before: string | undefined) =>
      waitFor('the Lease renewed', () => {
        const now = version();
        return now !== undefined && now !== before ? now : undefined;
      });
    const first = await renewedFrom(version());
    const since = api.requests.length;
    await renewedFrom(first);
    const window = api.requests.slice(since);
    const lists = window.filter((r) => r.verb === 'list');
    const isWrite = (r: (typeof window)[number]) => r.verb !== undefined && !['get', 'list', 'watch'].includes(r.verb);
    const writes = window.filter((r) => isWrite(r) && r.client === NODE);
    assert.deepEqual(lists, [], `no LIST in the idle window; it held: ${breakdown(window) || 'nothing'}`);
    assert.deepEqual(
      writes.map((r) => `${r.verb} ${r.resource}`),
      ['update leases'],
      `the chore holder's renewal its only write: ${breakdown(window)}`,
    );
    // Issue 36, liveness on demand: the node holding no chore writes nothing at all.
    const idleWrites = window.filter((r) => isWrite(r) && r.client !== NODE);
    assert.deepEqual(
      idleWrites.map((r) => `${r.client ?? 'unknown'}: ${r.verb} ${r.path}`),
      [],
      `the node holding no chore writes nothing: ${breakdown(window)}`,
    );
    assert.ok(
      chores().every((l) => (l.spec as { holderIdentity?: string } | undefined)?.holderIdentity === NODE),
      'the first node holds every chore',
    );
    const idleStatus = await new ApiClient({ socket: idle.socket }).status();
    assert.ok((idleStatus.cluster?.upkeep?.runs ?? 0) >= 2, `its chores ran: ${JSON.stringify(idleStatus.cluster)}`);
    const status = await new ApiClient({ socket: agent.socket }).status();
    assert.ok((status.cluster?.upkeep?.runs ?? 0) >= 3, `the chores ran meanwhile: ${JSON.stringify(status.cluster)}`);
  });
});
