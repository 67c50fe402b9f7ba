/**
 * The API server's etcd restored from an older snapshot under agents on the kubernetes store (the
 * fake API server's `restoreSnapshot`: objects created since gone, resourceVersions back, watches
 * ended and answered 410 Gone), with real agent processes, the real plugin executable and CLI:
 * - the agent that claimed blocks since the snapshot notices (its Lease back at an older
 *   resourceVersion, answers gone backwards) and stops allocating: ADD 11 and STATUS 50 naming why,
 *   `warren status` says it, and it writes the recovery marker in the WarrenClusterState;
 * - an agent started afterwards on a new node honours the marker: it claims no block and hands out
 *   no address while the halted node has not accepted the store;
 * - the procedure of docs/recovery.md ("When the API server lost its data"), followed step by step, ends the
 *   recovery: then every container keeps its address and no address is handed out twice, and the
 *   accepting agent's pod source lists the pods again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AgentHandle } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { cniCall, networkConfig, startKubeNode } from '../helpers/kube-store.ts';
import { CHILD_PATH, WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const NETWORK = 'restored';
const RANGE = { range: '10.241.40.0/24' };

function cli(agent: AgentHandle, ...args: string[]) {
  return run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
}

const add = (agent: AgentHandle, id: string) => cniCall('ADD', agent, NETWORK, RANGE, id);

async function problem(agent: AgentHandle): Promise<string | undefined> {
  const s = await cli(agent, 'status', '--json');
  return (JSON.parse(s.stdout) as { cluster?: { problem?: string } }).cluster?.problem;
}

/** How many times the agent's pod source listed the pods (its log). */
function podListings(agent: AgentHandle): number {
  return agent
    .log()
    .split('\n')
    .filter((line) => line.includes('"path":"/api/v1/pods"') && line.includes('"msg":"kubernetes: listed"')).length;
}

function marker(api: FakeKubeApi): { pending: string[] } | undefined {
  const state = api.object('warrenclusterstates', 'store');
  return (state?.spec as { recovery?: { pending: string[] } } | undefined)?.recovery;
}

describe("the API server's etcd restored from an older snapshot under the agents", () => {
  let api: FakeKubeApi;
  let n1: AgentHandle;
  let n2: AgentHandle | undefined;
  const held = new Map<string, string>();
  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    n1 = await startKubeNode(api, 'kr-n1');
  });
  after(async () => {
    await n2?.kill();
    await n1?.kill();
    await api?.stop();
  });

  it('the node that claimed blocks since the snapshot stops (ADD 11, STATUS 50, status says why) and marks the cluster in recovery', async () => {
    assert.ok(api.object('warrenclusterstates', 'store'), 'the first agent recorded the store identity');
    const snapshot = api.snapshot(); // n1 announced, no block claimed yet
    for (const id of ['k1', 'k2', 'k3']) {
      const reply = await add(n1, id);
      assert.equal(reply.code, 0, reply.stdout);
      held.set(id, resultAddresses(reply)[0] as string);
    }
    assert.ok(api.objects('warrenblocks').length > 0);
    api.restoreSnapshot(snapshot);
    assert.equal(api.objects('warrenblocks').length, 0, 'the claims made since the snapshot are gone');

    await waitFor('n1 to notice the store went back', async () => ((await problem(n1)) ? true : undefined));
    assert.match((await problem(n1)) ?? '', /lost its data|went backwards/);
    for (const id of ['k4', ...held.keys()]) {
      const reply = await add(n1, id);
      assert.equal(reply.json?.code, 11, reply.stdout);
      assert.match(String(reply.json?.msg), /lost its data|went backwards/);
    }
    const status = await warren({ command: 'STATUS', config: networkConfig(n1, NETWORK, RANGE) });
    assert.equal(status.json?.code, 50, status.stdout);
    assert.match((await cli(n1, 'status')).stdout, /NOT ALLOCATING: .*(lost its data|went backwards)/);
    await waitFor('the recovery marker', () => (marker(api) === undefined ? undefined : true));
    assert.deepEqual(marker(api)?.pending, ['kr-n1']);
  });

  it('an agent started afterwards on a new node claims no block and hands out no address while the marker stands', async () => {
    n2 = await startKubeNode(api, 'kr-n2');
    const reply = await add(n2, 'new-1');
    assert.equal(reply.json?.code, 11, reply.stdout);
    assert.match(String(reply.json?.msg), /in recovery .*waiting for kr-n1/);
    assert.deepEqual(api.objects('warrenblocks'), [], 'no block claimed by anyone');
  });

  it('the procedure of docs/recovery.md, step by step, ends the recovery with no address handed out twice', async () => {
    assert.ok(n2);
    // 1. `warren status` on each node: n1 stopped on the lost store, n2 waits for n1.
    assert.match((await problem(n1)) ?? '', /lost its data|went backwards/);
    assert.match((await problem(n2)) ?? '', /waiting for kr-n1/);
    // 2. No newer backup of the API server's etcd: the store is accepted as it is.
    // 3. `warren store accept` on every node that stopped: n1 claims its blocks again.
    const listedBefore = podListings(n1);
    const accepted = await cli(n1, 'store', 'accept');
    assert.equal(accepted.code, 0, accepted.stdout + accepted.stderr);
    assert.match(accepted.stdout, /wrote back 3 addresses and [1-9][0-9]* block claims/);
    // Its pod source lists again: its watch may have resumed from a version the restored server has not reached.
    await waitFor('the pod source listed again', () => (podListings(n1) > listedBefore ? true : undefined));
    assert.equal(marker(api), undefined, 'the last node to accept removed the marker');
    // 4. `warren status` on every node: no node waits any more.
    for (const agent of [n1, n2])
      await waitFor('the recovery to end', async () => ((await problem(agent)) === undefined ? true : undefined));
    for (const [id, address] of held) {
      const retried = await add(n1, id);
      assert.deepEqual(resultAddresses(retried), [address], `${id} keeps ${address}`);
    }
    const fresh: string[] = [];
    for (let i = 0; i < 5; i++) {
      for (const agent of [n1, n2]) {
        const reply = await add(agent, `${agent === n1 ? 'a' : 'b'}-${i}`);
        assert.equal(reply.code, 0, reply.stdout);
        fresh.push(...resultAddresses(reply));
      }
    }
    const all = [...held.values(), ...fresh];
    assert.equal(new Set(all).size, all.length, `an address handed out twice: ${all.join(', ')}`);
  });
});

