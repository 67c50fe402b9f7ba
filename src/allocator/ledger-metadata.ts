/**
 * Operator metadata of a ledger: its description (subnet, allocatable span, capacity and, for a
 * range split into blocks, the block size; read by `warren pools`) and its cooldown attribute (what
 * a release applies when its caller has no config, e.g. a journaled DEL or a runtime event).
 *
 * Written when a pool or block is first used, and again when the config using it changes: this
 * process remembers which span it described each pool from, and the pool's picture carries the
 * cooldown the store holds. An ADD compares a few numbers against those; it builds and writes a
 * description only when something differs. Two configs that disagree about one pool (another
 * range_end, another cooldown) each write theirs when they change; the last writer wins, as the
 * operator's most recent config should.
 */
import { defined } from '../core/defined.ts';
import { formatIP } from '../ipam/address.ts';
import { type RangeSpec, capacityOf } from '../ipam/range.ts';
import type { LedgerDescription, LedgerOp } from '../store/store.ts';

/** The description of `span` (a range, or one block of it) for operators. */
export function describeRange(
  span: RangeSpec,
  cooldownSeconds: number,
  blockPrefix?: number,
  largestBlockPrefix?: number,
): LedgerDescription {
  return {
    subnet: span.subnet,
    first: formatIP({ family: span.family, value: span.first }),
    last: formatIP({ family: span.family, value: span.last }),
    capacity: String(capacityOf(span)),
    cooldownSeconds,
    ...defined({ blockPrefix, largestBlockPrefix }),
  };
}

/** The ops that write a pool's metadata: its description and its cooldown attribute, together. */
export function metadataOps(
  span: RangeSpec,
  cooldownSeconds: number,
  blockPrefix?: number,
  largestBlockPrefix?: number,
): LedgerOp[] {
  return [
    { op: 'describe', description: describeRange(span, cooldownSeconds, blockPrefix, largestBlockPrefix) },
    { op: 'cooldown', seconds: cooldownSeconds },
  ];
}

export class LedgerMetadata {
  /**
   * Per ledger, the span this process last wrote its description from. Kept apart from the
   * pool pictures so that a conflict, which drops a picture, does not cause a rewrite.
   */
  readonly #describedFrom = new Map<string, RangeSpec>();

  /**
   * The ops an allocation from `span` adds to its commit: none when this process already described
   * the pool from the same span and the store's cooldown (`recordedCooldown`) is the config's.
   */
  opsFor(span: RangeSpec, cooldownSeconds: number, recordedCooldown: number | undefined): LedgerOp[] {
    const described = this.#describedFrom.get(span.pool);
    if (described !== undefined && recordedCooldown === cooldownSeconds && sameSpan(described, span)) return [];
    return metadataOps(span, cooldownSeconds);
  }

  /** Records that a commit wrote the metadata of `span.pool` from `span`. */
  written(span: RangeSpec): void {
    this.#describedFrom.set(span.pool, span);
  }
}

/** Whether two spans of one pool describe alike: same addresses allocatable, same exclusions. */
function sameSpan(a: RangeSpec, b: RangeSpec): boolean {
  if (a === b) return true;
  if (a.subnet !== b.subnet || a.first !== b.first || a.last !== b.last || a.excluded.length !== b.excluded.length)
    return false;
  return a.excluded.every(([from, to], i) => {
    const other = b.excluded[i] as readonly [bigint, bigint];
    return other[0] === from && other[1] === to;
  });
}
