/**
 * Cluster chores on real etcd (Membership.claimTask / releaseTask): of the nodes that ask for one
 * chore, exactly one wins, and keeps winning when it asks again; the claim lives on the winner's
 * node lease, so it goes when that lease ends; releasing it lets the next asker win. On the store
 * `--store etcd` opens (its membership is the etcd tier's).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Etcd3 } from 'etcd3';
import type { EtcdTieredStore } from '../../../src/store/etcd-tier/tiered.ts';
import type { Membership } from '../../../src/store/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { openTieredOnEtcd } from '../../helpers/etcd-tiered.ts';
import { waitFor } from '../../helpers/processes.ts';

describe('etcd store: cluster chores', () => {
  let etcd: EtcdCluster;
  let raw: Etcd3;
  let serial = 0;
  const stores: EtcdTieredStore[] = [];

  before(async () => {
    etcd = await startEtcd(1);
    const { Etcd3: Client } = await import('etcd3');
    raw = new Client({ hosts: etcd.endpoints });
  });
  after(async () => {
    for (const s of stores) await s.close().catch(() => undefined);
    raw?.close();
    await etcd?.stop();
  });

  /** Nodes sharing one fresh prefix, each announced (unless told not to) through its own client. */
  const cluster = async (
    names: readonly string[],
    announce = true,
  ): Promise<{ prefix: string; nodes: Map<string, Membership> }> => {
    serial += 1;
    const prefix = `/tasks-${serial}/`;
    const nodes = new Map<string, Membership>();
    for (const name of names) {
      const store = await openTieredOnEtcd({ endpoints: etcd.endpoints, prefix, node: name, leaseSeconds: 5 });
      stores.push(store);
      const membership = store.cluster.membership as Membership;
      if (announce) await membership.announce(name, { since: 0, version: 'test' });
      nodes.set(name, membership);
    }
    return { prefix, nodes };
  };
  const leaseOf = async (key: string): Promise<string | undefined> => (await raw.get(key).exec()).kvs[0]?.lease;

  it('elects exactly one of two nodes that ask at once; the winner asking again wins again, the other stays refused', async () => {
    const { nodes } = await cluster(['a', 'b']);
    const [a, b] = [nodes.get('a') as Membership, nodes.get('b') as Membership];
    for (let i = 0; i < 10; i++) {
      const task = `forget-node/gone-${i}`;
      const [byA, byB] = await Promise.all([a.claimTask(task), b.claimTask(task)]);
      assert.equal(Number(byA) + Number(byB), 1, `exactly one winner of ${task}: a ${byA}, b ${byB}`);
      const [winner, loser] = byA ? [a, b] : [b, a];
      assert.equal(await winner.claimTask(task), true, 'the winner asking again (its chore failed halfway) wins again');
      assert.equal(await loser.claimTask(task), false, 'the other is still refused');
    }
  });

  it('refuses a claim from a node that has not announced itself', async () => {
    const { nodes } = await cluster(['quiet'], false);
    assert.equal(await (nodes.get('quiet') as Membership).claimTask('forget-node/x'), false);
  });

  it("keeps the claim on the claimer's node lease: when that lease ends (the claimer died), the next to ask wins", async () => {
    const { prefix, nodes } = await cluster(['a', 'b']);
    const [a, b] = [nodes.get('a') as Membership, nodes.get('b') as Membership];
    assert.equal(await a.claimTask('forget-node/n3'), true);
    assert.equal(await b.claimTask('forget-node/n3'), false);
    const lease = await leaseOf(`${prefix}tasks/forget-node/n3`);
    assert.ok(lease !== undefined && lease !== '0', 'the claim has a lease');
    assert.equal(lease, await leaseOf(`${prefix}nodes/a`), "the claim's lease is a's announcement's");
    // As if a's process died: its lease ends without a's word (revoked here, not waited out).
    await raw.leaseClient.leaseRevoke({ ID: lease });
    assert.equal(await leaseOf(`${prefix}tasks/forget-node/n3`), undefined, 'the claim went with the lease');
    assert.equal(await b.claimTask('forget-node/n3'), true, 'the chore is free for the next to ask');
    // a, back with a new lease, finds the chore b's now.
    await waitFor("a's lease to be seen lost", async () => {
      await a.renew();
      return (await leaseOf(`${prefix}nodes/a`)) !== undefined ? true : undefined;
    });
    assert.equal(await a.claimTask('forget-node/n3'), false);
  });

  it('frees a chore on releaseTask, so the next to ask wins it; releasing a chore nobody holds is a no-op', async () => {
    const { nodes } = await cluster(['a', 'b']);
    const [a, b] = [nodes.get('a') as Membership, nodes.get('b') as Membership];
    assert.equal(await a.claimTask('forget-node/back'), true);
    assert.equal(await b.claimTask('forget-node/back'), false);
    // The forgotten node came back and announced itself: it gives the chore up (any node may).
    await b.releaseTask('forget-node/back');
    assert.equal(await b.claimTask('forget-node/back'), true, 'b wins the chore now');
    assert.equal(await a.claimTask('forget-node/back'), false, 'and a, the former winner, is refused');
    await a.releaseTask('forget-node/never-claimed');
  });
});
