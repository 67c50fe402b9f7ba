/**
 * Upgrading an etcd cluster from the one-tier store: real etcd holding the keys the old EtcdStore
 * wrote (test/fixtures/etcd-legacy/two-nodes.json, see test/store/etcd-tier/legacy-import.test.ts),
 * then the new agent of node n1 started on it (real process, real plugin executable): every
 * allocation the old store held for n1 is its container's (a retried ADD returns it), no ADD
 * returns an address the old store held for n1 or n2, a DEL releases a moved allocation, and n2's
 * old blocks stay n2's until its agent starts and moves them (doctor names them meanwhile).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { CHILD_PATH, WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const FIXTURE = JSON.parse(
  readFileSync(new URL('../fixtures/etcd-legacy/two-nodes.json', import.meta.url), 'utf8'),
) as Record<string, string>;
const PREFIX = `/upgrade-${process.pid}/`;

/** Address → containerID of the old store's allocations, of one node's blocks. */
function heldBy(node: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of Object.entries(FIXTURE)) {
    if (!key.startsWith('units/') || !key.includes('#')) continue;
    const doc = JSON.parse(value) as { affinity?: string; allocations: Record<string, [string, string, string]> };
    if (doc.affinity !== node) continue;
    for (const [address, [, cid]] of Object.entries(doc.allocations)) out.set(address, cid);
  }
  return out;
}

describe('an etcd cluster written by the one-tier store, after the upgrade', () => {
  let etcd: EtcdCluster;
  let raw: Etcd3;
  let agent: AgentHandle;
  before(async () => {
    etcd = await startEtcd(1);
    raw = new Etcd3({ hosts: etcd.endpoints });
    for (const [key, value] of Object.entries(FIXTURE)) await raw.put(`${PREFIX}${key}`).value(value);
    agent = await startAgent({
      args: [
        '--node-name',
        'n1',
        '--store',
        'etcd',
        '--etcd-endpoints',
        etcd.endpoints.join(','),
        '--etcd-prefix',
        PREFIX,
      ],
    });
  });
  after(async () => {
    await agent?.kill();
    raw?.close();
    await etcd?.stop();
  });

  const config = () => ({
    cniVersion: '1.1.0',
    name: 'legacy-net',
    ipam: {
      type: 'warren',
      socket: agent.socket,
      journal_dir: join(agent.dir, 'journal'),
      range: '10.77.0.0/24',
      block_size: 28,
      network_name: 'legacy',
    },
  });
  const call = (command: string, id: string) =>
    warren({ command, containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config: config() });

  it('serves every allocation the old store held for its node, hands out none the old store held, and releases one on DEL', async () => {
    const mine = heldBy('n1');
    const all = new Map([...mine, ...heldBy('n2')]);
    // A retried ADD of a container the old store served returns its address: the allocation moved.
    for (const [address, cid] of [...mine].filter(([a]) => a.startsWith('10.77.'))) {
      const again = await call('ADD', cid);
      assert.equal(again.code, 0, again.stdout);
      assert.deepEqual(resultAddresses(again), [address], `${cid} keeps ${address}`);
    }
    for (let i = 0; i < 30; i++) {
      const reply = await call('ADD', `new-${i}`);
      assert.equal(reply.code, 0, reply.stdout);
      for (const address of resultAddresses(reply))
        assert.ok(!all.has(address), `new-${i} got ${address}, held by ${all.get(address)} in the old store`);
    }
    const del = await call('DEL', 'n1-c5');
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(await agent.allocations('?containerID=n1-c5'), []);
    // The published view (`warren allocations --cluster`) shows the moved allocations once published.
    const published = await waitFor('the moved allocations to be published', async () => {
      const listed = await run(
        process.execPath,
        [WARREN_BIN, 'allocations', '--cluster', '--json', '--socket', agent.socket],
        { env: { ...process.env, PATH: CHILD_PATH } },
      );
      assert.equal(listed.code, 0, listed.stderr);
      const list = JSON.parse(listed.stdout) as Array<{ containerID: string; address: string }>;
      return list.some((a) => a.containerID === 'n1-c4') ? list : undefined;
    });
    assert.equal(published.find((a) => a.containerID === 'n1-c4')?.address, '10.77.0.5');
    // Doctor names the node whose old blocks are left.
    const doctor = await run(process.execPath, [WARREN_BIN, 'doctor', '--socket', agent.socket, '--json'], {
      env: { ...process.env, PATH: CHILD_PATH },
    });
    const findings = (
      JSON.parse(doctor.stdout) as { findings: Array<{ id: string; severity: string; detail?: string }> }
    ).findings;
    const legacy = findings.find((f) => f.id === 'etcd-legacy-data');
    assert.ok(legacy, doctor.stdout);
    assert.equal(legacy.severity, 'warning');
    assert.match(String(legacy.detail), /old blocks of node n2 \(1\)/);
    // n2 has not started again: its old block is claimed in its name, its documents untouched.
    const n2claims = await raw.getAll().prefix(`${PREFIX}nodes-blocks/n2/`).keys();
    assert.equal(n2claims.length, 1);
    assert.deepEqual((await raw.getAll().prefix(`${PREFIX}units/`).keys()).map((k) => k.slice(PREFIX.length)).sort(), [
      'units/10.77.0.0/24@legacy',
      'units/10.77.0.0/24@legacy#10.77.0.32/28',
    ]);
  });
});
