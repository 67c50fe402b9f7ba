/**
 * The lease of a node's announcement on real etcd (etcd-tier/membership.ts): a lease the
 * announcement granted and could not use is let go, never kept alive unused. Kept alive, such a
 * lease outlived its use for as long as the agent ran, kept its node announced past the agent's stop
 * (until it lapsed), and after the store closed held the process open for up to twice its lifetime
 * (its keep-alive retrying every 100 ms: on the old code this file outlived its tests by 30 s). Each
 * test holds the lease far longer than it waits, so a lease gone is one revoked, not one lapsed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Etcd3, Namespace } from 'etcd3';
import { EtcdContinuity } from '../../../src/store/etcd-tier/continuity.ts';
import { EtcdMembership } from '../../../src/store/etcd-tier/membership.ts';
import { EtcdRecovery } from '../../../src/store/etcd-tier/recovery.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { waitFor } from '../../helpers/processes.ts';

/** Far longer than any wait here: a lease that goes was revoked. */
const LEASE_SECONDS = 600;

describe('etcd store: the lease of a node announcement', () => {
  let etcd: EtcdCluster;
  let raw: Etcd3;
  let serial = 0;

  before(async () => {
    etcd = await startEtcd(1);
    const { Etcd3: Client } = await import('etcd3');
    raw = new Client({ hosts: etcd.endpoints });
  });
  after(async () => {
    raw?.close();
    await etcd?.stop();
  });

  const leases = async (): Promise<Set<string>> =>
    new Set((await raw.leaseClient.leaseLeases()).leases.map((l) => String(l.ID)));

  /**
   * A membership on a fresh prefix whose etcd calls go through `intercept` (told each call's name
   * and its number among the calls so named), as the tier's own wrapper runs them.
   */
  const membership = (intercept: (what: string, nth: number) => Promise<void>): EtcdMembership => {
    serial += 1;
    const ns: Namespace = raw.namespace(`/announce-lease-${serial}/`);
    const counts = new Map<string, number>();
    const call = async <T>(what: string, body: () => Promise<T>): Promise<T> => {
      const nth = (counts.get(what) ?? 0) + 1;
      counts.set(what, nth);
      await intercept(what, nth);
      return body();
    };
    return new EtcdMembership({
      ns,
      leaseSeconds: LEASE_SECONDS,
      call,
      continuity: new EtcdContinuity(),
      verifyIdentity: async () => {},
      republish: async () => ({ addresses: 0, blocks: 0, conflicts: [] }),
      recovery: new EtcdRecovery({ ns, call }),
      holders: async () => [],
    });
  };

  it('never keeps alive the lease of an announcement that failed after its grant (etcd away at its write)', async () => {
    const before = await leases();
    const node = membership(async (what, nth) => {
      // The grant is the first call, the announcement's write the second.
      if (what === 'announce node' && nth === 2) throw new Error('etcd went away (the test)');
    });
    await assert.rejects(node.announce('n1', { since: 0, version: 'test' }), /etcd went away/);
    const granted = [...(await leases())].filter((id) => !before.has(id));
    await waitFor('the lease the failed announcement granted revoked', async () => {
      const now = await leases();
      return granted.every((id) => !now.has(id)) ? true : undefined;
    });
  });

  it('leaves nothing announced when it withdraws while an announcement is under way', async () => {
    let write: () => void = () => {};
    const writing = new Promise<void>((resolve) => (write = resolve));
    let reached: () => void = () => {};
    const atWrite = new Promise<void>((resolve) => (reached = resolve));
    const node = membership(async (what, nth) => {
      if (what !== 'announce node' || nth !== 2) return;
      reached();
      await writing; // the agent stops meanwhile
    });
    const announcing = node.announce('n2', { since: 0, version: 'test' });
    await atWrite;
    await node.withdraw();
    write();
    await announcing;
    const key = `/announce-lease-${serial}/nodes/n2`;
    await waitFor('the announcement written after the withdrawal gone with its lease', async () =>
      (await raw.get(key).exec()).kvs.length === 0 ? true : undefined,
    );
    assert.equal((await raw.getAll().prefix(`/announce-lease-${serial}/`).keys()).length, 0, 'nothing left announced');
  });
});
