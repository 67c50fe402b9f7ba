/**
 * Store `kubernetes` while the API server is away: two real agents on the fake API server, driven
 * through the installed plugin. The fake answers every request 503 while away (as a load balancer
 * in front of a down apiserver does), so what the agents try is still in its request log. A node
 * with room in its own blocks serves ADD and DEL without a request to the cluster, also past its
 * lease's length; its published view catches up once the server is back. A node with no room
 * answers 11 (try again later) naming the API server, and is served once the server is back.
 *
 * The issue states the floor for 60 s away; this test stays away only as long as proves the same
 * thing: past the agents' lease (LEASE_SECONDS) and several publication rounds, observed as the
 * agents' lease renewals refused after that time, not slept.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { resultAddresses } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  LEASE_SECONDS,
  cniCall,
  describeRequests,
  observeTier,
  publishedAllocations,
  requestKind,
  requestsOf,
  startKubeNode,
} from '../helpers/kube-store.ts';
import { waitFor } from '../helpers/processes.ts';

/** Blocks of 64 (a /24 would get blocks of 2): room for every ADD here in the first block. */
const ROOM = { range: '10.252.0.0/24', block_size: 26 };
/** One block only: the node that claims it first has room, the other must ask. */
const TINY = { range: '10.253.0.0/28', block_size: 28 };

describe('store kubernetes with the API server away', () => {
  let api: FakeKubeApi;
  let observer: ClusterTier;
  let roomy: AgentHandle;
  let cramped: AgentHandle;

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    roomy = await startKubeNode(api, 'ka1');
    cramped = await startKubeNode(api, 'ka2');
    observer = await observeTier(api);
    // ka1 claims a block of each range while the server is there.
    for (const [ipam, id] of [
      [ROOM, 'before'],
      [TINY, 'tiny-before'],
    ] as const) {
      const reply = await cniCall('ADD', roomy, 'away', ipam, id);
      assert.equal(reply.code, 0, reply.stdout);
    }
  });
  after(async () => {
    await roomy?.kill();
    await cramped?.kill();
    await observer?.close();
    await api?.stop();
  });

  it('serves ADD and DEL on a node with room with no request to the cluster', async () => {
    const since = api.requests.length;
    for (let i = 0; i < 10; i++) {
      const add = await cniCall('ADD', roomy, 'away', ROOM, `common-${i}`);
      assert.equal(add.code, 0, add.stdout);
      const del = await cniCall('DEL', roomy, 'away', ROOM, `common-${i}`);
      assert.equal(del.code, 0, del.stdout);
    }
    const writes = requestsOf(api.requests, ['write'], since);
    assert.deepEqual(describeRequests(writes), '', 'no claim, range, admission or request write');
  });

  it('keeps serving a node with room while the server is away, answers 11 where there is none, and catches up', async () => {
    await api.setUnavailable(true, '503');
    const downAt = Date.now();
    const since = api.requests.length;
    const added = await cniCall('ADD', roomy, 'away', ROOM, 'during');
    assert.equal(added.code, 0, added.stdout);
    const released = await cniCall('DEL', roomy, 'away', ROOM, 'before');
    assert.equal(released.code, 0, released.stdout);
    assert.deepEqual(
      describeRequests(requestsOf(api.requests, ['write'], since)),
      '',
      'the ADD and DEL tried no write to the cluster',
    );

    const refused = await cniCall('ADD', cramped, 'away', TINY, 'cramped');
    assert.equal(refused.json?.code, 11, refused.stdout);
    assert.match(String(refused.json?.msg), /Kubernetes API|API server/i, refused.stdout);

    // Past the lease: ka1's renewals refused after its lease ran out, and it still serves.
    const leaseMs = LEASE_SECONDS * 1000;
    await waitFor('a lease renewal refused after the lease ran out', () => {
      if (Date.now() - downAt <= leaseMs) return undefined;
      return api.requests.slice(since).some((r) => requestKind(r) === 'lease' && r.status === 503) ? true : undefined;
    });
    const late = await cniCall('ADD', roomy, 'away', ROOM, 'late');
    assert.equal(late.code, 0, late.stdout);
    for (const command of ['ADD', 'DEL'] as const) {
      const brief = await cniCall(command, roomy, 'away', ROOM, 'late-brief');
      assert.equal(brief.code, 0, `${command} past the lease: ${brief.stdout}`);
    }

    await api.setUnavailable(false);
    await waitFor('the published view to catch up', async () => {
      const ids = new Set((await publishedAllocations(observer, ROOM.range)).map((a) => a.containerID));
      return ids.has('during') && ids.has('late') && !ids.has('before') && !ids.has('late-brief') ? true : undefined;
    });
    const published = (await publishedAllocations(observer, ROOM.range)).find((a) => a.containerID === 'during');
    assert.equal(published?.address, resultAddresses(added)[0]);

    const served = await cniCall('ADD', cramped, 'away', TINY, 'cramped');
    assert.equal(served.code, 0, `the node with no room is served once the server is back: ${served.stdout}`);
  });
});