describe('a node the recovery marker waits for, that did not notice the loss itself', () => {
  // The soak on etcd found it there (seed 11); the kubernetes store had the same rule: a node
  // started again after the restore only waits for the marker, and its accept wrote back none of
  // its blocks claimed since the snapshot; once the marker was gone another node could claim one
  // of them and hand out an address a container of the first still held.
  let api: FakeKubeApi;
  const agents: AgentHandle[] = [];
  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const agent of agents) await agent.kill();
    await api?.stop();
  });

  it("claims its blocks again at its accept, so no other node hands out its containers' addresses", async () => {
    const n1 = await startKubeNode(api, 'kw-n1');
    const n2 = await startKubeNode(api, 'kw-n2');
    agents.push(n1, n2);
    // n1 holds a block in the snapshot (the marker names it), and claims more after it.
    for (const id of ['w0', 'w0b']) assert.equal((await add(n1, id)).code, 0);
    const snapshot = api.snapshot();
    const held: string[] = [];
    for (const id of ['w1', 'w2', 'w3', 'w4']) {
      const reply = await add(n1, id);
      assert.equal(reply.code, 0, reply.stdout);
      held.push(...resultAddresses(reply));
    }
    assert.equal((await add(n2, 'v1')).code, 0);
    await n1.kill();
    api.restoreSnapshot(snapshot);
    await waitFor('n2 to notice the store went back', async () => ((await problem(n2)) ? true : undefined));

    const again = await startKubeNode(api, 'kw-n1', { dir: n1.dir });
    agents.push(again);
    await waitFor('n1 to stop, on the lost store or for the recovery', async () =>
      (await problem(again)) ? true : undefined,
    );
    await waitFor('the marker to wait for n1', () => (marker(api)?.pending.includes('kw-n1') ? true : undefined));
    const accepted = await cli(again, 'store', 'accept');
    assert.match(accepted.stdout, /wrote back 6 addresses and [1-9][0-9]* block claims/, accepted.stdout);
    // Exit 1: this node accepted, and the marker still waits for n2.
    assert.match(accepted.stdout, /still not allocating: .*waiting for kw-n2$/m);
    const other = await cli(n2, 'store', 'accept');
    assert.equal(other.code, 0, other.stdout + other.stderr);
    for (const agent of [again, n2])
      await waitFor('the recovery to end', async () => ((await problem(agent)) === undefined ? true : undefined));
    const given: string[] = [];
    for (let i = 0; i < 20; i++) {
      const reply = await add(n2, `v-${i}`);
      if (reply.code === 0) given.push(...resultAddresses(reply));
    }
    assert.ok(given.length > 0, 'n2 hands out addresses again');
    for (const address of held)
      assert.ok(!given.includes(address), `${address}, n1's container's, handed out again by n2`);
  });
});
