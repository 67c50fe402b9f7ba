/**
 * Failpoints end to end (core/failpoints.ts): real agents, started with WARREN_FAILPOINTS naming a
 * crash window, driven through the installed plugin until they die there (SIGKILL, awaited as an
 * event with a deadline), then started again on the same state directory without it; each test
 * asserts what Warren promises after such a death, read from outside the dead agent's memory
 * (the cluster's objects, the nodes' answers, the journal directory):
 * - claim-unrecorded (a block claimed in the cluster, not yet in the node's file), on the fake
 *   Kubernetes API server and on a real etcd: the ADD in flight fails with a CNI error, never an
 *   address; the block stays the node's while it is away (another node never takes it or its
 *   addresses), is given back unused at its restart and claimed afresh by its ADD, and the cluster's
 *   claims are the nodes' blocks, none leaked;
 * - publication-unwritten (a block changed, its picture not yet published): the restart's first
 *   publication writes the block as the file holds it, the allocation the cluster never saw
 *   included (the ADD answered or not: the run that dies may fall before or after its answer);
 * - loan-unnoted, then loan-ungranted (a lender dying after its grant is written, then between its
 *   placeholder and the grant): the grant written stays lent past the grace that frees the
 *   placeholder never granted, and no address is held by two nodes, the lender's later ADDs included;
 * - journal-unacknowledged (a journaled DEL released, its file not yet removed; SQLite store):
 *   every DEL is applied, every file removed, and the DELs read again after their containers were
 *   ADDed anew (the files as the death left them, put back: a late reading of them) release none
 *   of the new addresses.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FAILPOINTS_ENV, type FailpointName } from '../../src/core/failpoints.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import type { PoolReport } from '../../src/api/protocol.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { type EtcdTier, openEtcdTier } from '../../src/store/etcd-tier/tier.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { ClusterTier } from '../../src/store/tiered/cluster-tier.ts';
import { type AgentHandle, type AgentStart, startAgent } from '../helpers/agent.ts';
import { type CniReply, resultAddresses } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { claims as etcdClaims, etcdStoreArgs } from '../helpers/etcd-tiered.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  LENT_NETWORK,
  claimsIn,
  cniCall,
  duplicatesIn,
  observeTier,
  publishedBlocks,
  startKubeNode,
} from '../helpers/kube-store.ts';
import { removeDir, waitFor } from '../helpers/processes.ts';

/** The environment that arms one failpoint, on its first hit. */
const armed = (name: FailpointName): NodeJS.ProcessEnv => ({ [FAILPOINTS_ENV]: name });

/** The agent died at failpoint `name`, as kill -9 makes it: SIGKILL, and its last word names it. */
async function diesAt(agent: AgentHandle, name: FailpointName): Promise<void> {
  const { code, signal } = await agent.exited();
  assert.equal(signal, 'SIGKILL', `agent ${agent.pid} exited ${code} instead; its log:\n${agent.log()}`);
  assert.match(agent.log(), new RegExp(`failpoint ${name} \\(`));
}

/** A CNI error, never an address. */
function assertFailed(reply: CniReply, what: string): void {
  assert.notEqual(reply.code, 0, `${what}: ${reply.stdout}`);
  assert.deepEqual(resultAddresses(reply), [], what);
  assert.equal(typeof reply.json?.code, 'number', `${what} answers a CNI error: ${reply.stdout}${reply.stderr}`);
}

function assertServed(reply: CniReply, what: string): string {
  assert.equal(reply.code, 0, `${what}: ${reply.stdout}${reply.stderr}`);
  const [address] = resultAddresses(reply);
  assert.ok(address !== undefined, `${what}: ${reply.stdout}`);
  return address;
}

/**
 * An ADD through the plugin, retried while it answers TRY_AGAIN (11) as a runtime retries it: a
 * restarted agent on a cluster store answers so until its first comparison with the cluster has run.
 */
async function addServed(agent: AgentHandle, network: string, ipam: Record<string, unknown>, id: string) {
  const reply = await waitFor(`ADD ${id} answered other than TRY_AGAIN`, async () => {
    const r = await cniCall('ADD', agent, network, ipam, id);
    return r.json?.code === 11 ? undefined : r;
  });
  return assertServed(reply, id);
}

