/**
 * The refusal of an ADD whose range has no free address, with what fills it: allocated, resting
 * after release, and held back by cluster-wide reservations (ipam/reserved.ts), so an operator
 * can tell a range used up from one reserved away. Reads the range's pool summaries once, on the
 * refusal only.
 */
import { WarrenError } from '../core/errors.ts';
import { inRangePool } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import type { Store } from '../store/store.ts';

export async function exhaustedError(
  store: Store,
  range: RangeSpec,
  reserved: ReservedAddresses | undefined,
): Promise<WarrenError> {
  const summaries = (await store.pools(range.pool)).filter((p) => inRangePool(p.pool, range.pool));
  const allocated = summaries.reduce((n, p) => n + p.allocated, 0);
  const resting = summaries.reduce((n, p) => n + p.resting, 0);
  const by = reserved === undefined ? [] : reserved.overlapping(range.family, range.first, range.last);
  const held =
    by.length === 0
      ? ''
      : `, some held back by ${by
          .slice(0, 3)
          .map((r) => ReservedAddresses.describe(r))
          .join(', ')}${by.length > 3 ? ` and ${by.length - 3} more reservations` : ''}`;
  return new WarrenError(
    'POOL_EXHAUSTED',
    `pool ${range.pool} has no free address (${allocated} allocated, ${resting} resting after release${held})`,
  );
}
