/**
 * Nodes of a two-tier cluster for unit tests: each node a TieredStore on its own SQLite file and a
 * session of one MemoryTier, with an allocator that splits ranges into blocks, on one ManualClock.
 */
import { copyFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { RangeSpec } from '../../../src/ipam/range.ts';
import type { ClusterTier } from '../../../src/store/tiered/cluster-tier.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { TieredStore } from '../../../src/store/tiered/store.ts';
import { tempDir } from '../../helpers/processes.ts';
import { MemoryTier } from './memory-tier.ts';

export interface TieredNode {
  readonly name: string;
  readonly store: TieredStore;
  readonly allocator: Allocator;
  /** What the store told its `notice`. */
  readonly notices: string[];
}

export interface TieredCluster {
  readonly clock: ManualClock;
  /** Where node `<name>` keeps its SQLite file: `<dir>/<name>.db`. */
  readonly dir: string;
  readonly tier: MemoryTier;
  readonly nodes: TieredNode[];
  /**
   * Closes node `i`'s store and opens it again on the same file (a restart of its agent); `between`
   * runs while it is closed (a test restoring its file from a copy).
   */
  restart(i: number, between?: () => void): Promise<TieredNode>;
  /** Every request the cluster answered so far, all sessions. */
  calls(): number;
  close(): Promise<void>;
}

export interface TieredClusterOptions {
  readonly publishIntervalMs?: number;
  /** Addresses a publication announces (tiered/publisher.ts; 0: none, as before issue 36's part 2). */
  readonly publishAhead?: number;
  readonly publishSettleMs?: number;
  /** What a node's store sees of its session of the cluster (a test's wrapper around it). */
  readonly wrap?: (tier: ClusterTier, node: string) => ClusterTier;
}

export function tieredCluster(names: readonly string[], o: TieredClusterOptions = {}): TieredCluster {
  const clock = new ManualClock(1_000_000);
  const tier = new MemoryTier({ clock });
  const dir = tempDir();
  const open = (name: string): TieredNode => {
    const notices: string[] = [];
    const store = new TieredStore({
      local: new SqliteStore({ path: join(dir, `${name}.db`) }),
      tier: o.wrap === undefined ? tier.session() : o.wrap(tier.session(), name),
      node: name,
      clock,
      notice: (m) => notices.push(m),
      ...(o.publishIntervalMs === undefined ? {} : { publishIntervalMs: o.publishIntervalMs }),
      ...(o.publishAhead === undefined ? {} : { publishAhead: o.publishAhead }),
      ...(o.publishSettleMs === undefined ? {} : { publishSettleMs: o.publishSettleMs }),
    });
    return { name, store, allocator: new Allocator({ store, clock, node: name, blocks: true }), notices };
  };
  const nodes = names.map(open);
  return {
    clock,
    dir,
    tier,
    nodes,
    restart: async (i, between) => {
      const old = nodes[i];
      if (old === undefined) throw new Error(`no node ${i}`);
      await old.store.close();
      between?.();
      const again = open(old.name);
      nodes[i] = again;
      return again;
    },
    calls: () => [...tier.calls.values()].reduce((a, b) => a + b, 0),
    close: async () => {
      for (const n of nodes) await n.store.close();
    },
  };
}

/**
 * One node's TieredStore, on its own SQLite file (in `dir`, a fresh directory unless given) and a
 * session of `tier` (a fresh MemoryTier unless given): the store an agent splits ranges into blocks on.
 */
export function tieredStore(
  clock: ManualClock,
  o: { readonly node?: string; readonly tier?: MemoryTier; readonly dir?: string } = {},
): TieredStore {
  const node = o.node ?? 'n1';
  return new TieredStore({
    local: new SqliteStore({ path: join(o.dir ?? tempDir(), `${node}.db`) }),
    tier: (o.tier ?? new MemoryTier({ clock })).session(),
    node,
    clock,
  });
}

export const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });

export function rangesOf(ipam: Record<string, unknown>): readonly RangeSpec[] {
  return parseIpamConfig({ type: 'warren', ...ipam }).ranges;
}

/** Copies node `name`'s file (closed: no write in flight) into a directory of its own (`into`), to put back later. */
export function backUpFile(c: TieredCluster, name: string, into: string = tempDir('warren-backup-')): string {
  for (const f of readdirSync(c.dir).filter((f) => f.startsWith(`${name}.db`)))
    copyFileSync(join(c.dir, f), join(into, f));
  return into;
}

/** Puts the copy back in place of node `name`'s file (its store closed), WAL and all. */
export function putBackFile(c: TieredCluster, name: string, from: string): void {
  for (const f of readdirSync(c.dir).filter((f) => f.startsWith(`${name}.db`))) rmSync(join(c.dir, f));
  for (const f of readdirSync(from)) copyFileSync(join(from, f), join(c.dir, f));
}
