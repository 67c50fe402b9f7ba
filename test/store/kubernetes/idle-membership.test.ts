/**
 * The cost of an idle node's membership on the Kubernetes store (issue 36, a silent control plane),
 * counted on the fake API server over 30 minutes of a manual clock with the default lease (300 s)
 * and upkeep interval (10 s): the node announcement is written at most once per 100 s by the node
 * holding a chore, and never by the node holding none (issue 36: liveness on demand), the store's
 * identity object is read only when the announcement was written (not on every upkeep run), and
 * a chore asked for on every run costs its holder no request once held, and the node refused it
 * no request before the holder's announcement can have lapsed. The watches of the node's Lease and
 * the state object are open before the idle window and ask nothing in it (the server ends a watch
 * after 240 s of real time, which the manual clock does not pass).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ClusterUpkeep } from '../../../src/agent/cluster/upkeep.ts';
import { RecentErrors } from '../../../src/agent/metrics/recent-errors.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { nodeLeaseName, taskLeaseName } from '../../../src/store/kubernetes/names.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import type { RequestRecord } from '../../helpers/fake-kube-api/types.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { waitFor } from '../../helpers/processes.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 300;
const UPKEEP_MS = 10_000;
const IDLE_MS = 30 * 60_000;
const TASK = 'pool-status';

describe('an idle node on the Kubernetes store', () => {
  let fake: FakeKubeApi;
  const clock = new ManualClock(Date.now());
  const opened: KubeTier[] = [];
  /** A tier on `on` (this test's clock, or one running ahead of it). */
  const tier = async (on: ManualClock = clock): Promise<KubeTier> => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.kubeconfigPath);
    const t = await openKubeTier({ kubeConfig, namespace: NAMESPACE, leaseSeconds: LEASE_SECONDS, clock: on });
    opened.push(t);
    return t;
  };
  const upkeepOf = (t: KubeTier, node: string): ClusterUpkeep =>
    new ClusterUpkeep({
      membership: t.membership,
      allocator: { returnEmptyBlocks: async () => ({ returned: [], errors: [] }) },
      clock,
      logger: silentLogger,
      errors: new RecentErrors(clock, silentLogger),
      node,
      version: 'test',
      intervalMs: UPKEEP_MS,
      blockGraceMs: 300_000,
    });
  const named = (records: readonly RequestRecord[], verb: string, name: string): number =>
    records.filter((r) => r.verb === verb && r.resource === 'leases' && r.path.endsWith(`/${name}`)).length;
  const counted = (records: readonly RequestRecord[], verb: string, resource: string): number =>
    records.filter((r) => r.verb === verb && r.resource === resource).length;

  /** Whether `t`'s node, renewing and asking for `task` every upkeep run, takes it within a lease and 20 s. */
  const takenWithinALease = async (t: KubeTier, task: string): Promise<boolean> => {
    for (let elapsed = 0; elapsed <= (LEASE_SECONDS + 20) * 1000; elapsed += UPKEEP_MS) {
      clock.advance(UPKEEP_MS);
      await t.membership.renew();
      if (await t.membership.claimTask(task)) return true;
    }
    return false;
  };

  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const t of opened) await t.close();
    await fake.stop();
  });

  it('writes its Lease at most once per 100 s, reads the identity not at all while its watch follows it, and asks for no chore it holds', async () => {
    const [holderTier, otherTier] = [await tier(), await tier()];
    const [holder, other] = [upkeepOf(holderTier, 'idle-a'), upkeepOf(otherTier, 'idle-b')];
    await holder.announceFirst();
    await other.announceFirst();
    assert.equal(await holderTier.membership.claimTask(TASK), true, 'the first to ask holds the chore');
    assert.equal(await otherTier.membership.claimTask(TASK), false);
    // Each node watches its Lease and the state object once announced: opened before the idle window.
    await waitFor('the watches open', () =>
      fake.watchCount('leases') >= 2 && fake.watchCount('warrenclusterstates') >= 2 ? true : undefined,
    );
    fake.clearRequests();
    const byNode = new Map<string, RequestRecord[]>([
      ['idle-a', []],
      ['idle-b', []],
    ]);
    for (let elapsed = 0; elapsed < IDLE_MS; elapsed += UPKEEP_MS) {
      clock.advance(UPKEEP_MS);
      for (const [node, upkeep, t] of [
        ['idle-a', holder, holderTier],
        ['idle-b', other, otherTier],
      ] as const) {
        const from = fake.requests.length;
        await upkeep.run();
        assert.equal(await t.membership.claimTask(TASK), node === 'idle-a', `${node} holds the chore or not`);
        byNode.get(node)?.push(...fake.requests.slice(from));
      }
    }
    const holderRequests = byNode.get('idle-a') ?? [];
    const otherRequests = byNode.get('idle-b') ?? [];
    const budget = IDLE_MS / 100_000;
    for (const [node, records] of byNode) {
      assert.ok(
        named(records, 'update', nodeLeaseName(node)) <= budget,
        `${node}: at most one write of its Lease per 100 s`,
      );
      assert.equal(
        counted(records, 'get', 'warrenclusterstates'),
        0,
        `${node}: the identity object not read: its watch tells of a change`,
      );
      assert.equal(counted(records, 'list', 'leases'), 0, `${node}: no listing`);
    }
    assert.equal(named(holderRequests, 'create', taskLeaseName(TASK)), 0, 'the holder asks for no chore it holds');
    assert.equal(named(holderRequests, 'get', taskLeaseName(TASK)), 0, 'nor reads it');
    assert.equal(
      holderRequests.length,
      named(holderRequests, 'update', nodeLeaseName('idle-a')),
      'the holder makes no request but the renewal',
    );
    // The other node asks again only once the holder's announcement, as it read it, can have lapsed.
    assert.ok(
      named(otherRequests, 'create', taskLeaseName(TASK)) <= IDLE_MS / (LEASE_SECONDS * 1000 - 100_000),
      `the node refused a chore asks again only when its holder's announcement can have lapsed: ${named(otherRequests, 'create', taskLeaseName(TASK))}`,
    );
    // Issue 36, liveness on demand: the node that holds no chore writes nothing at all in 30 minutes
    // (not its Lease, not a create of the chore refused with 409); the holder renews once per 100 s.
    const writes = otherRequests.filter((r) => !['get', 'list', 'watch'].includes(r.verb ?? ''));
    assert.deepEqual(
      writes.map((r) => `${r.verb} ${r.path}`),
      [],
      'the node holding no chore writes nothing',
    );
    assert.ok(named(holderRequests, 'update', nodeLeaseName('idle-a')) >= IDLE_MS / 100_000 - 1, 'the holder renews');
    assert.equal(holderTier.membership.halted(), undefined);
    assert.equal(otherTier.membership.halted(), undefined);
  });

  it('takes a chore over once its holder stopped renewing and its announcement lapsed', async () => {
    const [holderTier, otherTier] = [await tier(), await tier()];
    await holderTier.membership.announce('gone-a', { since: clock.now(), version: 'test' });
    await otherTier.membership.announce('gone-b', { since: clock.now(), version: 'test' });
    assert.equal(await holderTier.membership.claimTask('gone-chore'), true);
    assert.equal(await otherTier.membership.claimTask('gone-chore'), false);
    // gone-a stops renewing; gone-b keeps its own announcement alive and keeps asking.
    assert.ok(
      await takenWithinALease(otherTier, 'gone-chore'),
      'the chore is taken over within a lease of its holder falling silent',
    );
    const chore = fake.object('leases', taskLeaseName('gone-chore'), NAMESPACE);
    assert.equal((chore?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'gone-b');
  });

  it("takes a chore over within a lease of its holder falling silent, though the holder's clock ran an hour ahead", async () => {
    // Found by the soak (kubernetes, seed 3817): the node holding the Node watch's chore had its clock an
    // hour ahead; its Leases read as renewed an hour into the future, so after it died no node took the
    // chore, and no lost node was forgotten, for an hour.
    const ahead = new ManualClock(clock.now() + 3_600_000);
    const holderTier = await tier(ahead);
    const otherTier = await tier();
    await holderTier.membership.announce('ahead-a', { since: ahead.now(), version: 'test' });
    await otherTier.membership.announce('ahead-b', { since: clock.now(), version: 'test' });
    assert.equal(await holderTier.membership.claimTask('ahead-chore'), true);
    assert.equal(await otherTier.membership.claimTask('ahead-chore'), false, 'held while its holder lives');
    assert.ok(
      await takenWithinALease(otherTier, 'ahead-chore'),
      'the chore is taken over within a lease of its holder falling silent',
    );
  });
});
