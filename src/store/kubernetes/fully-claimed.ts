/**
 * Whether a range is fully claimed, on the Kubernetes API (ClusterTier.fullyClaimed and
 * markFullyClaimed for kubernetes/tier.ts): an annotation on the range's WarrenRange,
 * `warren.dev/fully-claimed: <when it was found so>`, so that a node whose own blocks are full
 * learns that no block is free in one GET instead of listing every claim of the range (Calico's
 * search of a full pool reads every block).
 *
 * Guarantees:
 * - the mark is only a hint that saves a listing: it is written by a node whose listing found no
 *   free block (then the node lists once more, and takes the mark off if a block was freed in
 *   between, so a give-back racing the marking is never missed: whichever of the two came later sees
 *   the other), and taken off by every give-back (`unclaim`: kubernetes/tier.ts), after the claim's
 *   deletion;
 * - a mark older than MARK_TRUSTED_MS is not believed (a claim deleted by hand takes no mark off): the
 *   next node to look lists the range, and marks it again if it is still full;
 * - every write is a PUT at the resourceVersion read, retried a few times on a conflict; a range
 *   with no WarrenRange has no mark (and reads as not fully claimed).
 */
import type { Clock } from '../../core/clock.ts';
import { type KubeObject, metaOf } from './objects.ts';
import { rangeName } from './names.ts';
import type { Resource } from './resources.ts';

/** The annotation that marks a WarrenRange fully claimed, with the time (ISO 8601) it was found so. */
export const FULLY_CLAIMED_ANNOTATION = 'warren.dev/fully-claimed';
/** How long a mark is believed: a node looking after that lists the range again. */
export const MARK_TRUSTED_MS = 10 * 60_000;
/** PUTs tried against a WarrenRange that keeps changing before the mark is left as it is. */
const ROUNDS = 3;

export class FullyClaimedMarks {
  readonly #ranges: Resource;
  readonly #clock: Clock;

  constructor(ranges: Resource, clock: Clock) {
    this.#ranges = ranges;
    this.#clock = clock;
  }

  /** Whether range `pool` is marked fully claimed, by a mark young enough to believe (one GET). */
  async fullyClaimed(pool: string): Promise<boolean> {
    const since = markOf(await this.#ranges.get(`read whether range ${pool} is fully claimed`, rangeName(pool)));
    return since !== undefined && this.#clock.now() - since < MARK_TRUSTED_MS;
  }

  /** Marks range `pool` fully claimed (`full`, now) or takes the mark off; nothing when it already says so. */
  async mark(pool: string, full: boolean): Promise<void> {
    for (let round = 0; round < ROUNDS; round++) {
      const object = await this.#ranges.get(`read the mark of range ${pool}`, rangeName(pool));
      const meta = metaOf(object);
      if (meta === undefined) return;
      const since = markOf(object);
      if (!full && since === undefined) return;
      if (full && since !== undefined && this.#clock.now() - since < MARK_TRUSTED_MS / 2) return;
      const { [FULLY_CLAIMED_ANNOTATION]: _old, ...others } = meta.annotations ?? {};
      const annotations = full
        ? { ...others, [FULLY_CLAIMED_ANNOTATION]: new Date(this.#clock.now()).toISOString() }
        : others;
      const replaced = await this.#ranges.replace(`mark range ${pool} ${full ? '' : 'not '}fully claimed`, {
        ...(object as KubeObject),
        metadata: { ...(object as KubeObject).metadata, annotations },
      });
      if (replaced.kind !== 'conflict') return;
    }
  }
}

/** When the WarrenRange `object` was marked fully claimed (ms since the epoch), or undefined. */
function markOf(object: unknown): number | undefined {
  const text = metaOf(object)?.annotations?.[FULLY_CLAIMED_ANNOTATION];
  const at = text === undefined ? Number.NaN : Date.parse(text);
  return Number.isNaN(at) ? undefined : at;
}
