/**
 * What `--store etcd` opens (the node's SQLite file beside the etcd tier: etcd-tiered.ts), for tests
 * that stand in for an agent of one node on a real etcd: a SQLite file of its own in a fresh temp
 * dir unless `path` names one. Not started (no publication or claim-check timers): a test that needs
 * the published view flushes.
 */
import { join } from 'node:path';
import { type Clock, systemClock } from '../../src/core/clock.ts';
import type { EtcdClientOptions } from '../../src/store/etcd-client.ts';
import { type EtcdTieredStore, openEtcdTiered } from '../../src/store/etcd-tier/etcd-tiered.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';
import { tempDir } from './processes.ts';

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
