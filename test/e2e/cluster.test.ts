/**
 * Cluster-wide pools: three agents on one machine acting as three nodes (each its own socket, state
 * dir and node name), sharing pools on a real 3-member etcd cluster, driven through the real plugin
 * executable. Then an etcd member killed mid-run, a pool too small for one block per node, forgetting
 * a stopped node, and the whole of etcd going away and coming back. Two tiers (`--store etcd`):
 * each node's addresses are in its own SQLite file, and the cluster's view of them is what the
 * nodes publish and claim in etcd, read here through an etcd tier on the same prefix.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LENT_NETWORK } from '../../src/allocator/lending/loans.ts';
import { type EtcdTier, openEtcdTier } from '../../src/store/etcd-tier/tier.ts';
import { assertConsistent, claims, published, publishedOnce } from '../helpers/etcd-tiered.ts';
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

describe('three nodes sharing pools on a 3-member etcd cluster', () => {
  let etcd: EtcdCluster;
  const agents: AgentHandle[] = [];
  const prefix = '/cluster-test/';
  let observer: EtcdTier;

  before(async () => {
    etcd = await startEtcd(3);
    for (const name of ['n1', 'n2', 'n3']) agents.push(await startAgent({ args: nodeArgs(name, etcd, prefix) }));
    observer = await openEtcdTier({ endpoints: etcd.endpoints, prefix, leaseSeconds: 15 });
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

    const stored = await publishedOnce(observer, 'wide', 600);
    const blocks = await claims(observer, '10.230.0.0/20');
    for (const node of ['n1', 'n2', 'n3']) {
      const mine = stored.filter((a) => a.node === node);
      assert.equal(mine.length, 200);
      const own = mine.filter((a) => blocks.get(a.pool) === node).length;
      assert.ok(own / mine.length >= 0.9, `${node}: ${own} of ${mine.length} addresses from its own blocks`);
    }
    await assertConsistent(observer, 'wide', '10.230.0.0/20');

    // A retried ADD returns the address the node gave. (Two tiers: a pod's ADD is retried on its own
    // node, whose file knows it; the one-tier store's retry on another node is gone with its layout.)
    for (const r of results.slice(0, 6)) {
      const other = agents[Number(r.node.slice(1)) - 1] as AgentHandle;
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
    const stored = new Map((await publishedOnce(observer, 'kill', ok.length)).map((a) => [a.containerID, a.address]));
    for (const r of ok) assert.equal(stored.get(r.id), resultAddresses(r.reply)[0], `${r.id} stored as reported`);
    await assertConsistent(observer, 'kill', '10.231.0.0/20');
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
    const first: string[] = [];
    for (const [n, agent] of agents.entries()) {
      const reply = await add(agent, `t-first-${n}`);
      assert.equal(reply.code, 0, reply.stdout);
      first.push(...resultAddresses(reply));
    }
    const blocks = await claims(observer, '10.232.0.0/28');
    assert.deepEqual([...blocks.values()].sort(), ['n1', 'n2']);
    // n3's address lies in a block n1 or n2 holds: lent to it (two tiers: asked of the owners).
    const n3block =
      Number((first[2] ?? '').split('.')[3]) < 8 ? '10.232.0.0/28#10.232.0.0/29' : '10.232.0.0/28#10.232.0.8/29';
    assert.ok(blocks.get(n3block) !== 'n3', "n3 borrowed an address from another node's block");

    const rest = await Promise.all(Array.from({ length: 15 }, (_, i) => add(agents[i % 3] as AgentHandle, `t${i}`)));
    const ok = rest.filter((r) => r.code === 0);
    assert.equal(ok.length, 11, 'exactly the 11 addresses left are handed out');
    for (const r of rest.filter((x) => x.code !== 0)) {
      assert.equal(r.json?.code, 100, r.stdout);
      assert.match(String(r.json?.msg), /no free address/);
    }
    const all = [...first, ...ok.flatMap((r) => resultAddresses(r))];
    assert.equal(all.length, 14);
    assert.equal(new Set(all).size, 14, 'no address twice');
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
    // Two tiers: a node's own file lists its blocks (n1's lists n1's), the cluster holds the claims.
    const n3listed = JSON.parse((await cli(n3, 'nodes', '--json')).stdout) as typeof nodes;
    assert.ok((n3listed.find((n) => n.node === 'n3')?.blocks.length ?? 0) > 0);

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
      /^10\.230\.0\.0\/20 .* 200 .* [0-9]+ blocks of \/27$/m,
      "a range reported whole, this node's blocks summed (two tiers: its own file; blocks sized to the range)",
    );
    assert.match(
      pools.stdout,
      /^10\.230\.0\.0\/20#10\.230\.[0-9.]+\/27 .* n1$/m,
      'each block with the node that claimed it',
    );

    const refused = await cli(n1, 'node', 'forget', 'n3');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /node n3 is alive/);
    assert.ok((await observer.claimsOf('n3')).length > 0, 'nothing was freed');

    assert.equal(await n3.stop(), 0);
    const forgot = await cli(n1, 'node', 'forget', 'n3', '--json');
    assert.equal(forgot.code, 0, forgot.stderr);
    const outcome = JSON.parse(forgot.stdout) as { released: unknown[]; blocks: string[] };
    // Two tiers: n3's addresses were in its own file; forgetting it frees its claims and publications.
    assert.ok(outcome.blocks.length > 0);
    assert.deepEqual(await observer.claimsOf('n3'), []);
    // (What n1 or n2 lent n3 stays their placeholder until the lending upkeep tidies it after a grace.)
    assert.deepEqual(
      (await published(observer)).filter((a) => a.node === 'n3' && a.network !== LENT_NETWORK),
      [],
    );
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

  // Two tiers: what the one-tier store answered 11 (every ADD a transaction in etcd) now succeeds from
  // the node's own file while it has room; only an ADD that needs a new block waits for etcd.
  it('serves ADD and DEL with room in its own blocks, answers 11 naming etcd for one that needs a new block, and recovers by itself when etcd returns', async (t) => {
    const config = {
      cniVersion: '1.1.0',
      name: 'away',
      ipam: {
        type: 'warren',
        socket: agent.socket,
        journal_dir: join(agent.dir, 'journal'),
        range: '10.233.0.0/24',
        block_size: 30, // 10.233.0.1-3 in the first block
      },
    };
    const call = (command: string, id: string) =>
      warren({ command, containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config });
    assert.equal((await call('ADD', 'before')).code, 0);
    const member = etcd.members[0];
    assert.ok(member);
    await etcd.kill(member);

    const started = Date.now();
    for (const id of ['during-1', 'during-2']) {
      const add = await call('ADD', id);
      assert.equal(add.code, 0, `${id}, with room in the node's block: ${add.stdout}`);
    }
    t.diagnostic(`two ADDs with etcd away answered in ${Date.now() - started} ms`);
    const full = await call('ADD', 'needs-a-block');
    assert.equal(full.json?.code, 11, full.stdout);
    assert.match(String(full.json?.msg), /etcd/);
    const del = await call('DEL', 'before');
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(await agent.allocations('?containerID=before'), [], 'released in the node file at once');

    await etcd.restart(member);
    // The DEL freed an address of the node's block: the ADD refused for want of a block now fits there,
    // with no call to etcd, and the next one needs a new block, which succeeds once the etcd client
    // reaches the restarted member again (its circuit breaker closes after its half-open probe).
    const fits = await call('ADD', 'needs-a-block');
    assert.equal(fits.code, 0, fits.stdout);
    const again = await waitFor('an ADD that needs a new block to succeed again', async () => {
      const add = await call('ADD', 'after');
      return add.code === 0 ? add : undefined;
    });

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
