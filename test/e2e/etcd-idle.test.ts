/**
 * Issue 36's silence on etcd, through a real agent (`--store etcd`, its chores every second) holding
 * one address in a shared range: from one moment to another 15 s later (fifteen runs of its cluster
 * chores, a claim check, seven publication ticks), etcd's own request counters (its /metrics,
 * `grpc_server_started_total` by method) show no Range, no Txn, no Put or DeleteRange from it, no
 * lease granted: what it must know it learns from the watches it opened (its claims, the address
 * spaces, its identity, announcement and the recovery marker), each read once when it opened. Its
 * only traffic is the lease's keep-alives (LeaseKeepAlive messages on the lease's stream: not a read
 * or a write of the keyspace), counted and shown apart; the agent's own count of its requests to etcd
 * is in its status and doctor, which finds nothing read over and over.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../src/api/client.ts';
import { etcdApiFindings } from '../../src/cli/doctor/etcd-api-checks.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { etcdRequests } from '../helpers/etcd-metrics.ts';
import { waitFor } from '../helpers/processes.ts';

const NODE = 'eidle1';
const PREFIX = '/etcd-idle/';
const WINDOW_MS = 15_000;

describe('an idle agent on the etcd store', () => {
  let etcd: EtcdCluster;
  let agent: AgentHandle;

  before(async () => {
    etcd = await startEtcd(1);
    agent = await startAgent({
      args: [
        '--node-name',
        NODE,
        '--store',
        'etcd',
        '--etcd-endpoints',
        etcd.endpoints.join(','),
        '--etcd-prefix',
        PREFIX,
        '--upkeep-interval',
        '1',
      ],
    });
  });
  after(async () => {
    await agent?.kill();
    await etcd?.stop();
  });

  it('reads and writes nothing in etcd over fifteen runs of its chores; only its lease is kept alive', async () => {
    const added = await warren({
      command: 'ADD',
      containerID: 'eidle-c1',
      netns: '/var/run/netns/eidle-c1',
      ifname: 'eth0',
      config: {
        cniVersion: '1.1.0',
        name: 'idle',
        ipam: {
          type: 'warren',
          socket: agent.socket,
          journal_dir: join(agent.dir, 'journal'),
          range: '10.79.0.0/24',
        },
      },
    });
    assert.equal(added.code, 0, added.stdout);
    assert.equal(resultAddresses(added).length, 1);
    const client = new ApiClient({ socket: agent.socket });
    // Settled: the block published and a few runs of the chores done since (the watches opened).
    const runs = async () => (await client.status()).cluster?.upkeep?.runs ?? 0;
    const settledFrom = await runs();
    await waitFor('three runs of the chores', async () => ((await runs()) >= settledFrom + 3 ? true : undefined));
    const runsBefore = await runs();
    const before = await etcdRequests(etcd.endpoints[0] as string);
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const after = await etcdRequests(etcd.endpoints[0] as string);
    const runsAfter = await runs();
    const made = (method: string) => (after.started.get(method) ?? 0) - (before.started.get(method) ?? 0);
    const keepAlives = (after.received.get('LeaseKeepAlive') ?? 0) - (before.received.get('LeaseKeepAlive') ?? 0);
    const shown = [...after.started.keys()]
      .filter((m) => made(m) !== 0)
      .map((m) => `${m} ${made(m)}`)
      .join(', ');
    process.stdout.write(
      `# idle over ${WINDOW_MS / 1000} s (${runsAfter - runsBefore} runs): ${shown || 'no request'}; ` +
        `LeaseKeepAlive messages ${keepAlives}; ${after.watchers} watchers on ${after.watchStreams} streams\n`,
    );
    assert.ok(runsAfter - runsBefore >= 10, `the chores ran meanwhile: ${runsAfter - runsBefore} runs`);
    for (const method of ['Range', 'Txn', 'Put', 'DeleteRange', 'LeaseGrant', 'Compact'])
      assert.equal(made(method), 0, `no ${method} while idle; etcd counted ${shown}`);
    // The agent's own count says so too, in its status and doctor (etcd-requests.ts).
    const [status, facts] = await Promise.all([client.status(), client.doctor()]);
    for (const rate of [status.etcdApi, facts.etcdApi])
      assert.ok(
        rate?.byKind.some((k) => k.kind === 'lease-keepalive' && k.perMinute > 0),
        JSON.stringify(rate),
      );
    assert.deepEqual(
      etcdApiFindings(facts).map((f) => [f.id, f.severity]),
      [['etcd-request-rate', 'ok']],
    );
  });
});
