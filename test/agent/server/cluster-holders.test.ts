/**
 * `warren allocations --cluster` shows who really holds each address: a borrower publishes its loan
 * pools (store/tiered/publisher.ts, ClusterTier.publishLoan), and the listing shows the borrower's
 * container where the lender published only a placeholder naming the borrower, never both
 * (agent/server/cluster-holders.ts). On MemoryTier and on the Kubernetes tier through the fake API
 * server, with real TieredStores lending to each other (test/allocator/lending/lending-nodes.ts).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { clusterPage } from '../../../src/agent/server/allocation-pages.ts';
import type { ManualClock } from '../../../src/core/clock.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import type { AllocationFilter } from '../../../src/store/store.ts';
import { openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster } from '../../allocator/lending/lending-nodes.ts';

let fake: Promise<FakeKubeApi> | undefined;
const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
  if (fake !== undefined) await (await fake).stop();
});

async function kubeSession(clock: ManualClock) {
  fake ??= startFakeKubeApi({ crds: 'deploy' });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile((await fake).kubeconfigPath);
  return openKubeTier({ kubeConfig, namespace: 'warren-system', leaseSeconds: 15, clock });
}

/** Every item of the cluster listing, `limit` at a time. */
async function listed(c: LendingCluster, filter: AllocationFilter = {}, limit = 1): Promise<Allocation[]> {
  const view = (f: { pool?: string; node?: string }, p?: { limit: number; continue?: string }) =>
    c.cluster.published(f, p);
  const items: Allocation[] = [];
  let token: string | undefined;
  do {
    const page = await clusterPage(view, filter, { limit, ...(token === undefined ? {} : { continue: token }) });
    items.push(...page.items);
    token = page.continue;
  } while (token !== undefined);
  return items;
}

const shown = (items: readonly Allocation[]) => items.map((a) => `${a.address} ${a.node} ${a.containerID}`).sort();

/** A lender with one container, a borrower using one address lent by it; both published. */
async function lentAndUsed(c: LendingCluster, range: string) {
  const ranges = rangesOf({ range, block_size: 28 });
  clusters.push(c);
  const [l0] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges });
  const [b0] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges }));
  assert.ok(l0 && b0);
  for (const n of c.nodes) await n.store.flush();
  return { ranges, l0: l0.allocation.address, b0: b0.allocation.address };
}

for (const [name, open] of [
  ['MemoryTier', async () => new LendingCluster(['lender', 'borrower'])],
  ['the Kubernetes tier (fake API server)', () => LendingCluster.open(['lender', 'borrower'], kubeSession)],
] as const) {
  describe(`who holds each address, on ${name}`, () => {
    if (name === 'MemoryTier')
      it('publishes every loan again after a restart, whatever was lost before it', async () => {
        const c = await open();
        const { ranges, b0 } = await lentAndUsed(c, '10.49.6.0/28');
        const pool = ranges[0]?.pool ?? '';
        await c.tier.withdraw(`${pool}#${b0}/32`, 'borrower');
        await c.restart('borrower');
        await c.node('borrower').store.flush();
        assert.deepEqual(shown(await listed(c, { rangePool: pool, node: 'borrower' })), [`${b0} borrower b0`]);
      });

    it("lists a lent address once, as the borrower's container, not as its lender's placeholder", async () => {
      const c = await open();
      const { ranges, l0, b0 } = await lentAndUsed(c, name === 'MemoryTier' ? '10.49.0.0/28' : '10.49.1.0/28');
      const every = (await listed(c)).filter((a) => [l0, b0].includes(a.address));
      assert.deepEqual(shown(every), [`${b0} borrower b0`, `${l0} lender l0`].sort());
      const pool = ranges[0]?.pool ?? '';
      assert.deepEqual(shown(await listed(c, { rangePool: pool }, 100)), shown(every), 'the same whatever the page');
      assert.deepEqual(shown(await listed(c, { rangePool: pool })), shown(every));
      // One node's listing: the borrower's own container, from its loan ledger's publication.
      assert.deepEqual(shown(await listed(c, { rangePool: pool, node: 'borrower' })), [`${b0} borrower b0`]);
    });

    it('shows the placeholder again once the loan is idle, and withdraws the publication once it is given back', async () => {
      const c = await open();
      const { ranges, b0 } = await lentAndUsed(c, name === 'MemoryTier' ? '10.49.2.0/28' : '10.49.3.0/28');
      const pool = ranges[0]?.pool ?? '';
      await c.node('borrower').allocator.release(owner('b0'));
      await c.node('borrower').store.flush();
      const idle = (await listed(c)).filter((a) => a.address === b0);
      assert.deepEqual(
        idle.map((a) => [a.network, a.containerID]),
        [['warren.dev/lent', 'borrower']],
      );
      for (let i = 0; i < 3; i++) {
        await c.node('borrower').allocator.lend({ returnGraceMs: 0, orphanGraceMs: 3_600_000 });
        await c.node('borrower').store.flush();
      }
      const loans = (await c.cluster.published({ pool, node: 'borrower' })).items.filter((b) => b.loan === true);
      assert.deepEqual(loans, [], 'the loan given back is no longer published');
    });

    it("withdraws a forgotten node's loan publications with its blocks", async () => {
      const c = await open();
      const { ranges } = await lentAndUsed(c, name === 'MemoryTier' ? '10.49.4.0/28' : '10.49.5.0/28');
      // The fake is shared by this file's tests: each looks at its own range.
      const pool = ranges[0]?.pool ?? '';
      const loans = async () =>
        (await c.cluster.published({ pool, node: 'borrower' })).items.filter((b) => b.loan === true).length;
      assert.equal(await loans(), 1);
      await c.node('lender').store.cluster.owners.forgetNode('borrower');
      assert.equal(await loans(), 0);
    });
  });
}