/** The blocks of `range` the node's file records as its own (its /v1/pools, read from its store). */
async function localBlocks(agent: AgentHandle, node: string, range: string): Promise<string[]> {
  const pools = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/pools' })).body as PoolReport[];
  return pools
    .filter((p) => p.node === node && p.pool.startsWith(`${range}#`))
    .map((p) => p.pool)
    .sort();
}

/** A store shared by nodes, as the claim-unrecorded scenario drives it. */
interface SharedStore {
  start(node: string, options?: Pick<AgentStart, 'dir' | 'env'>): Promise<AgentHandle>;
  /** Every claim of `range` in the cluster, as `block key → node`. */
  claims(range: string): Promise<Map<string, string>>;
}

/**
 * claim-unrecorded on `store`: node `a` dies between its claim in the cluster and its local commit;
 * node `b` serves ADDs meanwhile; `a` is started again. Two blocks of 16 in the range.
 */
async function claimUnrecorded(
  store: SharedStore,
  range: string,
  [a, b]: readonly [string, string],
  say: (line: string) => void,
): Promise<void> {
  const ipam = { range, block_size: Number(range.split('/')[1]) + 1 };
  const network = `cu-${a}`;
  const armedA = await store.start(a, { env: armed('claim-unrecorded') });
  const nodeB = await store.start(b);
  const inFlight = await cniCall('ADD', armedA, network, ipam, `${a}-1`);
  await diesAt(armedA, 'claim-unrecorded');
  assertFailed(inFlight, 'the ADD in flight when its agent died');
  say(`the ADD in flight answered ${inFlight.stdout.trim()}`);
  const claimed = [...(await store.claims(range))];
  assert.equal(claimed.length, 1, `one block claimed, by ${a}: ${JSON.stringify(claimed)}`);
  const [[block, claimer] = ['', '']] = claimed;
  assert.equal(claimer, a);

  // While a is away, b is served from the other block: never from a's, which a claimed.
  const whileAway = await Promise.all([1, 2, 3].map((i) => cniCall('ADD', nodeB, network, ipam, `${b}-${i}`)));
  whileAway.forEach((r, i) => assertServed(r, `${b}-${i + 1} while ${a} is away`));
  const bBlocks = (await nodeB.allocations(`?network=${network}`)).map((x) => x.pool);
  assert.ok(!bBlocks.includes(block), `${b} never allocates in ${a}'s block ${block}: ${bBlocks.join(', ')}`);
  assert.equal((await store.claims(range)).get(block), a, `${block} is still ${a}'s`);

  // Started again without the failpoint: the claim its file never recorded is given back unused at its
  // start, and its ADD claims the block afresh (b holds the other one).
  const nodeA = await store.start(a, { dir: armedA.dir });
  await addServed(nodeA, network, ipam, `${a}-1`);
  assert.deepEqual(
    (await nodeA.allocations(`?network=${network}`)).map((x) => `${x.containerID} ${x.pool}`),
    [`${a}-1 ${block}`],
    `${a}'s ADD is served from the block it claimed before it died`,
  );
  await Promise.all([
    ...[2, 3, 4].map((i) => addServed(nodeA, network, ipam, `${a}-${i}`)),
    ...[4, 5, 6].map((i) => addServed(nodeB, network, ipam, `${b}-${i}`)),
  ]);
  const held = [
    ...(await nodeA.allocations(`?network=${network}`)),
    ...(await nodeB.allocations(`?network=${network}`)),
  ];
  assert.equal(held.length, 10);
  assert.deepEqual(duplicatesIn(held), [], 'no address held by both nodes');

  // The cluster's claims are the nodes' blocks: none claimed twice, none leaked.
  const cluster = await store.claims(range);
  for (const [node, agent] of [
    [a, nodeA],
    [b, nodeB],
  ] as const)
    assert.deepEqual(
      [...cluster]
        .filter(([, n]) => n === node)
        .map(([key]) => key)
        .sort(),
      await localBlocks(agent, node, range),
      `the claims of ${node} are the blocks its file records`,
    );
}

