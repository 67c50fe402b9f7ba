/**
 * Issue 36's silence, through a real agent: the DaemonSet's flags (the Kubernetes sources on, the
 * kubernetes store, its default timers but a 90 s Lease), one address held in a shared range,
 * then nothing to do from one renewal of its Lease to the next (three runs of its cluster chores).
 * The fake API server's log shows no LIST and no write but the renewal: what the agent must know it
 * learns from the watches it opened, each listed once when it opened. The window is the agent's
 * own renewals, not a time the test picks; the in-process budget at 50 nodes on an injected clock
 * is test/store/scale/idle-budget.test.ts.
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
const IPAM = { range: '10.78.0.0/24' };
/** What the agent watches once it holds a block (its claims, spaces, requests' and holdings' views, its Lease, the state object). */
const WATCHED = ['warrenblocks', 'warrenaddressspaces', 'warrenaddressrequests', 'warrenaddressholdings', 'leases'];
/** A lease of 90 s is written every 30 s: a window of three chore runs between two renewals. */
const LEASE = '90';

describe('an idle agent on the kubernetes store (the DaemonSet flags, default timers)', () => {
  let api: FakeKubeApi;
  let agent: AgentHandle;

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    api.createNode(NODE);
    agent = await startAgent({ args: kubeStoreArgs(api, NODE, ['--node-lease', LEASE], 'default') });
  });
  after(async () => {
    await agent?.kill();
    await api?.stop();
  });

  it('makes no LIST and writes nothing but its Lease between two of its renewals', async () => {
    const added = await cniCall('ADD', agent, 'idle', IPAM, 'kidle-c1');
    assert.equal(added.code, 0, JSON.stringify(added));
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
    const writes = window.filter((r) => r.verb !== undefined && !['get', 'list', 'watch'].includes(r.verb));
    assert.deepEqual(lists, [], `no LIST in the idle window; it held: ${breakdown(window) || 'nothing'}`);
    assert.deepEqual(
      writes.map((r) => `${r.verb} ${r.resource}`),
      ['update leases'],
      `the renewal its only write: ${breakdown(window)}`,
    );
    const status = await new ApiClient({ socket: agent.socket }).status();
    assert.ok((status.cluster?.upkeep?.runs ?? 0) >= 3, `the chores ran meanwhile: ${JSON.stringify(status.cluster)}`);
  });
});
