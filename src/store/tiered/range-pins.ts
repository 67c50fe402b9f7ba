/**
 * The ranges of the two-tier store (tiered/store.ts) as the cluster pins them: each split range's record
 * (subnet, bounds, block size) pinned in the cluster once and cached here, and the block size of a range
 * read from its local description without a request.
 *
 * Guarantees:
 * - a range is pinned in the cluster at most once per process (then answered from the cache); the first
 *   block size pinned wins across nodes (ClusterTier.pinRange);
 * - a `describe` with a block size pins the range first: a range already split differently in the cluster
 *   writes the cluster's size into the local description and answers a conflict naming it, so the
 *   allocator's next look at `pools(range)` sees the stored size (and refuses a config that asks for another);
 * - the largest block size (RangeRecord.largestBlockPrefix) is pinned with the block size, and the
 *   cluster's wins alike: a range pinned before blocks grew has none, and its blocks keep one size;
 * - a range whose local description names no block size was never split: `blockPrefix` and `rangeOf`
 *   answer undefined and ask the cluster nothing.
 */
import { defined } from '../../core/defined.ts';
import type { ClusterTier, RangeRecord } from './cluster-tier.ts';
import type { CommitResult, LedgerOp, Revision, Store } from '../store.ts';
import { spaceOfPool } from './ranges.ts';

export class RangePins {
  readonly #local: Store;
  readonly #tier: ClusterTier;
  /** Range pool → its record as pinned in the cluster. */
  readonly #ranges = new Map<string, RangeRecord>();
  /** Split range pools (their blocks held to claims) → the block size their local description fixed. */
  readonly #split = new Map<string, number>();

  constructor(local: Store, tier: ClusterTier) {
    this.#local = local;
    this.#tier = tier;
  }

  /** The range's block size, as pinned here or locally described (no request); undefined: never split. */
  async blockPrefix(rangePool: string): Promise<number | undefined> {
    const known = this.#ranges.get(rangePool)?.blockPrefix ?? this.#split.get(rangePool);
    if (known !== undefined) return known;
    const blockPrefix = (await this.#local.ledgers(rangePool)).find((p) => p.ledger === rangePool)?.description
      ?.blockPrefix;
    if (blockPrefix !== undefined) this.#split.set(rangePool, blockPrefix);
    return blockPrefix;
  }

  /** The range as pinned in the cluster, from the local description; undefined when never split. */
  async rangeOf(rangePool: string): Promise<RangeRecord | undefined> {
    const known = this.#ranges.get(rangePool);
    if (known !== undefined) return known;
    const summary = (await this.#local.ledgers(rangePool)).find((p) => p.ledger === rangePool);
    const d = summary?.description;
    if (d?.blockPrefix === undefined) return undefined;
    const { subnet, first, last, blockPrefix, largestBlockPrefix } = d;
    const pinned = await this.#tier.pinRange({
      pool: rangePool,
      space: spaceOfPool(rangePool),
      subnet,
      first,
      last,
      blockPrefix,
      ...defined({ largestBlockPrefix }),
    });
    this.#ranges.set(rangePool, pinned);
    return pinned;
  }

  async commitDescribed(
    pool: string,
    expected: Revision,
    ops: readonly LedgerOp[],
    described: Extract<LedgerOp, { op: 'describe' }>,
  ): Promise<CommitResult> {
    const d = described.description;
    const { subnet, first, last } = d;
    const asked: RangeRecord = {
      pool,
      space: spaceOfPool(pool),
      subnet,
      first,
      last,
      blockPrefix: d.blockPrefix ?? 0,
      ...defined({ largestBlockPrefix: d.largestBlockPrefix }),
    };
    const pinned = await this.#tier.pinRange(asked);
    this.#ranges.set(pool, pinned);
    if (pinned.blockPrefix === asked.blockPrefix && pinned.largestBlockPrefix === asked.largestBlockPrefix)
      return this.#local.commit(pool, expected, ops);
    // Split differently in the cluster (or pinned before blocks grew): record the cluster's sizes so
    // the next look at the range sees them.
    const { largestBlockPrefix: _asked, ...rest } = d;
    const description = {
      ...rest,
      blockPrefix: pinned.blockPrefix,
      ...defined({ largestBlockPrefix: pinned.largestBlockPrefix }),
    };
    const fixed = ops.map((op) => (op === described ? { op: 'describe' as const, description } : op));
    await this.#local.commit(pool, expected, fixed);
    return {
      kind: 'conflict',
      reason: `range ${pool} is split into /${pinned.blockPrefix} blocks in ${this.#tier.description}`,
    };
  }
}
