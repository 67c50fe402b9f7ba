/**
 * Where a node whose own blocks are full claims next, for block-assigner.ts: placement.ts applied to
 * what the node reads of the range. The assigner applies the decision (the claim's commit) and tells
 * the outcome back (`claimed`).
 *
 * Guarantees:
 * - a range of one page of claims is read whole (`owners.rangeBlocks`: one request), as before;
 * - in a larger range (the store's `owners.knownBlocks` answers), a claim is placed by probing:
 *   placement over the blocks this node knows without reading the range (its own claims, its
 *   store's records, those it lost or was refused, and those its lost probes found taken), searched
 *   from a block its name picks (placement.ts `probeStart`), so a node's first claims read no other
 *   node's claim: what they cost does not grow with the nodes or the range's claims (issue 36: at
 *   5,000 nodes a first claim listed 22.5 pages of every WarrenBlock of the range);
 * - a probe that loses (the block exists: the create answered AlreadyExists; or a block overlapping
 *   it was claimed first) is remembered as taken and the next round probes the next block; after
 *   MAX_PROBES lost in a row, or when the known blocks leave none free, the range is read whole
 *   (every page), and the probes start over; `borrow` and `full` are decided only from the whole
 *   range, so a partial picture never reports a range full; a range so read with no block free is
 *   read whole again, not probed, until a reading finds one or a claim in it wins;
 * - safety is the cluster tier's, as for any claim: a claim is the creation of the block's record by
 *   name (and, where blocks grow, refused when it overlaps one made first), so a probe never takes a
 *   block another node holds; the claim guard (tiered/claim-guard.ts) reads the block's publication
 *   first on every claim, probed or not;
 * - after a lost race, a range read whole is searched from a place the node's name picks
 *   (placement.ts `spread`).
 */
import { blockCapacity, blockOfKey } from '../ipam/blocks.ts';
import { withReservations } from '../ipam/reserved.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { BlockOwners, LedgerSummary } from '../store/store.ts';
import type { LedgerAssigner } from './ledger-assigner.ts';
import type { OwnBlocks } from './own-blocks.ts';
import { type Placement, placeInBlocks, probeStart, wantedBlockPrefix } from './placement.ts';

/** Probes lost in a row in one range before the range is read whole. */
export const MAX_PROBES = 4;

export interface RangePlacerOptions {
  readonly node: string;
  readonly owners: Pick<BlockOwners, 'rangeBlocks' | 'knownBlocks'>;
  readonly own: OwnBlocks;
  /** Its reservations (`reserved`): a block they hold back whole is never claimed. */
  readonly assigner: Pick<LedgerAssigner, 'reserved'>;
  /** ADDs under way in a range pool (at least 1): how large a block a claim asks for. */
  readonly demand?: ((rangePool: string) => number) | undefined;
}

export class RangePlacer {
  readonly #o: RangePlacerOptions;
  /** Range pools whose last claim lost: placement.ts `spread` when the range is read whole. */
  readonly #racesLost = new Set<string>();
  /** Range pool → the blocks its probes found taken since it was last read whole or a claim won. */
  readonly #probedTaken = new Map<string, Set<string>>();
  /**
   * Range pools last read whole with no block free: read whole again (not probed) until a reading
   * finds one or a claim wins, so a full range costs no lost probes on a tier with no fully-claimed
   * mark (etcd), where every ADD on it reads the range.
   */
  readonly #noneFree = new Set<string>();

  constructor(options: RangePlacerOptions) {
    this.#o = options;
  }

  /**
   * Places a block in `range`: by probing where the range is large and probes are left (unless
   * `whole`), else from every claim of the range; this node's blocks as the picture shows them
   * become the own list.
   */
  async place(range: RangeSpec, whole = false): Promise<Placement> {
    const taken = this.#probedTaken.get(range.pool) ?? new Set<string>();
    const probing = !whole && taken.size < MAX_PROBES && !this.#noneFree.has(range.pool);
    const known = probing ? await this.#o.owners.knownBlocks(range.pool) : undefined;
    if (known !== undefined) {
      const probed = this.#decide(range, withTaken(known, taken), probeStart);
      if (probed.kind === 'claim' || probed.kind === 'own') return probed;
    }
    this.#probedTaken.delete(range.pool); // read whole: what the probes learnt is in it
    const summaries = await this.#o.owners.rangeBlocks(range.pool, { counts: false });
    const placed = this.#decide(range, summaries, this.#racesLost.has(range.pool) ? 'spread' : undefined);
    this.#noneFree[placed.kind === 'borrow' || placed.kind === 'full' ? 'add' : 'delete'](range.pool);
    return placed;
  }

  /** The outcome of a claim of block `key` placed by `place`: a lost one is probed past and spreads the next search. */
  claimed(rangePool: string, key: string, won: boolean): void {
    this.#racesLost[won ? 'delete' : 'add'](rangePool);
    if (won) {
      this.#probedTaken.delete(rangePool);
      this.#noneFree.delete(rangePool);
    } else this.#probedTaken.set(rangePool, (this.#probedTaken.get(rangePool) ?? new Set()).add(key));
  }

  #decide(
    range: RangeSpec,
    summaries: readonly LedgerSummary[],
    from: typeof probeStart | 'spread' | undefined,
  ): Placement {
    const { node, own, assigner } = this.#o;
    const wantedPrefix = wantedBlockPrefix(
      range,
      this.#o.demand?.(range.pool) ?? 1,
      heldCapacity(range, summaries, node),
    );
    // Placed with the reservations as exclusions: a block they hold back whole is never claimed
    // (it could hand nothing out); the blocks decided on are the range's own again.
    const placed = placeInBlocks({
      range: withReservations(range, assigner.reserved) ?? range,
      node,
      summaries,
      known: own.get(range.pool) ?? [],
      wantedPrefix,
      spread: from === 'spread',
      ...(typeof from === 'function' ? { start: from(range, node, wantedPrefix) } : {}),
    });
    own.set(range.pool, placed.mine);
    return asRange(range, placed.placement);
  }
}

/** The known blocks, with those lost probes found taken shown held by someone (unless known held already). */
function withTaken(known: readonly LedgerSummary[], taken: ReadonlySet<string>): LedgerSummary[] {
  const holder = '(taken: a probe lost)';
  const shown = known.map((p) => (p.affinity === undefined && taken.has(p.ledger) ? { ...p, affinity: holder } : p));
  const keys = new Set(known.map((p) => p.ledger));
  const unseen = [...taken].filter((key) => !keys.has(key));
  return [...shown, ...unseen.map((key) => ({ ledger: key, revision: 0, allocated: 0, resting: 0, affinity: holder }))];
}

/** What `node`'s blocks of `range` can hand out, as the summaries show them. */
function heldCapacity(
  range: RangeSpec,
  summaries: readonly { ledger: string; affinity?: string }[],
  node: string,
): bigint {
  let held = 0n;
  for (const s of summaries) {
    const block = s.affinity === node ? blockOfKey(range, s.ledger) : undefined;
    if (block !== undefined) held += blockCapacity(block);
  }
  return held;
}

/** A placement's block as a block of `range` itself (placement saw it with reservations as exclusions). */
function asRange(range: RangeSpec, placement: Placement): Placement {
  if (placement.kind !== 'claim') return placement;
  const block = placement.block;
  return { ...placement, block: blockOfKey(range, block.key) ?? block };
}
