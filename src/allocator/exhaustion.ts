/**
 * The refusal of an ADD whose range has no free address, with what fills it: allocated, resting
 * after release, and held back by cluster-wide reservations (ipam/reserved.ts), so an operator
 * can tell a range used up from one reserved away. Reads the range's pool summaries once, on the
 * refusal only.
 *
 * On a range shared by nodes (a store with a cluster tier) this node's figures are its share only:
 * the refusal says them as this node's, and beside them the range's state across the cluster as its
 * nodes published it (store/tiered/published-figures.ts) — "no free address on node n1 (14 allocated
 * here …); across the cluster 30 of 30 allocated (n1 14, n2 16)", not a pool that looks half empty.
 * Those figures are read off the common path, bounded, and kept `FIGURES_KEPT_MS` per range, so a
 * full range refusing ADD after ADD (a runtime retrying) costs the cluster one read per interval;
 * when they cannot be read the refusal says so and why. A range served from several pools (ranges
 * of its network_name overlap it: admission.ts) is refused with each pool's figures, the first few.
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { inRangePool } from '../ipam/blocks.ts';
import { type RangeSpec, capacityOf } from '../ipam/range.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import { type PublishedFigures, describeFigures, publishedFigures } from '../store/tiered/published-figures.ts';
import type { Store } from '../store/store.ts';

/** How long a range's figures across the cluster are kept for the next refusal, on the monotonic clock. */
export const FIGURES_KEPT_MS = 10_000;

/** Pools a refusal of a range served from several describes one by one. */
const MAX_SEGMENTS_SHOWN = 4;

export interface ExhaustionOptions {
  readonly store: Store;
  readonly node: string;
  readonly clock: Clock;
  readonly reserved?: ReservedAddresses | undefined;
}

export class Exhaustion {
  readonly #o: ExhaustionOptions;
  /** The last figures read per range pool, or why they could not be, and when (monotonic). */
  readonly #kept = new Map<string, { at: number; figures: PublishedFigures | string }>();

  constructor(options: ExhaustionOptions) {
    this.#o = options;
  }

  /**
   * The POOL_EXHAUSTED refusal of an ADD in `range`, served from `segments` (the range restricted to
   * each pool it is served from, admission.ts) when ranges of its network_name overlap it.
   */
  async error(range: RangeSpec, segments: readonly RangeSpec[] = [range]): Promise<WarrenError> {
    const only = segments[0];
    if (segments.length === 1 && only !== undefined && only.pool === range.pool) return this.#poolError(range);
    const shown = segments.slice(0, MAX_SEGMENTS_SHOWN);
    const each: string[] = [];
    for (const segment of shown) each.push((await this.#poolError(segment)).message);
    const more = segments.length > shown.length ? `; and ${segments.length - shown.length} more pools` : '';
    return new WarrenError(
      'POOL_EXHAUSTED',
      `pool ${range.pool} has no free address in any of the ${segments.length} pools its span is served from ` +
        `(ranges of its network_name overlap): ${each.join('; ')}${more}`,
    );
  }

  async #poolError(range: RangeSpec): Promise<WarrenError> {
    const { store, reserved, node } = this.#o;
    const summaries = (await store.ledgers(range.pool)).filter((p) => inRangePool(p.ledger, range.pool));
    const allocated = summaries.reduce((n, p) => n + p.allocated, 0);
    const resting = summaries.reduce((n, p) => n + p.resting, 0);
    const held = heldBack(range, reserved);
    const records = store.cluster?.records;
    if (records === undefined) {
      return new WarrenError(
        'POOL_EXHAUSTED',
        `pool ${range.pool} has no free address (${allocated} allocated, ${resting} resting after release${held})`,
      );
    }
    const figures = await this.#figures(range.pool, records.published.bind(records));
    const cluster =
      typeof figures === 'string'
        ? `the range across the cluster could not be read: ${figures}`
        : `across the cluster ${describeFigures(figures, String(capacityOf(range)))}, as published`;
    return new WarrenError(
      'POOL_EXHAUSTED',
      `pool ${range.pool} has no free address on node ${node} (${allocated} allocated here, ${resting} resting ` +
        `after release${held}); ${cluster}`,
    );
  }

  async #figures(
    rangePool: string,
    published: Parameters<typeof publishedFigures>[0],
  ): Promise<PublishedFigures | string> {
    const now = this.#o.clock.monotonic();
    const kept = this.#kept.get(rangePool);
    if (kept !== undefined && now - kept.at < FIGURES_KEPT_MS) return kept.figures;
    const figures = await publishedFigures(published, rangePool).catch((error: unknown) => messageOf(error));
    this.#kept.set(rangePool, { at: now, figures });
    return figures;
  }
}

/** `, some held back by …` when reservations overlap the range, else nothing. */
function heldBack(range: RangeSpec, reserved: ReservedAddresses | undefined): string {
  const by = reserved === undefined ? [] : reserved.overlapping(range.family, range.first, range.last);
  return by.length === 0
    ? ''
    : `, some held back by ${by
        .slice(0, 3)
        .map((r) => ReservedAddresses.describe(r))
        .join(', ')}${by.length > 3 ? ` and ${by.length - 3} more reservations` : ''}`;
}
