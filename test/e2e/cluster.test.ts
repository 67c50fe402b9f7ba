/**
 * Cluster-wide pools: three agents on one machine acting as three nodes (each its own socket, state
 * dir and node name), sharing pools on a real 3-member etcd cluster, driven through the real plugin
 * executable. Then an etcd member killed mid-run, a pool too small for one block per node, forgetting
 * a stopped node, and the whole of etcd going away and coming back.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EtcdStore } from '../../src/store/etcd-store.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { CHILD_PATH, WARREN_BIN, bounded, run, waitFor } from '../helpers/processes.ts';

function nodeArgs(name: string, etcd: EtcdCluster, prefix: string, extra: readonly string[] = []): string[] {
  return [
    '--node-name',
    name,
    '--store',
    'etcd',
    '--etcd-endpoints',
    etcd.endpoints.join(','),
    '--etcd-prefix',
    prefix,
    '--reconcile-interval',
    '1',
    '--upkeep-interval',
    '1',
    ...extra,
  ];
}

async function cli(agent: AgentHandle, ...args: string[]) {
  return run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
}

/** The store agrees with itself: every owner record sits in its block's document and vice versa. */
async function assertConsistent(store: EtcdStore, network: string): Promise<void> {
  const allocations = await store.list({ network });
  const byAddress = new Map<string, string>();
  for (const a of allocations) {
    const key = `${a.pool}|${a.address}`;
    assert.equal(byAddress.get(key), undefined, `${a.address} recorded twice in ${a.pool}`);
    byAddress.set(key, a.containerID);
  }
  const pools = new Set(allocations.map((a) => a.pool));
  for (const pool of pools) {
    const read = await store.readPool(pool);
    assert.equal(read.kind, 'snapshot');
    if (read.kind !== 'snapshot') continue;
    const inDoc = [...read.allocations].sort();
    const inOwners = allocations
      .filter((a) => a.pool === pool)
      .map((a) => a.address)
      .sort();
    assert.deepEqual(inOwners, inDoc, `pool ${pool}: the owner records are exactly the block's addresses`);
  }
}