describe('agents dying in a crash window (failpoints), started again on their state', () => {
  const agents: AgentHandle[] = [];
  const tracked = (agent: AgentHandle): AgentHandle => {
    agents.push(agent);
    return agent;
  };
  after(async () => {
    for (const agent of agents) await agent.kill();
    for (const dir of new Set(agents.map((a) => a.dir))) removeDir(dir);
  });

  describe('on the kubernetes store (fake API server)', () => {
    let api: FakeKubeApi;
    let observer: ClusterTier;
    /** Node `node`'s agent; a restart names its dir (its Node object exists then). */
    const start = async (node: string, options: Pick<AgentStart, 'dir' | 'env'> & { extra?: string[] } = {}) =>
      tracked(await startKubeNode(api, node, options));
    before(async () => {
      api = await startFakeKubeApi({ crds: 'deploy' });
      observer = await observeTier(api);
    });
    after(async () => {
      for (const agent of agents) await agent.kill();
      await observer?.close();
      await api?.stop();
    });

    it('claim-unrecorded: the ADD fails, the block stays the node’s, given back at its restart and claimed afresh', async (t) => {
      await claimUnrecorded(
        {
          start,
          claims: async (range) => new Map((await claimsIn(observer, range)).map((c) => [c.key, c.node])),
        },
        '10.196.0.0/27',
        ['fk-a', 'fk-b'],
        (line) => t.diagnostic(line),
      );
    });

    it('publication-unwritten: the first publication after the restart holds the allocation the cluster never saw', async (t) => {
      const range = '10.196.1.0/28';
      const ipam = { range, block_size: 28 };
      const node = 'fp-pub';
      const armedNode = await start(node, { env: armed('publication-unwritten') });
      const reply = await cniCall('ADD', armedNode, 'pub', ipam, 'pub-1');
      await diesAt(armedNode, 'publication-unwritten');
      // The block's first write is the one that died: the cluster has no picture of it at all.
      assert.deepEqual(await publishedBlocks(observer, range), [], 'the death came before the first publication');
      // The publication run (every 2 s) that dies may come after the ADD was answered, between the
      // allocation's commit and the answer (the ADD fails, its allocation recorded), or, rarely,
      // between the block's claim and the allocation's commit (the ADD fails, the block alone recorded).
      const answered = reply.code === 0 ? assertServed(reply, 'pub-1') : undefined;
      if (answered === undefined) assertFailed(reply, 'the ADD whose agent died before answering');

      const restarted = await start(node, { dir: armedNode.dir });
      const held = (await restarted.allocations('?network=pub')).map((a) => `${a.containerID} ${a.address}`);
      if (answered !== undefined) assert.deepEqual(held, [`pub-1 ${answered}`], 'the file kept what it answered');
      else assert.ok(held.length <= 1 && held.every((h) => h.startsWith('pub-1 ')), held.join(', '));
      t.diagnostic(
        `pub-1 ${answered === undefined ? `failed: ${reply.stdout.trim()}` : `answered ${answered}`}; ` +
          `the file holds ${held.length === 0 ? 'the block alone' : held.join(', ')}`,
      );
      const [block] = await localBlocks(restarted, node, range);
      assert.ok(block !== undefined, 'the file holds the block');
      const published = await waitFor('the restart to publish the block as its file holds it', async () => {
        const blocks = await publishedBlocks(observer, range);
        return blocks.length > 0 ? blocks : undefined;
      });
      assert.deepEqual(
        published.map((b) => ({
          key: b.key,
          node: b.node,
          allocations: b.allocations.map((a) => `${a.containerID} ${a.address}`),
        })),
        [{ key: block, node, allocations: held }],
      );
    });

    describe('a lender dying after its grant is written, then before it is', () => {
      // One block of 16: the lender's first ADD claims it, so the borrower can only ask.
      const range = '10.196.2.0/28';
      const ipam = { range, block_size: 28 };
      const network = 'loans';
      const lender = 'fl-lender';
      const borrower = 'fl-borrower';
      /** The block-grace of the lender: how long a placeholder without its grant is kept. */
      const grace = ['--block-grace', '2'];
      let lenderDir = '';
      let nodeB: AgentHandle;
      let lentFirst = '';

      it('loan-unnoted: the borrower adopts the grant written before the lender died', async () => {
        const armedLender = await start(lender, { env: armed('loan-unnoted'), extra: grace });
        lenderDir = armedLender.dir;
        nodeB = await start(borrower);
        assertServed(await cniCall('ADD', armedLender, network, ipam, 'l-1'), 'the lender claims the block');
        const reply = await cniCall('ADD', nodeB, network, ipam, 'b-1');
        await diesAt(armedLender, 'loan-unnoted');
        lentFirst = assertServed(reply, 'the borrower, whose grant was written');
        const request = await observer.requestOf(range, borrower);
        assert.deepEqual(
          request?.grants.map((g) => `${g.address} ${g.lender}`),
          [`${lentFirst} ${lender}`],
          'the grant in the cluster',
        );
      });

      it('loan-ungranted: the placeholder never granted is freed, the grant written stays lent, no address twice', async (t) => {
        const armedLender = await start(lender, { dir: lenderDir, env: armed('loan-ungranted'), extra: grace });
        const asked = cniCall('ADD', nodeB, network, ipam, 'b-2');
        await diesAt(armedLender, 'loan-ungranted');
        // What the lender's file holds lent, as the death left it: the grant written, and one never written.
        const file = new SqliteStore({ path: join(lenderDir, 'warren.db') });
        const placeholders = (await file.list({ network: LENT_NETWORK })).map((p) => p.address);
        await file.close();
        // Usually one; two when a watch's hint and the upkeep answered the request at once (each
        // holds its own placeholder; of two grant writes only one could have won).
        const orphans = placeholders.filter((p) => p !== lentFirst);
        assert.ok(placeholders.includes(lentFirst), `the first loan's placeholder stayed: ${placeholders.join(', ')}`);
        assert.ok(orphans.length >= 1, `a placeholder whose grant was never written: ${placeholders.join(', ')}`);
        const granted = async () => new Set((await observer.requestOf(range, borrower))?.grants.map((g) => g.address));
        const grantedAtDeath = await granted();
        assert.deepEqual(
          orphans.filter((o) => grantedAtDeath.has(o)),
          [],
          'their grants were never written',
        );

        const nodeL = await start(lender, { dir: lenderDir, extra: grace });
        const second = await asked; // served by the restarted lender, or over at the borrower's wait: either way, once
        const lentLater = second.code === 0 ? resultAddresses(second) : [];
        t.diagnostic(
          `lent before: ${lentFirst}; orphaned: ${orphans.join(', ')}; b-2 ${second.code === 0 ? `served ${lentLater}` : `refused: ${second.stdout}`}`,
        );
        const lentNow = async () => (await nodeL.allocations(`?network=${LENT_NETWORK}`)).map((p) => p.address);
        // Freed, or (freed, then lent anew to the borrower's open request) granted since.
        await waitFor(`the placeholders of ${orphans.join(', ')}, never granted, to be freed`, async () => {
          const lent = await lentNow();
          const grants = await granted();
          return orphans.every((o) => !lent.includes(o) || grants.has(o)) ? true : undefined;
        });
        // Freed past the grace, seen missing since the restart's first tidy-up: the grant written
        // was read there too, and stays lent.
        const lent = await lentNow();
        assert.ok(
          lent.includes(lentFirst),
          `${lentFirst}, granted before the first death, stays lent: ${lent.join(', ')}`,
        );
        for (const address of lentLater) assert.ok(lent.includes(address), `${address} lent after the restart`);

        // The lender hands out every address left in its block, and none the borrower holds.
        const [pool] = (
          (await requestJson({ socket: nodeL.socket, method: 'GET', path: '/v1/pools' })).body as PoolReport[]
        ).filter((p) => p.node === lender && p.pool.startsWith(`${range}#`));
        assert.ok(pool?.capacity !== undefined, 'the lender reports its block');
        const free = Number(pool.capacity) - pool.allocated - pool.resting;
        t.diagnostic(`the lender's block: ${pool.capacity} addresses, ${pool.allocated} allocated, ${free} free`);
        await Promise.all(Array.from({ length: free }, (_, i) => addServed(nodeL, network, ipam, `l-fill-${i}`)));
        const both: Allocation[] = [
          ...(await nodeL.allocations(`?network=${network}`)),
          ...(await nodeB.allocations(`?network=${network}`)),
        ];
        assert.deepEqual(duplicatesIn(both), [], 'no address held on both nodes');
        const borrowed = (await nodeB.allocations(`?network=${network}`)).map((a) => a.address);
        assert.ok(borrowed.includes(lentFirst));
        const lentAtEnd = await lentNow();
        for (const address of borrowed)
          assert.ok(lentAtEnd.includes(address), `${address}, held by the borrower, is a placeholder at the lender`);
      });
    });
  });

  describe('on a real etcd', () => {
    let etcd: EtcdCluster;
    let observer: EtcdTier;
    const prefix = '/failpoints/';
    before(async () => {
      etcd = await startEtcd(1);
      observer = await openEtcdTier({ endpoints: etcd.endpoints, prefix, leaseSeconds: 15 });
    });
    after(async () => {
      for (const agent of agents) await agent.kill();
      await observer?.close();
      await etcd?.stop();
    });

    it('claim-unrecorded: the ADD fails, the block stays the node’s, given back at its restart and claimed afresh', async (t) => {
      const args = (node: string) => [
        '--node-name',
        node,
        ...etcdStoreArgs(etcd.endpoints, prefix, ['--reconcile-interval', '1']),
      ];
      await claimUnrecorded(
        {
          start: async (node, options = {}) => tracked(await startAgent({ ...options, args: args(node) })),
          claims: (range) => etcdClaims(observer, range),
        },
        '10.196.8.0/27',
        ['fe-a', 'fe-b'],
        (line) => t.diagnostic(line),
      );
    });
  });

  describe('on the SQLite store', () => {
    const intents = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.release'));
    const args = ['--reconcile-interval', '3600'];

    it('journal-unacknowledged: every DEL applied, every file removed, a DEL read again spares the address ADDed after it', async (t) => {
      const conf = (agent: AgentHandle) => ({
        cniVersion: '1.1.0',
        name: 'jfp',
        ipam: {
          type: 'warren',
          socket: agent.socket,
          journal_dir: join(agent.dir, 'journal'),
          range: '10.196.16.0/24',
        },
      });
      const call = (command: 'ADD' | 'DEL', agent: AgentHandle, id: string) =>
        cniCall(command, agent, 'jfp', conf(agent).ipam, id);
      const ids = ['j-1', 'j-2', 'j-3'];
      const first = tracked(await startAgent({ args }));
      for (const id of [...ids, 'stays']) assertServed(await call('ADD', first, id), id);
      const stays = (await first.allocations('?containerID=stays'))[0]?.address;
      await first.stop();
      // Journaled: the agent is down.
      for (const id of ids) assert.equal((await call('DEL', first, id)).code, 0);
      const journal = join(first.dir, 'journal');
      assert.equal(intents(journal).length, 3);

      const armedAgent = tracked(
        await startAgent({ dir: first.dir, args, env: armed('journal-unacknowledged'), awaitReady: false }),
      );
      await diesAt(armedAgent, 'journal-unacknowledged');
      // The window: a DEL applied (the pipeline may have applied more before the first ack), every
      // file still there.
      const left = intents(journal);
      assert.equal(left.length, 3, 'the applied DEL’s file was not removed');
      const file = new SqliteStore({ path: join(first.dir, 'warren.db') });
      const heldAtDeath = (await file.list({ network: 'jfp' })).map((a) => a.containerID).sort();
      await file.close();
      assert.ok(heldAtDeath.length < 4, `a DEL applied before the death: ${heldAtDeath.join(', ')} held`);
      assert.ok(heldAtDeath.includes('stays'));
      t.diagnostic(`held at the death: ${heldAtDeath.join(', ')}; files left: ${left.length}`);
      const copies = new Map(left.map((name) => [name, readFileSync(join(journal, name))]));

      const agent = tracked(await startAgent({ dir: first.dir, args }));
      await waitFor('every journal file removed', () => (intents(journal).length === 0 ? true : undefined));
      assert.deepEqual(
        (await agent.allocations('?network=jfp')).map((a) => `${a.containerID} ${a.address}`),
        [`stays ${stays}`],
        'every journaled DEL applied, the container never DELeted kept',
      );

      // ADDed again, then their DELs read once more (the files as the death left them, one already
      // applied): recorded before the ADDs, they release none of the new addresses.
      const again = new Map<string, string>();
      for (const id of ids) again.set(id, assertServed(await call('ADD', agent, id), `${id} again`));
      for (const [name, content] of copies) writeFileSync(join(journal, name), content, { mode: 0o600 });
      await waitFor('the files read again to be removed', () => (intents(journal).length === 0 ? true : undefined));
      const status = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/journal' })).body as {
        rejected: unknown[];
      };
      assert.deepEqual(status.rejected, [], 'the files were read, not set aside');
      assert.deepEqual(
        (await agent.allocations('?network=jfp')).map((a) => `${a.containerID} ${a.address}`).sort(),
        [...[...again].map(([id, address]) => `${id} ${address}`), `stays ${stays}`].sort(),
        'the DELs recorded before the new ADDs released none of them',
      );
    });
  });
});
