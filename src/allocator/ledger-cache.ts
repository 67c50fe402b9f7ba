/**
 * The allocator's picture of each ledger it has touched: the revision it read or wrote, the
 * engine's state (ipam/ledger-state.ts, its rests timed on the monotonic clock: restEnd) and the
 * pool's cooldown attribute. A picture is either
 * revalidated against the store before use (cheap: the store answers `unchanged` when the revision
 * is the same) or, where the caller's commit checks the revision anyway, trusted as it is. Whoever
 * meets a conflict forgets the picture, so the next use reads the pool again.
 *
 * Pictures are updated in place by the caller after its own commit; callers hold the pool's lock
 * (see Allocator) so no two of them update one picture at once.
 */
import type { Clock } from '../core/clock.ts';
import { momentOf, msBetween } from '../core/moment.ts';
import { parseIP } from '../ipam/address.ts';
import { LedgerState } from '../ipam/ledger-state.ts';
import type { LedgerSnapshot, RestingAddress, Revision, Store } from '../store/store.ts';

export interface LedgerPicture {
  revision: Revision;
  readonly state: LedgerState;
  /** The pool's cooldown attribute as last read or written; undefined when never set. */
  cooldownSeconds: number | undefined;
}

export class LedgerCache {
  /** Read to fill and revalidate pictures; this cache never writes. */
  readonly #store: Store;
  /** Pools as last read or written, by ledger key. */
  readonly #pictures = new Map<string, LedgerPicture>();
  /** Rests are timed on its monotonic clock (restEnd). */
  readonly #clock: Clock;

  constructor(store: Store, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  /** The pool's picture: the cached one if `trust`, else revalidated against the store. */
  async load(pool: string, trust = false): Promise<LedgerPicture> {
    const cached = this.#pictures.get(pool);
    if (trust && cached !== undefined) return cached;
    const read = await this.#store.readLedger(pool, cached?.revision);
    if (read.kind === 'unchanged' && cached !== undefined) return cached;
    if (read.kind === 'unchanged') throw new Error(`store answered unchanged for uncached pool ${pool}`);
    const fresh: LedgerPicture = {
      revision: read.revision,
      state: stateFrom(read, this.#clock),
      cooldownSeconds: read.cooldownSeconds,
    };
    this.#pictures.set(pool, fresh);
    return fresh;
  }

  /** Drops a picture that may be stale (a conflict, a write that did not go through this cache). */
  forget(pool: string): void {
    this.#pictures.delete(pool);
  }
}

/**
 * When a rest ends on this process's monotonic clock, the timeline of PoolState's rests: a rest
 * recorded in this boot ends at its stamp; one from another boot (or an older Warren) ends as far
 * from now as its wall-clock end is, which is all that can be known of it.
 */
export function restEnd(r: RestingAddress, clock: Clock): number {
  const mono = clock.monotonic();
  return (
    mono +
    msBetween(
      momentOf(clock),
      r.reusableStamp === undefined ? { wall: r.reusableAt } : { wall: r.reusableAt, stamp: r.reusableStamp },
    )
  );
}

function stateFrom(snapshot: LedgerSnapshot, clock: Clock): LedgerState {
  const state = new LedgerState();
  for (const text of snapshot.allocations) {
    const ip = parseIP(text);
    if (ip !== undefined) state.occupied.add(ip.value);
  }
  for (const r of snapshot.resting) {
    const ip = parseIP(r.address);
    // A rest that is already over is dropped at the next allocation (expireRests).
    if (ip !== undefined) state.markReleased(ip.value, restEnd(r, clock), Number.NEGATIVE_INFINITY);
  }
  if (snapshot.cursor !== undefined) state.cursor = parseIP(snapshot.cursor)?.value;
  return state;
}