describe('three nodes sharing pools on a 3-member etcd cluster', () => {
  let etcd: EtcdCluster;
  const agents: AgentHandle[] = [];
  const prefix = '/cluster-test/';
  let observer: EtcdStore;

  before(async () => {
    etcd = await startEtcd(3);
    for (const name of ['n1', 'n2', 'n3']) agents.push(await startAgent({ args: nodeArgs(name, etcd, prefix) }));
    observer = await EtcdStore.open({ endpoints: etcd.endpoints, prefix });
  });
  after(async () => {
    for (const a of agents) await a.kill();
    await observer?.close();
    await etcd?.stop();
  });

  const conf = (agent: AgentHandle, network: string, ipam: Record<string, unknown>) => ({
    cniVersion: '1.1.0',
    name: network,
    ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), ...ipam },
  });

  it('serves 3 x 200 ADDs at once with no duplicate, no failure, and each node mostly in its own blocks', async () => {
    const jobs = agents.flatMap((agent, n) =>
      Array.from({ length: 200 }, (_, i) => async () => {
        const id = `n${n + 1}-c${i}`;
        const reply = await warren({
          command: 'ADD',
          containerID: id,
          netns: `/var/run/netns/${id}`,
          ifname: 'eth0',
          config: conf(agent, 'wide', { range: '10.230.0.0/20' }),
        });
        return { id, node: `n${n + 1}`, reply };
      }),
    );
    // Interleave the nodes so all three are busy at once: 60 plugin processes in flight.
    const interleaved = Array.from({ length: 200 }, (_, i) => [jobs[i], jobs[200 + i], jobs[400 + i]]).flat() as Array<
      () => Promise<{ id: string; node: string; reply: CniReply }>
    >;
    const results = await bounded(60, interleaved);
    assert.deepEqual(
      results.filter((r) => r.reply.code !== 0).map((r) => `${r.id}: ${r.reply.stdout}`),
      [],
    );
    const addresses = results.flatMap((r) => resultAddresses(r.reply));
    assert.equal(addresses.length, 600);
    assert.equal(new Set(addresses).size, 600, 'no address twice');

    const stored = await observer.list({ network: 'wide' });
    assert.equal(stored.length, 600);
    const blocks = new Map((await observer.pools('10.230.0.0/20#')).map((p) => [p.pool, p.affinity]));
    for (const node of ['n1', 'n2', 'n3']) {
      const mine = stored.filter((a) => a.node === node);
      assert.equal(mine.length, 200);
      const own = mine.filter((a) => blocks.get(a.pool) === node).length;
      assert.ok(own / mine.length >= 0.9, `${node}: ${own} of ${mine.length} addresses from its own blocks`);
    }
    await assertConsistent(observer, 'wide');

    // A retried ADD that lands on another node returns the address the first node gave.
    for (const r of results.slice(0, 6)) {
      const other = agents[Number(r.node.slice(1)) % 3] as AgentHandle;
      const retry = await warren({
        command: 'ADD',
        containerID: r.id,
        netns: `/var/run/netns/${r.id}`,
        ifname: 'eth0',
        config: conf(other, 'wide', { range: '10.230.0.0/20' }),
      });
      assert.equal(retry.code, 0, retry.stdout);
      assert.deepEqual(resultAddresses(retry), resultAddresses(r.reply));
    }
  });

  it('keeps going while an etcd member is killed mid-run and restarted: every ADD succeeds or answers 11, none twice', async (t) => {
    const victim = etcd.members[0];
    assert.ok(victim);
    let done = 0;
    let killed: Promise<void> | undefined;
    let restarted: Promise<void> | undefined;
    const jobs = Array.from({ length: 450 }, (_, i) => async () => {
      const agent = agents[i % 3] as AgentHandle;
      const id = `k${i}`;
      const reply = await warren({
        command: 'ADD',
        containerID: id,
        netns: `/var/run/netns/${id}`,
        ifname: 'eth0',
        config: conf(agent, 'kill', { range: '10.231.0.0/20' }),
      });
      done += 1;
      if (done === 100) killed = etcd.kill(victim);
      if (done === 300)
        restarted = (async () => {
          await killed;
          await etcd.restart(victim);
        })();
      return { id, reply };
    });
    const results = await bounded(45, jobs);
    await killed;
    await restarted;
    assert.ok(killed !== undefined && restarted !== undefined, 'the member was killed and restarted during the run');
    const unexpected = results.filter((r) => r.reply.code !== 0 && (r.reply.json?.code as number | undefined) !== 11);
    assert.deepEqual(
      unexpected.map((r) => `${r.id}: ${r.reply.code} ${r.reply.stdout}`),
      [],
    );
    const ok = results.filter((r) => r.reply.code === 0);
    t.diagnostic(`${ok.length} of 450 ADDs succeeded, ${450 - ok.length} answered 11`);
    const reasons = new Map<string, number>();
    for (const r of results)
      if (r.reply.code !== 0) {
        const m = String(r.reply.json?.msg)
          .replace(/[0-9]+/g, 'N')
          .slice(0, 160);
        reasons.set(m, (reasons.get(m) ?? 0) + 1);
      }
    for (const [m, n] of reasons) t.diagnostic(`${n} x ${m}`);
    assert.ok(ok.length >= 300, `most ADDs succeed (${ok.length} of 450)`);
    const owners = new Map<string, string>();
    for (const r of ok) {
      for (const address of resultAddresses(r.reply)) {
        assert.equal(owners.get(address), undefined, `${address} given to ${owners.get(address)} and ${r.id}`);
        owners.set(address, r.id);
      }
    }
    // Every success is in the store as reported; the store agrees with itself.
    const stored = new Map((await observer.list({ network: 'kill' })).map((a) => [a.containerID, a.address]));
    for (const r of ok) assert.equal(stored.get(r.id), resultAddresses(r.reply)[0], `${r.id} stored as reported`);
    await assertConsistent(observer, 'kill');
    // A retried ADD of one that answered 11 now succeeds (etcd is whole again).
    const failed = results.find((r) => r.reply.code !== 0);
    if (failed !== undefined) {
      const retry = await warren({
        command: 'ADD',
        containerID: failed.id,
        netns: `/var/run/netns/${failed.id}`,
        ifname: 'eth0',
        config: conf(agents[0] as AgentHandle, 'kill', { range: '10.231.0.0/20' }),
      });
      assert.equal(retry.code, 0, retry.stdout);
    }
  });

  it('serves a pool with fewer blocks than nodes until it is full, borrowing, then reports exhaustion', async () => {
    const ipam = { range: '10.232.0.0/28', block_size: 29 }; // two blocks of 7 usable addresses
    const add = (agent: AgentHandle, id: string) =>
      warren({
        command: 'ADD',
        containerID: id,
        netns: `/var/run/netns/${id}`,
        ifname: 'eth0',
        config: conf(agent, 'tiny', ipam),
      });
    // One each, in order: n1 and n2 claim the two blocks, n3 must borrow.
    for (const [n, agent] of agents.entries()) assert.equal((await add(agent, `t-first-${n}`)).code, 0);
    const blocks = new Map((await observer.pools('10.232.0.0/28#')).map((p) => [p.pool, p.affinity]));
    assert.deepEqual([...blocks.values()].sort(), ['n1', 'n2']);
    const n3 = (await observer.list({ network: 'tiny', node: 'n3' }))[0];
    assert.ok(n3 !== undefined && blocks.get(n3.pool) !== 'n3', "n3 borrowed an address from another node's block");

    const rest = await Promise.all(Array.from({ length: 15 }, (_, i) => add(agents[i % 3] as AgentHandle, `t${i}`)));
    const ok = rest.filter((r) => r.code === 0);
    assert.equal(ok.length, 11, 'exactly the 11 addresses left are handed out');
    for (const r of rest.filter((x) => x.code !== 0)) {
      assert.equal(r.json?.code, 100, r.stdout);
      assert.match(String(r.json?.msg), /no free address/);
    }
    const all = await observer.list({ network: 'tiny' });
    assert.equal(all.length, 14);
    assert.equal(new Set(all.map((a) => a.address)).size, 14);
  });

  it('lists nodes; forget refuses a live node and frees a stopped one', async () => {
    const [n1, , n3] = agents as [AgentHandle, AgentHandle, AgentHandle];
    const listed = await cli(n1, 'nodes', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const nodes = JSON.parse(listed.stdout) as Array<{
      node: string;
      alive: boolean;
      blocks: string[];
      allocations: number;
    }>;
    assert.deepEqual(
      nodes.map((n) => [n.node, n.alive]),
      [
        ['n1', true],
        ['n2', true],
        ['n3', true],
      ],
    );
    assert.ok((nodes[2]?.blocks.length ?? 0) > 0);

    const status = await cli(n1, 'status');
    assert.equal(status.code, 0, status.stderr);
    assert.match(
      status.stdout,
      /cluster: +3 nodes alive \(n1, n2, n3\); this node announced, holding [1-9][0-9]* blocks/,
    );

    const pools = await cli(n1, 'pools');
    assert.equal(pools.code, 0, pools.stderr);
    assert.match(
      pools.stdout,
      /^10\.230\.0\.0\/20 .* 600 .* [0-9]+ blocks of \/26$/m,
      'a range reported whole, its blocks summed',
    );
    assert.match(
      pools.stdout,
      /^10\.230\.0\.0\/20#10\.230\.0\.0\/26 .* n[123]$/m,
      'each block with the node that claimed it',
    );

    const refused = await cli(n1, 'node', 'forget', 'n3');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /node n3 is alive/);
    assert.ok((await observer.list({ node: 'n3' })).length > 0, 'nothing was freed');

    assert.equal(await n3.stop(), 0);
    const forgot = await cli(n1, 'node', 'forget', 'n3', '--json');
    assert.equal(forgot.code, 0, forgot.stderr);
    const outcome = JSON.parse(forgot.stdout) as { released: unknown[]; blocks: string[] };
    assert.ok(outcome.released.length >= 200);
    assert.ok(outcome.blocks.length > 0);
    assert.deepEqual(await observer.list({ node: 'n3' }), []);
    assert.equal((await observer.pools()).filter((p) => p.affinity === 'n3').length, 0);
    const after = JSON.parse((await cli(n1, 'nodes', '--json')).stdout) as Array<{ node: string }>;
    assert.deepEqual(
      after.map((n) => n.node),
      ['n1', 'n2'],
    );
    const human = await cli(n1, 'nodes');
    assert.match(human.stdout, /NODE\s+ALIVE/);
  });
});

