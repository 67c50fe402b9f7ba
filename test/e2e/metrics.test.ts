/**
 * Metrics scraped over HTTP after a scripted run equal what happened: a real agent following a
 * real containerd, the plugin as installed, ADDs (one refused), DELs, a DEL the plugin journaled
 * while it could not reach the agent, a GC, and a container deleted in containerd. The exposition
 * is parsed with a Prometheus text-format parser, not read with regular expressions.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type Containerd, haveContainerd, startContainerd } from '../helpers/containerd.ts';
import { createNetns, deleteNetns } from '../helpers/netns.ts';
import { isRoot, tempDir, waitFor } from '../helpers/processes.ts';
import { histogramCount, sample, scrape } from '../helpers/prometheus.ts';

const NS = `warren-m${process.pid}`;
const skip = !isRoot() || !haveContainerd() ? 'needs root and containerd, runc, busybox-static' : false;
const RANGE = '10.241.0.0/24';

describe('metrics after a scripted run', { skip }, () => {
  let containerd: Containerd;
  let agent: AgentHandle;
  let address: string;
  const netnses: Array<{ name: string; path: string }> = [];
  const config = (version = '1.1.0') => ({
    cniVersion: version,
    name: 'metrics-net',
    ipam: { type: 'warren', socket: agent.socket, range: RANGE },
  });
  const add = async (id: string, netns: string) => {
    const reply = await warren({ command: 'ADD', containerID: id, netns, ifname: 'eth0', config: config() });
    assert.equal(reply.code, 0, reply.stdout);
    return resultAddresses(reply)[0] as string;
  };
  const del = async (id: string, netns: string) => {
    const reply = await warren({ command: 'DEL', containerID: id, netns, ifname: 'eth0', config: config() });
    assert.equal(reply.code, 0, reply.stdout);
  };
  const held = async (id: string) => (await agent.allocations(`?containerID=${id}`)).map((a) => a.address);

  before(async () => {
    containerd = await startContainerd();
    agent = await startAgent({
      args: [
        '--containerd',
        'on',
        '--containerd-socket',
        containerd.socket,
        '--containerd-namespaces',
        NS,
        '--containerd-grace',
        '0',
        '--gc-grace',
        '0',
        '--metrics-address',
        '127.0.0.1:0',
      ],
    });
    await waitFor('the agent to subscribe to containerd', async () =>
      (await status()).containerd?.state === 'subscribed' ? true : undefined,
    );
    address = (await status()).metrics?.address as string;
    assert.match(address, /^127\.0\.0\.1:\d+$/);
  });
  after(async () => {
    await agent?.kill();
    await containerd?.stop([NS]);
    for (const n of netnses) await deleteNetns(n.name);
  });

  async function status(): Promise<AgentStatus> {
    return (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus;
  }

  it('counts every allocation, every release by its source and every CNI call by its outcome', async () => {
    for (let i = 0; i < 6; i++) netnses.push(await createNetns());
    const ns = (i: number) => (netnses[i] as { path: string }).path;
    // Six ADDs; one repeated (idempotent: no new allocation); one refused (a range that is not a subnet).
    for (let i = 0; i < 6; i++) await add(`m-${i}`, ns(i));
    await add('m-0', ns(0));
    const refused = await warren({
      command: 'ADD',
      containerID: 'm-bad',
      netns: ns(0),
      ifname: 'eth0',
      config: { ...config(), ipam: { type: 'warren', socket: agent.socket, range: '10.241.0.0/33' } },
    });
    assert.notEqual(refused.code, 0);
    assert.equal(refused.json?.code, 7, refused.stdout);

    // Two DELs through the agent.
    await del('m-0', ns(0));
    await del('m-1', ns(1));

    // A DEL the plugin could not take to the agent (its socket names nothing): it is journaled
    // in the agent's journal, which the agent reads and releases.
    const journaled = await warren({
      command: 'DEL',
      containerID: 'm-2',
      netns: ns(2),
      ifname: 'eth0',
      config: {
        ...config(),
        ipam: {
          type: 'warren',
          socket: join(tempDir('warren-nosock-'), 'none.sock'),
          journal_dir: join(agent.dir, 'journal'),
          range: RANGE,
        },
      },
    });
    assert.equal(journaled.code, 0, journaled.stdout);
    await waitFor('the journaled DEL to be released', async () =>
      (await held('m-2')).length === 0 ? true : undefined,
    );

    // A GC that lists m-4 and m-5 as valid: m-3 is released.
    const valid = ['m-4', 'm-5'].map((containerID) => ({ containerID, ifname: 'eth0' }));
    const gc = await warren({ command: 'GC', config: { ...config(), 'cni.dev/valid-attachments': valid } });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual(await held('m-3'), []);

    // containerd deletes the container m-4: its address goes by containerd's word alone.
    const run = await containerd.ctr(
      NS,
      'run',
      '--rm',
      '--rootfs',
      containerd.rootfs,
      'm-4',
      '/bin/sh',
      '-c',
      'exit 0',
    );
    assert.equal(run.code, 0, run.stderr);
    await waitFor('containerd to release m-4', async () => ((await held('m-4')).length === 0 ? true : undefined));

    const families = await scrape(address);
    const value = (name: string, labels: Record<string, string> = {}) => sample(families, name, labels);

    assert.equal(value('warren_allocations_total', { network: 'metrics-net' }), 6);
    assert.equal(value('warren_releases_total', { source: 'cni-del' }), 2);
    assert.equal(value('warren_releases_total', { source: 'journal' }), 1);
    assert.equal(value('warren_releases_total', { source: 'gc' }), 1);
    assert.equal(value('warren_releases_total', { source: 'containerd' }), 1);
    for (const source of ['kubernetes', 'plugin', 'audit', 'netns', 'operator', 'node-forget'])
      assert.equal(value('warren_releases_total', { source }), 0, source);

    // CNI calls that reached the agent: 7 ADDs answered 0, one answered 7, two DELs, one GC.
    const calls = (command: string, code: string) =>
      histogramCount(families, 'warren_cni_request_duration_seconds', { command, code });
    assert.equal(calls('ADD', '0'), 7);
    assert.equal(calls('ADD', '7'), 1);
    assert.equal(calls('DEL', '0'), 2);
    assert.equal(calls('GC', '0'), 1);
    // The refused ADD, by its network too (what the dashboard's failed calls count).
    assert.equal(value('warren_cni_failures_total', { command: 'ADD', code: '7', network: 'metrics-net' }), 1);

    // What is left: m-5 alone.
    assert.equal(value('warren_pool_allocated_addresses', { pool: RANGE }), 1);
    assert.equal(value('warren_pool_capacity_addresses', { pool: RANGE }), 254);
    assert.equal(value('warren_journal_pending_intents'), 0);
    assert.equal(value('warren_journal_set_aside_files'), 0);
    assert.equal(value('warren_ready'), 1);
    for (const source of ['journal', 'containerd']) assert.equal(value('warren_release_queue_depth', { source }), 0);
    const committed = histogramCount(families, 'warren_store_commit_duration_seconds', { result: 'committed' });
    assert.ok(committed >= 6 + 5, `at least one commit per allocation and per release: ${committed}`);
    assert.equal(value('warren_store_commit_conflicts_total'), 0);
    assert.equal(value('warren_build_info', { version: (await status()).version }), 1);
  });
});
