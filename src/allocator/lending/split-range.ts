/**
 * A range as this node's store has it split: the smallest block size pinned at its first use and,
 * where its blocks grow, the largest (allocator/block-assigner.ts pins both; ipam/blocks.ts
 * splitRange). Lending looks up the block holding an address through it, so a grown block's claim
 * is found where the smallest block's alone would miss it. Undefined until this node served the
 * range (nothing pinned here yet). `describedInStore`: the same read from the store's description
 * alone, for a node that has not served the range since its start (its exclusions are the config's,
 * applied at each ADD, so a span without them serves what needs only the blocks' bounds).
 */
import { parseCidr, parseIP } from '../../ipam/address.ts';
import { splitRange } from '../../ipam/blocks.ts';
import { defined } from '../../core/defined.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
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

export async function describedInStore(store: Store, pool: string): Promise<RangeSpec | undefined> {
  const d = (await store.ledgers(pool)).find((p) => p.ledger === pool)?.description;
  const [key, subnet, first, last] = [
    parsePoolKey(pool),
    parseCidr(d?.subnet ?? ''),
    parseIP(d?.first ?? ''),
    parseIP(d?.last ?? ''),
  ];
  if (
    d?.blockPrefix === undefined ||
    key === undefined ||
    subnet === undefined ||
    first === undefined ||
    last === undefined
  )
    return undefined;
  const { blockPrefix, largestBlockPrefix } = d;
  const range = {
    pool,
    family: key.family,
    subnet: d.subnet,
    network: subnet.address.value,
    prefixLength: subnet.length,
  };
  return {
    ...range,
    first: first.value,
    last: last.value,
    excluded: [],
    blockPrefix,
    ...defined({ largestBlockPrefix }),
  };
}
