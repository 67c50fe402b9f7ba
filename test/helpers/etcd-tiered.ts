/**
 * What `--store etcd` opens (the node's SQLite file beside the etcd tier: src/store/etcd-tier/tiered.ts), for tests
 * that stand in for an agent of one node on a real etcd: a SQLite file of its own in a fresh temp
 * dir unless `path` names one. Not started (no publication or claim-check timers): a test that needs
 * the published view flushes. And the cluster's view of agents on etcd, through an etcd tier on
 * their prefix: what they published and claimed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { type Clock, systemClock } from '../../src/core/clock.ts';
import type { EtcdClientOptions } from '../../src/store/etcd-tier/client.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { EtcdTier } from '../../src/store/etcd-tier/tier.ts';
import { type EtcdTieredStore, openEtcdTiered } from '../../src/store/etcd-tier/tiered.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { tempDir, waitFor } from './processes.ts';

export interface TieredOnEtcd extends Partial<EtcdClientOptions> {
  readonly endpoints: readonly string[];
  readonly prefix: string;
  readonly node: string;
  readonly path?: string;
  readonly clock?: Clock;
  readonly leaseSeconds?: number;
  readonly historyIntervalMs?: number;
  readonly notice?: (message: string) => void;
}

export function openTieredOnEtcd(o: TieredOnEtcd): Promise<EtcdTieredStore> {
  const { path, clock, leaseSeconds, node, ...rest } = o;
  return openEtcdTiered({
    ...rest,
    endpoints: [...o.endpoints],
    local: new SqliteStore({ path: path ?? join(tempDir(), `${node}.db`) }),
    node,
    clock: clock ?? systemClock,
    leaseSeconds: leaseSeconds ?? 10,
  });
}

/** Every allocation the nodes published (of `network` when given): what the cluster sees of them. */
export async function published(tier: EtcdTier, network?: string): Promise<Allocation[]> {
  const out: Allocation[] = [];
  let next: string | undefined;
  do {
    const page = await tier.published({}, { limit: 100, ...(next === undefined ? {} : { continue: next }) });
    for (const b of page.items)
      out.push(...b.allocations.filter((a) => network === undefined || a.network === network));
    next = page.continue;
  } while (next !== undefined);
  return out;
}

/** The published view once it holds `count` allocations of `network` (the nodes publish every 2 s). */
export async function publishedOnce(tier: EtcdTier, network: string, count: number): Promise<Allocation[]> {
  return waitFor(`${count} allocations of ${network} published`, async () => {
    const all = await published(tier, network);
    return all.length === count ? all : undefined;
  });
}

/** Block key → the node whose claim holds it, for a range. */
export async function claims(tier: EtcdTier, rangePool: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let next: string | undefined;
  do {
    const page = await tier.claimsIn(rangePool, { limit: 100, ...(next === undefined ? {} : { continue: next }) });
    for (const c of page.items) out.set(c.key, c.node);
    next = page.continue;
  } while (next !== undefined);
  return out;
}

/**
 * The cluster agrees with itself: no address published twice in a range, and every published
 * block claimed by the node that published it.
 */
export async function assertConsistent(tier: EtcdTier, network: string, rangePool: string): Promise<void> {
  const allocations = await published(tier, network);
  const byAddress = new Map<string, string>();
  for (const a of allocations) {
    assert.equal(byAddress.get(a.address), undefined, `${a.address} published twice`);
    byAddress.set(a.address, a.containerID);
  }
  const held = await claims(tier, rangePool);
  for (const a of allocations)
    assert.equal(held.get(a.pool), a.node, `${a.address} published in block ${a.pool}, claimed by ${held.get(a.pool)}`);
}

/**
 * The store flags of an agent on store `etcd`, its keys under `prefix`, with the cluster chores
 * every second (a loss noticed within a step or two); `extra` after them.
 */
export function etcdStoreArgs(endpoints: readonly string[], prefix: string, extra: readonly string[] = []): string[] {
  return [
    '--store',
    'etcd',
    '--etcd-endpoints',
    endpoints.join(','),
    '--etcd-prefix',
    prefix,
    '--upkeep-interval',
    '1',
    ...extra,
  ];
}