describe('degradation while etcd is away', () => {
  let etcd: EtcdCluster;
  let agent: AgentHandle;
  before(async () => {
    etcd = await startEtcd(1);
    agent = await startAgent({ args: nodeArgs('solo', etcd, '/degrade/') });
  });
  after(async () => {
    await agent?.kill();
    await etcd?.stop();
  });

  it('answers ADD with 11 and STATUS with 50, journals DEL, and recovers by itself when etcd returns', async (t) => {
    const config = {
      cniVersion: '1.1.0',
      name: 'away',
      ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), range: '10.233.0.0/24' },
    };
    const call = (command: string, id: string) =>
      warren({ command, containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config });
    assert.equal((await call('ADD', 'before')).code, 0);
    const member = etcd.members[0];
    assert.ok(member);
    await etcd.kill(member);

    const started = Date.now();
    const add = await call('ADD', 'during');
    t.diagnostic(`ADD with etcd away answered in ${Date.now() - started} ms`);
    assert.equal(add.json?.code, 11, add.stdout);
    assert.match(String(add.json?.msg), /etcd/);
    const status = await warren({ command: 'STATUS', config });
    assert.equal(status.json?.code, 50, status.stdout);
    const del = await call('DEL', 'before');
    assert.equal(del.code, 0, del.stdout);
    assert.equal(
      readdirSync(join(agent.dir, 'journal')).filter((f) => f.endsWith('.release')).length,
      1,
      'the DEL waits in the journal',
    );

    await etcd.restart(member);
    await waitFor('STATUS to succeed again', async () =>
      (await warren({ command: 'STATUS', config })).code === 0 ? true : undefined,
    );
    await waitFor('the journaled DEL to be released', async () =>
      (await agent.allocations('?containerID=before')).length === 0 ? true : undefined,
    );
    // The intent file goes once its release has committed (just after the allocation disappears).
    await waitFor('the journal intent to be removed', () =>
      readdirSync(join(agent.dir, 'journal')).some((f) => f.endsWith('.release')) ? undefined : true,
    );
    const again = await call('ADD', 'after');
    assert.equal(again.code, 0, again.stdout);

    // A retried ADD reaching the agent after a crash and restart gets the same address back.
    await agent.kill();
    agent = await startAgent({ dir: agent.dir, args: nodeArgs('solo', etcd, '/degrade/') });
    const retried = await warren({
      command: 'ADD',
      containerID: 'after',
      netns: '/var/run/netns/after',
      ifname: 'eth0',
      config: { ...config, ipam: { ...config.ipam, socket: agent.socket } },
    });
    assert.equal(retried.code, 0, retried.stdout);
    assert.deepEqual(resultAddresses(retried), resultAddresses(again));
  });
});
