/**
 * Forgetting nodes deleted from Kubernetes, in process, on real etcd and a manual clock: two agents
 * see the same Node deleted, exactly one wins the chore, and a forget that fails after the chore
 * was won is taken up again by the winner at its next recheck. Each agent on the store `--store
 * etcd` opens (two tiers: its own SQLite file beside the etcd tier).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { KubernetesNodes } from '../../../src/agent/kubernetes/nodes.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { NodeItem } from '../../../src/sources/kubernetes/node-source.ts';
import type { EtcdTieredStore } from '../../../src/store/etcd-tier/tiered.ts';
import type { Membership } from '../../../src/store/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { openTieredOnEtcd } from '../../helpers/etcd-tiered.ts';
import { waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

const RECHECK_MS = 2_000;
const ranges = parseIpamConfig({ type: 'warren', range: '10.247.0.0/24', block_size: 28 }).ranges;

describe('KubernetesNodes', () => {
  let etcd: EtcdCluster;
  const stores: EtcdTieredStore[] = [];
  const aborts: AbortController[] = [];
  const runs: Array<Promise<void>> = [];

  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    for (const a of aborts) a.abort();
    await Promise.allSettled(runs);
    for (const s of stores) await s.close().catch(() => undefined);
    await etcd?.stop();
  });

  const open = async (prefix: string, node: string): Promise<EtcdTieredStore> => {
    const store = await openTieredOnEtcd({ endpoints: etcd.endpoints, prefix, node });
    stores.push(store);
    return store;
  };

  /** An agent of `node` forgetting nodes from the items pushed to its channel (its membership as `seen`). */
  const agent = async (
    prefix: string,
    node: string,
    clock: ManualClock,
    forgetNode?: Allocator['forgetNode'],
    seen: (membership: Membership) => Membership = (m) => m,
  ) => {
    const store = await open(prefix, node);
    const real = store.cluster.membership as Membership;
    await real.announce(node, { since: clock.now(), version: 'test' });
    const membership = seen(real);
    const allocator = new Allocator({ store, clock, node, blocks: true });
    const nodes = new KubernetesNodes({
      store,
      membership,
      allocator: { forgetNode: forgetNode ?? ((name) => allocator.forgetNode(name)) },
      clock,
      logger: silentLogger,
      node,
      recheckMs: RECHECK_MS,
    });
    const items = new AsyncChannel<NodeItem>();
    const abort = new AbortController();
    // The node source ends its iterable on abort; the channel stands in for it.
    abort.signal.addEventListener('abort', () => items.close(), { once: true });
    aborts.push(abort);
    runs.push(nodes.run(items, abort.signal));
    return { nodes, items, allocator };
  };

  it('retries a forget that failed after this agent won the chore, at its next recheck, instead of leaving the node to nobody', async () => {
    const prefix = '/kn-retry/';
    const clock = new ManualClock(1_000_000);
    // n3 held addresses, then its machine died (it never announced: its announcement has expired).
    const n3store = await open(prefix, 'n3');
    const n3 = new Allocator({ store: n3store, clock, node: 'n3', blocks: true });
    for (const id of ['c1', 'c2'])
      await n3.allocate({ owner: { network: 'net', containerID: id, ifname: 'eth0' }, ranges });
    await n3store.flush();
    // Two tiers: the cluster sees n3's claims and what it published, not its SQLite file.
    const observer = (await open(prefix, 'observer')).etcd;
    const publishedOf = async (node: string) =>
      (await observer.published({ node })).items.flatMap((b) => b.allocations.map((a) => a.address));
    assert.equal((await publishedOf('n3')).length, 2);
    assert.equal((await observer.claimsOf('n3')).length, 1);

    let failures = 0;
    const n1 = await agent(prefix, 'n1', clock, async (name) => {
      if (failures === 0) {
        failures += 1;
        throw new Error('etcd store unreachable (injected)');
      }
      return n1.allocator.forgetNode(name);
    });
    const n2 = await agent(prefix, 'n2', clock);

    n1.items.push({ kind: 'node-deleted', name: 'n3' });
    const failed = await waitFor('n1 to win the chore and fail to forget n3', () =>
      n1.nodes.status().lastError === undefined ? undefined : n1.nodes.status(),
    );
    assert.match(failed.lastError ?? '', /injected/);
    assert.deepEqual(failed.gone, ['n3'], 'n1 keeps n3 to look at again');

    n2.items.push({ kind: 'node-deleted', name: 'n3' });
    await waitFor("n2 to be refused the chore, which is n1's", () =>
      n2.nodes.status().gone.length === 0 ? true : undefined,
    );

    clock.advance(RECHECK_MS);
    await waitFor('n1 to forget n3 at its next recheck', () =>
      n1.nodes.status().forgotten.includes('n3') ? true : undefined,
    );
    assert.equal(failures, 1);
    assert.deepEqual(await publishedOf('n3'), [], "n3's addresses are released");
    assert.deepEqual(await observer.claimsOf('n3'), [], "n3's blocks are freed");
    assert.deepEqual(n1.nodes.status(), { gone: [], forgotten: ['n3'] }, 'the error is over');
    assert.deepEqual(n2.nodes.status().forgotten, [], 'exactly one agent forgot n3');
  });

  it('keeps a node deleted while the store is halted, and forgets it at a recheck once the store is not', async () => {
    // The soak (kubernetes seed 3817): a node died and its Node was deleted just as the cluster came
    // out of a recovery; the agent that watched Nodes was refused the chore while still halted, left
    // the node to nobody, and it was never forgotten.
    const clock = new ManualClock(1_000_000);
    let halted: string | undefined = 'the store lost its data (test)';
    const { nodes, items } = await agent('/kn-halted/', 'n1', clock, undefined, (real) => {
      return new Proxy(real, {
        get(target, property) {
          if (property === 'halted') return () => halted;
          // As the stores answer while halted: no chore is granted.
          if (property === 'claimTask') return async (task: string) => (halted ? false : target.claimTask(task));
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    });
    items.push({ kind: 'node-deleted', name: 'n5' });
    await waitFor('n1 to look at n5', () => (nodes.status().gone.includes('n5') ? true : undefined));
    halted = undefined; // the operator accepted the store
    await waitFor('n1 to forget n5 at a recheck', () =>
      nodes.status().forgotten.includes('n5') ? true : void clock.advance(RECHECK_MS),
    );
  });

  it('takes a node it forgot off the list a recovery waits for, as `warren node forget` does', async () => {
    // Found by the soak (issue 38): a node deleted from Kubernetes while the cluster was in recovery
    // was forgotten, and the recovery waited for it to accept for ever.
    const clock = new ManualClock(1_000_000);
    const left: string[] = [];
    const { nodes, items } = await agent('/kn-recovery/', 'n1', clock, undefined, (real) => {
      return new Proxy(real, {
        get(target, property) {
          if (property === 'recovery') return () => ({ since: clock.now(), reason: 'test', waiting: ['n1', 'n4'] });
          if (property === 'leaveRecovery') return async (node: string) => void left.push(node);
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    });
    items.push({ kind: 'node-deleted', name: 'n4' });
    await waitFor('n1 to forget n4', () => (nodes.status().forgotten.includes('n4') ? true : undefined));
    assert.deepEqual(left, ['n4']);
  });
});
