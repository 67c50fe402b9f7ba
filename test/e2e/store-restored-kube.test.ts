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
 *   recovery: then every container keeps its address and no address is handed out twice.
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
    const accepted = await cli(n1, 'store', 'accept');
    assert.equal(accepted.code, 0, accepted.stdout + accepted.stderr);
    assert.match(accepted.stdout, /wrote back 3 addresses and [1-9][0-9]* block claims/);
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
