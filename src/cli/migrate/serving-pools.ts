/**
 * Which Warren pool a migrated address lives in. Not always the pool of the range whose IPPool held
 * it: when ranges of one network_name nest (a /24 on one definition, a /26 inside it on another,
 * kept unique across by whereabouts' OverlappingRangeIPReservations), the agent serves a range from
 * the admitted pools that cover it (allocator/range-cover.ts), so once the /24 is admitted the /26's
 * addresses live in the /24's pool. Recorded in the /26's pool, they would be handed out again from
 * the /24's: a duplicate. So before planning, every range the definitions configure is covered as
 * the agent covers it (allocator/admission.ts `coverInSpaces`), outermost first (shorter prefix
 * first): an outer range is admitted before the ranges inside it, which it then serves, one pool
 * for them all, as whereabouts keeps one set of reservations for them all; and each address is
 * placed in the covering pool whose subnet holds it.
 *
 * Guarantees: a dry run writes nothing (each address space is read once and the admissions followed
 * on a copy, range-cover.ts `coverAfterAdmissions`); an address of a covered range is placed in an
 * admitted pool of its address space, the same whichever of the nested ranges it was held in (the
 * rule: admitted pools never overlap); a range kept apart (`enable_overlapping_ranges: false`) is its
 * own pool; an address outside every pool of its range's cover stays in the range's own pool.
 */
import { coverInSpaces } from '../../allocator/admission.ts';
import { coverAfterAdmissions } from '../../allocator/range-cover.ts';
import { bitsOf, parseIP } from '../../ipam/address.ts';
import { type PoolKey, parsePoolKey, subnetWithin } from '../../ipam/pool-key.ts';
import type { AddressSpaces } from '../../store/store.ts';
import { spaceOfPool } from '../../store/tiered/ranges.ts';

/** Rounds of read-and-admit against an address space agents keep changing, before TRY_AGAIN. */
const MAX_ATTEMPTS = 8;

/** The pool serving `address`, held by whereabouts in range pool `rangePool`. */
export type PoolOf = (rangePool: string, address: string) => string;

interface Cover {
  readonly pool: string;
  readonly key: PoolKey;
}

/** An address space as a dry run follows it: read once, then changed on the copy only. */
interface SpaceCopy {
  admitted: readonly string[];
}

/**
 * Covers every range pool of `rangePools`, outermost first, admitting what the rule asks (nothing
 * when `dryRun`), and answers where each address lives.
 */
export async function servingPools(
  spaces: AddressSpaces,
  rangePools: Iterable<string>,
  dryRun: boolean,
): Promise<PoolOf> {
  const ranges = [...new Set(rangePools)]
    .flatMap((pool) => {
      const key = parsePoolKey(pool);
      return key === undefined ? [] : [{ pool, key }];
    })
    .sort((a, b) => a.key.prefixLength - b.key.prefixLength || (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : 0));
  const copies = new Map<string, SpaceCopy>();
  const covers = new Map<string, readonly Cover[]>();
  for (const { pool, key } of ranges) {
    if (key.isolated === true) covers.set(pool, [{ pool, key }]);
    else if (!dryRun) covers.set(pool, await coverInSpaces(spaces, pool, MAX_ATTEMPTS));
    else {
      const space = spaceOfPool(pool);
      let copy = copies.get(space);
      if (copy === undefined) {
        const reading = await spaces.read(space);
        copy = { admitted: reading.admitted };
        copies.set(space, copy);
      }
      const after = coverAfterAdmissions(pool, key, copy.admitted);
      copy.admitted = after.admitted;
      covers.set(
        pool,
        after.pools.flatMap((p) => {
          const k = parsePoolKey(p);
          return k === undefined ? [] : [{ pool: p, key: k }];
        }),
      );
    }
  }
  return (rangePool, address) => {
    const ip = parseIP(address);
    if (ip === undefined) return rangePool;
    const host = { family: ip.family, network: ip.value, prefixLength: bitsOf(ip.family) };
    return covers.get(rangePool)?.find((c) => subnetWithin(host, c.key))?.pool ?? rangePool;
  };
}
