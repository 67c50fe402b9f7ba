/**
 * A range as this node's store has it split: the smallest block size pinned at its first use and,
 * where its blocks grow, the largest (allocator/block-assigner.ts pins both; ipam/blocks.ts
 * splitRange). Lending looks up the block holding an address through it, so a grown block's claim
 * is found where the smallest block's alone would miss it. Undefined until this node served the
 * range (nothing pinned here yet).
 */
import { splitRange } from '../../ipam/blocks.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { Store } from '../../store/store.ts';

export async function splitInStore(store: Store, configured: RangeSpec): Promise<RangeSpec | undefined> {
  const summary = (await store.ledgers(configured.pool)).find((p) => p.ledger === configured.pool);
  const description = summary?.description;
  return description?.blockPrefix === undefined
    ? undefined
    : splitRange(configured, {
        blockPrefix: description.blockPrefix,
        largestBlockPrefix: description.largestBlockPrefix,
      });
}
