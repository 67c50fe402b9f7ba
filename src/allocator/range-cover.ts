/**
 * Which pools serve a range of a network_name whose ranges overlap (a /24 and a /26 inside it, on
 * two configs), so that every address is handed out at most once across all of them, as
 * whereabouts' `enable_overlapping_ranges` promises. Pure: no I/O; admission.ts reads the address
 * space, follows the plan, and keeps the answer.
 *
 * The rule. The admitted pools of an address space never overlap one another. A range is served
 * from the admitted pools that cover it, its segments:
 * - admitted itself, or inside an admitted pool: that one pool (restricted to the range's span);
 * - overlapping no admitted pool: admit it;
 * - holding admitted pools: what they leave of it is split into the largest aligned subnets
 *   (pieces); each is admitted as a pool of its own, one after another, and the range is served
 *   from the inner pools and the pieces.
 * Admission only adds pools; it never retires one, even one that holds nothing now. So the pool an
 * address lives in never changes, and every range containing the address is served from that same
 * pool: one address, one pool, one ledger that decides it. (Retiring an empty pool into a range
 * around it would rest on the store counting what a pool holds exactly, at the instant of the
 * admission: a migration's grants not yet adopted, or a block claimed meanwhile, are not counted
 * by the Kubernetes tier; a range widened later is served from the old pool and the pieces.)
 *
 * Guarantees: `planCover` answers `covered` only with pools that are admitted, overlap the range and
 * together contain all of it; a plan to admit names a pool that overlaps no admitted pool, so
 * following plans keeps admitted pools apart; carving a subnet gives at most (its host bits) pieces
 * per inner pool.
 */
import { bitsOf, formatCidr } from '../ipam/address.ts';
import {
  type PoolKey,
  type Subnet,
  parsePoolKey,
  poolKeyOf,
  poolsOverlap,
  subnetWithin,
  subnetsOverlap,
} from '../ipam/pool-key.ts';
import { DEFAULT_BLOCK_PREFIX, type RangeSpec } from '../ipam/range.ts';

/** What to do to serve a range: it is covered by these admitted pools, or admit one more first. */
export type CoverPlan =
  | { readonly kind: 'covered'; readonly pools: readonly string[] }
  | { readonly kind: 'admit'; readonly pool: string };

/**
 * The plan for range pool `key` (parsed: `me`), given the pools admitted in its address space. A
 * pool kept apart (isolated) is its own cover.
 */
export function planCover(key: string, me: PoolKey, admitted: Iterable<string>): CoverPlan {
  if (me.isolated === true) return { kind: 'covered', pools: [key] };
  const overlapping: Array<{ key: string; pool: PoolKey }> = [];
  for (const other of new Set(admitted)) {
    if (other === key) return { kind: 'covered', pools: [key] };
    const pool = parsePoolKey(other);
    if (pool !== undefined && poolsOverlap(me, pool)) overlapping.push({ key: other, pool });
  }
  const outer = overlapping.find((o) => subnetWithin(me, o.pool));
  if (outer !== undefined) return { kind: 'covered', pools: [outer.key] };
  if (overlapping.length === 0) return { kind: 'admit', pool: key };
  const pieces = carve(
    me,
    overlapping.map((o) => o.pool),
  );
  const piece = pieces[0];
  if (piece !== undefined) return { kind: 'admit', pool: poolKeyOf(piece, me.networkName) };
  overlapping.sort((a, b) => (a.pool.network < b.pool.network ? -1 : a.pool.network > b.pool.network ? 1 : 0));
  return { kind: 'covered', pools: overlapping.map((o) => o.key) };
}

/**
 * The pools `key` would be served from once every admission its plans ask for were made, followed on
 * a copy of `admitted` (nothing is written): what a dry run reports. Also the pools admitted then.
 */
export function coverAfterAdmissions(
  key: string,
  me: PoolKey,
  admitted: readonly string[],
): { readonly pools: readonly string[]; readonly admitted: readonly string[] } {
  const now = new Set(admitted);
  for (;;) {
    const plan = planCover(key, me, now);
    if (plan.kind === 'covered') return { pools: plan.pools, admitted: [...now] };
    now.add(plan.pool);
  }
}

/** What `inner` (subnets inside `subnet`) leave of `subnet`, as the largest aligned subnets, in address order. */
export function carve(subnet: Subnet, inner: readonly Subnet[]): Subnet[] {
  const touching = inner.filter((i) => subnetsOverlap(i, subnet));
  if (touching.length === 0) return [subnet];
  if (touching.some((i) => subnetWithin(subnet, i))) return [];
  const prefixLength = subnet.prefixLength + 1;
  const half = 1n << BigInt(bitsOf(subnet.family) - prefixLength);
  return [
    ...carve({ family: subnet.family, network: subnet.network, prefixLength }, touching),
    ...carve({ family: subnet.family, network: subnet.network + half, prefixLength }, touching),
  ];
}

/**
 * `range` as served from pool `key` (`pool` parsed): its span cut to the pool's subnet, its
 * exclusions and gateway kept, the block size the pool's own (pinned in the store at the pool's
 * first use: a size the config set applies to its own pool only). Undefined when no allocatable
 * address of the range lies in the pool.
 */
export function servedFrom(range: RangeSpec, key: string, pool: Subnet): RangeSpec | undefined {
  if (key === range.pool) return range;
  const end = pool.network + (1n << BigInt(bitsOf(pool.family) - pool.prefixLength)) - 1n;
  const first = range.first > pool.network ? range.first : pool.network;
  const last = range.last < end ? range.last : end;
  if (first > last) return undefined;
  const { blockSizeSet: _set, largestBlockPrefix: _largest, ...rest } = range;
  return {
    ...rest,
    subnet: formatCidr(pool.family, pool.network, pool.prefixLength),
    network: pool.network,
    prefixLength: pool.prefixLength,
    first,
    last,
    pool: key,
    blockPrefix: Math.max(DEFAULT_BLOCK_PREFIX[pool.family], pool.prefixLength),
  };
}
