/**
 * The status of every WarrenPool — capacity (allocatable addresses of its ranges), use (addresses
 * handed out, resting, lent between nodes, free; capacity and free also as people read them, which
 * `kubectl get warrenpools` shows) and the blocks and nodes holding them — written by ONE agent of
 * the cluster at a time
 * (the chore `pool-status`, a Lease, as node forget elects its agent), from the blocks the agents
 * publish, at a bounded rate: one round per interval (default 30 s), each reading the published
 * blocks of the pools' ranges a page at a time and writing only the statuses that changed.
 *
 * Guarantees:
 * - only the agent holding the chore writes; should it die, the chore goes with its lease and the
 *   next agent to ask takes it up;
 * - a status is written through the status subresource at the resourceVersion last seen (an
 *   operator's edit in between wins; the next round writes again), and only when what it shows
 *   changed: an idle cluster costs the API server no writes;
 * - a pool whose spec cannot be used shows why (`problem`) instead of figures;
 * - a round that fails is logged and retried at the next interval; it never stops the loop
 *   (a PeriodicTask: the first round one interval after `run` starts, each next one an interval
 *   after the last ended).
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask, type PeriodicTaskStatus } from '../../core/periodic-task.ts';
import { isPlainObject } from '../../core/validate.ts';
import type { PublishedView } from '../../store/cluster.ts';
import type { StoreCluster } from '../../store/store.ts';
import { publishedFigures } from '../../store/tiered/published-figures.ts';
import { countText } from '../../ipam/count-text.ts';
import type { CatalogEntry } from '../../sources/kubernetes/pool-catalog.ts';
import { poolCapacity } from '../../sources/kubernetes/warren-pool.ts';

/** The chore whose holder writes the pools' statuses. */
export const POOL_STATUS_TASK = 'pool-status';
/** Default time between two rounds (the agent's: three upkeep intervals, 30 s by default). */
export const POOL_STATUS_INTERVAL_MS = 30_000;
export interface PoolFigures {
  /** Decimal (an IPv6 range holds more than an integer), and as people read it (`2^64`: count-text.ts). */
  readonly capacity: string;
  readonly capacityText: string;
  readonly used: number;
  readonly resting: number;
  /** Of `used`, in use on a node that borrowed it from another node's block. */
  readonly lent: number;
  /** capacity − used − resting, decimal and as people read it. */
  readonly free: string;
  readonly freeText: string;
  readonly blocks: number;
  readonly nodes: number;
}

export interface PoolStatusOptions {
  readonly catalog: { entries(): CatalogEntry[] };
  readonly tier: { readonly published: StoreCluster['records']['published'] } & Pick<StoreCluster, 'membership'>;
  /** PUT of the object's status subresource at its resourceVersion: false when it changed or is gone. */
  readonly write: (object: Record<string, unknown>) => Promise<boolean>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly intervalMs?: number;
}

export class PoolStatusWriter {
  readonly #o: PoolStatusOptions;
  readonly #task: PeriodicTask<number>;
  #rounds = 0;
  #written = 0;

  constructor(options: PoolStatusOptions) {
    this.#o = options;
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: options.intervalMs ?? POOL_STATUS_INTERVAL_MS,
      run: () => this.round(),
      onError: (error) =>
        options.logger.warn({ err: messageOf(error) }, 'could not write the WarrenPools status; will retry'),
    });
  }

  /**
   * What a pool's ranges hold, from the published blocks of each range (every block: this chore is
   * off every path, and its job is the whole pool), counted as published-figures.ts counts them: a
   * lent address once, by its lender's placeholder, not again by the borrower's loan publication.
   */
  async figures(entry: CatalogEntry): Promise<PoolFigures | string> {
    if (entry.spec instanceof Error) return entry.spec.message;
    const published: PublishedView = (filter, page) => this.#o.tier.published(filter, page);
    let [used, resting, lent, blocks] = [0, 0, 0, 0];
    const nodes = new Set<string>();
    for (const range of entry.spec.ranges) {
      const f = await publishedFigures(published, range.pool, Number.POSITIVE_INFINITY);
      used += f.allocated;
      resting += f.resting;
      lent += f.lent;
      blocks += f.blocks;
      for (const share of f.byNode) if (share.blocks > 0) nodes.add(share.node);
    }
    const capacity = poolCapacity(entry.spec.ranges);
    const left = capacity - BigInt(used) - BigInt(resting);
    const free = String(left < 0n ? 0n : left);
    return {
      capacity: String(capacity),
      capacityText: countText(String(capacity)),
      used,
      resting,
      lent,
      free,
      freeText: countText(free),
      blocks,
      nodes: nodes.size,
    };
  }

  /** One round: when this agent holds the chore, the statuses that changed written. Answers how many. */
  async round(): Promise<number> {
    this.#rounds += 1;
    const entries = this.#o.catalog.entries();
    // A cluster without pools costs no request at all: not even the chore's Lease.
    if (entries.length === 0) return 0;
    if (!(await this.#o.tier.membership.claimTask(POOL_STATUS_TASK))) return 0;
    let written = 0;
    for (const entry of entries) {
      const figures = await this.figures(entry);
      const meta = isPlainObject(entry.object.metadata) ? entry.object.metadata : {};
      const generation = typeof meta.generation === 'number' ? meta.generation : undefined;
      const shown = {
        ...(typeof figures === 'string' ? { problem: figures } : figures),
        ...defined({ observedGeneration: generation }),
      };
      const current = isPlainObject(entry.object.status) ? entry.object.status : {};
      const { updatedAt: _at, ...before } = current;
      if (sameStatus(before, shown)) continue;
      const status = { ...shown, updatedAt: new Date(this.#o.clock.now()).toISOString() };
      if (await this.#o.write({ ...entry.object, status })) written += 1;
    }
    this.#written += written;
    return written;
  }

  /** Rounds until `signal` aborts, one per interval; settles once the round under way ended. */
  run(signal: AbortSignal): Promise<void> {
    return this.#task.runUntil(signal);
  }

  status(): { rounds: number; written: number; lastError?: string; chore: PeriodicTaskStatus } {
    const chore = this.#task.status();
    return {
      rounds: this.#rounds,
      written: this.#written,
      ...defined({ lastError: chore.lastError }),
      chore,
    };
  }
}

function sameStatus(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) if (a[key] !== b[key]) return false;
  return true;
}
