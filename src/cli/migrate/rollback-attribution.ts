/**
 * Which IPPool each address Warren holds goes back to, for `warren migrate to-whereabouts`, when
 * ranges of one network_name nest (a /24 on one definition, a /26 inside it on another). Warren
 * serves such ranges from the admitted pools that cover them (allocator/range-cover.ts): an
 * allocation made through the /26's definition may live in the /24's pool, or in a piece carved
 * of it. Read by the ranges' own pool keys, it would be missed, or written into the /24's IPPool,
 * which whereabouts' DEL through the /26's definition never looks in.
 *
 * So the pools read are every admitted pool of a target's address space that overlaps its range
 * (`tier.spaces.read`, with the range's own pool), and an address goes to the target whose range
 * holds it (ipam/shared-pools.ts `heldInRange`) and whose definitions' CNI network made it (an
 * allocation's `network`); when no such target's network made it, to the innermost range holding
 * it. Whereabouts then holds each address in the IPPool its definition's pods use, and, once for
 * all the nested ranges, in the network_name's OverlappingRangeIPReservation.
 *
 * Guarantees: `poolsToRead` only reads; `attribute` is pure, gives an address at most one target,
 * and reports an address two pools of one address space hold for two attachments (a duplicate
 * Warren made) instead of writing either.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import { ownerKey } from '../../ipam/allocation.ts';
import { parsePoolKey, poolsOverlap } from '../../ipam/pool-key.ts';
import { heldInRange } from '../../ipam/shared-pools.ts';
import type { AddressSpaces } from '../../store/store.ts';
import { spaceOfPool } from '../../store/tiered/ranges.ts';
import type { RollbackTarget } from './rollback-plan.ts';
import type { WarrenHeld } from './warren-held.ts';

/** What the targets get of what Warren holds. */
export interface Attribution {
  /** The allocations to write into each target's objects. */
  readonly holders: ReadonlyMap<RollbackTarget, readonly Allocation[]>;
  /** The addresses Warren holds for no container, by the target whose range holds them. */
  readonly bookkeeping: ReadonlyMap<RollbackTarget, ReadonlyArray<{ readonly address: string; readonly what: string }>>;
  readonly problems: ReadonlyArray<{ readonly pool: string; readonly address: string; readonly message: string }>;
}

/** The Warren pools whose holders may belong to `targets`: their own, and the admitted pools overlapping them. */
export async function poolsToRead(spaces: AddressSpaces, targets: readonly RollbackTarget[]): Promise<Set<string>> {
  const pools = new Set(targets.flatMap((t) => t.pools));
  const readings = new Map<string, readonly string[]>();
  for (const pool of [...pools]) {
    const key = parsePoolKey(pool);
    if (key === undefined || key.isolated === true) continue;
    const space = spaceOfPool(pool);
    let admitted = readings.get(space);
    if (admitted === undefined) {
      admitted = (await spaces.read(space)).admitted;
      readings.set(space, admitted);
    }
    for (const other of admitted) {
      const theirs = parsePoolKey(other);
      if (theirs !== undefined && poolsOverlap(key, theirs)) pools.add(other);
    }
  }
  return pools;
}

/** The longest prefix of a target's ranges holding `a` (undefined: none does). */
function innermost(target: RollbackTarget, a: Pick<Allocation, 'pool' | 'address'>): number | undefined {
  const holding = target.ranges.filter((r) => heldInRange(r, a)).map((r) => r.prefixLength);
  return holding.length === 0 ? undefined : Math.max(...holding);
}

/** The target `a` goes back to: see the module header. */
export function targetOf(
  targets: readonly RollbackTarget[],
  a: Pick<Allocation, 'pool' | 'address'> & { readonly network?: string },
): RollbackTarget | undefined {
  const holding = targets.flatMap((target) => {
    const prefix = innermost(target, a);
    return prefix === undefined ? [] : [{ target, prefix }];
  });
  const made = holding.filter((h) => a.network !== undefined && h.target.networks.includes(a.network));
  const chosen = made.length > 0 ? made : holding;
  return chosen.reduce<(typeof chosen)[number] | undefined>(
    (best, h) => (best === undefined || h.prefix > best.prefix ? h : best),
    undefined,
  )?.target;
}

/** What Warren holds (`held`, read from `poolsToRead`), given to the targets. */
export function attribute(targets: readonly RollbackTarget[], held: WarrenHeld): Attribution {
  const problems = held.problems.filter((p) => targetOf(targets, p) !== undefined);
  // By address space (a network_name's reservations) and address: one holder, or a duplicate.
  const byAddress = new Map<string, { target: RollbackTarget; holders: Allocation[] }>();
  for (const h of held.holders) {
    const target = targetOf(targets, h.allocation);
    if (target === undefined) continue;
    const space = target.reservations ? `@${target.networkName}` : target.ipPool;
    const key = `${space}\n${h.allocation.address}`;
    const at = byAddress.get(key) ?? { target, holders: [] };
    if (!at.holders.some((o) => ownerKey(o) === ownerKey(h.allocation))) at.holders.push(h.allocation);
    byAddress.set(key, at);
  }
  const holders = new Map<RollbackTarget, Allocation[]>(targets.map((t) => [t, []]));
  for (const { target, holders: at } of byAddress.values()) {
    const [only, ...more] = at;
    if (only === undefined) continue;
    if (more.length === 0) {
      holders.get(target)?.push(only);
      continue;
    }
    const whose = at.map((a) => `container ${a.containerID.slice(0, 12)} on ${a.node}`);
    problems.push({
      pool: at.map((a) => a.pool).join(' and '),
      address: only.address,
      message: `Warren holds it for ${whose.join(' and for ')}`,
    });
  }
  const bookkeeping = new Map<RollbackTarget, Array<{ address: string; what: string }>>(targets.map((t) => [t, []]));
  for (const b of held.bookkeeping) {
    const target = targetOf(targets, b);
    if (target !== undefined) bookkeeping.get(target)?.push({ address: b.address, what: b.what });
  }
  return { holders, bookkeeping, problems };
}
