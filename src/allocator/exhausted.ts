/**
 * The refusal of a range with no free address (POOL_EXHAUSTED), naming what it holds: allocated and
 * resting addresses over the range pool and its blocks, as this node's store sees them.
 */
import { WarrenError } from '../core/errors.ts';
import { inRangePool } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { Store } from '../store/store.ts';

export async function exhausted(store: Store, range: RangeSpec): Promise<WarrenError> {
  const summaries = (await store.pools(range.pool)).filter((p) => inRangePool(p.pool, range.pool));
  const allocated = summaries.reduce((n, p) => n + p.allocated, 0);
  const resting = summaries.reduce((n, p) => n + p.resting, 0);
  return new WarrenError(
    'POOL_EXHAUSTED',
    `pool ${range.pool} has no free address (${allocated} allocated, ${resting} resting after release)`,
  );
}
