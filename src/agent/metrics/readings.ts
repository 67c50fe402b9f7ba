/**
 * What a scrape reads from the agent's state (`MetricsReadings`, the contract the metrics read
 * through, so they hold no state of their own), as plain functions of it: per range the figures of
 * its pool report and, on a store shared by nodes, the blocks this node owns and those of other
 * nodes it allocated from; the journal's set-aside files; and `agentReadings`, the readings the
 * agent's metrics take, put together from the parts that hold them.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { defined } from '../../core/defined.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { PoolReport } from '../../api/protocol.ts';
import type { WarrenPoolReport } from '../../api/status.ts';
import { REJECTED_DIR } from '../../sources/missed-delete-journal.ts';
import type { ReleaseSource } from '../../api/dashboard.ts';

/** One range as a scrape reports it. */
export interface PoolFigures {
  /** The range's pool key (`10.0.0.0/24`, `10.0.0.0/16@net`). */
  readonly pool: string;
  /** Addresses the range holds; a number (a /64's 2^64 is exact enough for a gauge). */
  readonly capacity?: number;
  readonly allocated: number;
  readonly resting: number;
  /** On a store shared by nodes, for a range split into blocks. */
  readonly blocks?: { readonly owned: number; readonly borrowed: number };
}

/** A WarrenPool as its status shows it (written by one agent of the cluster from the published blocks). */
export interface WarrenPoolFigures {
  readonly name: string;
  /** Allocatable addresses; absent until the status is written. */
  readonly capacity?: number;
  readonly used?: number;
}

/** What a scrape reads from the agent. */
export interface MetricsReadings {
  pools(): Promise<readonly PoolFigures[]>;
  /** The WarrenPools the agent watches (the kubernetes store); none elsewhere. */
  warrenPools?(): readonly WarrenPoolFigures[];
  journal(): { readonly pending: number; readonly setAside: number };
  /** Intents queued (or backing off) in the release pipeline, by source. */
  queueDepth(): Readonly<Partial<Record<ReleaseSource, number>>>;
  /** Whether ADD can be served now. */
  ready(): Promise<boolean>;
  /** On a store shared by nodes: whether this node stopped on it, and whether the cluster recovers (recovery.ts). */
  cluster?(): { readonly halted: boolean; readonly recovering: boolean };
  /** Addresses this node holds for no container, by kind (ipam/bookkeeping.ts); absent: none kept. */
  bookkeeping?(): Promise<Readonly<Record<string, number>>>;
}

/**
 * Per range, what a scrape reports: the pool report's figures and, on a store shared by nodes,
 * the blocks this node owns and those of other nodes it allocated from (borrowed).
 */
export function poolFigures(
  pools: readonly PoolReport[],
  own: readonly Allocation[],
  node: string,
  clustered: boolean,
): PoolFigures[] {
  const ranges = pools.filter((p) => !isBlockKey(p.pool));
  const owned = new Map<string, number>();
  const affinity = new Map<string, string | undefined>();
  for (const p of pools) {
    if (!isBlockKey(p.pool)) continue;
    affinity.set(p.pool, p.node);
    if (p.node === node) owned.set(rangePoolOfKey(p.pool), (owned.get(rangePoolOfKey(p.pool)) ?? 0) + 1);
  }
  const borrowedBlocks = new Map<string, Set<string>>();
  for (const a of own) {
    if (!isBlockKey(a.pool) || affinity.get(a.pool) === node) continue;
    const range = rangePoolOfKey(a.pool);
    const set = borrowedBlocks.get(range) ?? new Set<string>();
    set.add(a.pool);
    borrowedBlocks.set(range, set);
  }
  return ranges.map((p) => ({
    pool: p.pool,
    ...(p.capacity === undefined ? {} : { capacity: Number(p.capacity) }),
    allocated: p.allocated,
    resting: p.resting,
    ...(clustered && p.blockPrefix !== undefined
      ? { blocks: { owned: owned.get(p.pool) ?? 0, borrowed: borrowedBlocks.get(p.pool)?.size ?? 0 } }
      : {}),
  }));
}

/** Files set aside in the journal's `rejected/` directory (0 when it is not there). */
export function setAsideCount(journalDir: string): number {
  try {
    return readdirSync(join(journalDir, REJECTED_DIR)).length;
  } catch {
    return 0;
  }
}

/** Where a scrape's readings come from: the parts that hold them, read when a scrape asks. */
export interface ReadingSources {
  /** This node. */
  readonly node: string;
  /** Every pool's report (the operator service's). */
  readonly pools: () => Promise<readonly PoolReport[]>;
  /**
   * This node's allocations, on a store shared by nodes (they tell borrowed blocks apart);
   * undefined on a store of one node, which has no blocks.
   */
  readonly ownAllocations: (() => Promise<readonly Allocation[]>) | undefined;
  /** Journal files not yet released, and the journal's directory (its set-aside files). */
  readonly pendingJournal: () => number;
  readonly journalDir: string;
  readonly queueDepth: MetricsReadings['queueDepth'];
  /** Resolves when an ADD can be served now. */
  readonly readiness: () => Promise<void>;
  /** This node's bookkeeping records by kind (server/bookkeeping-counts.ts). */
  readonly bookkeeping?: () => Promise<Readonly<Record<string, number>>>;
  /** The WarrenPools the agent watches, with their status (the kubernetes store). */
  readonly warrenPools?: () => readonly WarrenPoolReport[];
  /** On a store shared by nodes: this node's halt and the cluster's recovery marker, as last seen. */
  readonly cluster?: MetricsReadings['cluster'];
}

/** The agent's readings for AgentMetrics, from the parts that hold them. */
export function agentReadings(from: ReadingSources): MetricsReadings {
  return {
    pools: async () => {
      const own = from.ownAllocations;
      return poolFigures(await from.pools(), own === undefined ? [] : await own(), from.node, own !== undefined);
    },
    journal: () => ({ pending: from.pendingJournal(), setAside: setAsideCount(from.journalDir) }),
    queueDepth: () => from.queueDepth(),
    ...defined({ bookkeeping: from.bookkeeping, cluster: from.cluster }),
    warrenPools: () =>
      (from.warrenPools?.() ?? []).map((p) => ({
        name: p.name,
        ...(p.capacity === undefined ? {} : { capacity: Number(p.capacity) }),
        ...defined({ used: p.used }),
      })),
    ready: () =>
      from.readiness().then(
        () => true,
        () => false,
      ),
  };
}
