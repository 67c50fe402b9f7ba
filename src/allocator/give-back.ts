/**
 * Giving back empty blocks: a block this node claimed and that has held no allocation of its own
 * for a grace period (none, or only placeholders of addresses it lent: lending/loans.ts) loses its
 * affinity once it is empty, so a node that needs a block can claim it. Run periodically by the
 * agent's cluster upkeep (`run`), and at once for another node that asks for room (`forRequest`,
 * lending/lender.ts): an empty block no larger than what it asks for is given back without
 * waiting for the grace, so a block that cannot be lent (one address: its loan's key would be the
 * block's) or that the asker would fill anyway serves it instead of standing idle (issue 36: a /27
 * shared by two nodes refused an ADD for 307 s while the other node had just freed an address).
 *
 * Guarantees: a block is given back with a compare-and-swap on the revision at which it was seen
 * empty, so an allocation that lands meanwhile keeps it; the give-back runs under the range pool's
 * lock, so it never races an allocation of this process in the same range; a failure for one block
 * is reported and the others are still tried; a block given back for a request holds no allocation
 * and no address still resting (its cooldown is kept: a rest ends before another node may take the
 * address). On a two-tier store, this node's claims its store never recorded (the agent died between
 * the cluster's claim and the local commit, or a restore of the cluster's data brought them back) are
 * given back first, unused (Store.cluster.owners.settleClaims: the file check, once per start).
 */
import type { Clock } from '../core/clock.ts';
import { messageOf } from '../core/errors.ts';
import type { KeyedMutex } from '../core/keyed-mutex.ts';
import { blockKeyPrefix, isBlockKey, rangePoolOfKey } from '../ipam/blocks.ts';
import type { LedgerSummary, Store } from '../store/store.ts';
import { LENT_NETWORK } from './lending/loans.ts';
import type { OwnBlocks } from './own-blocks.ts';
import { type LedgerCache, restEnd } from './ledger-cache.ts';

export interface BlockReturn {
  readonly returned: string[];
  readonly errors: string[];
}

/** What `forRequest` gave back: the blocks, and how many addresses they hold in all. */
export interface RoomGiven {
  readonly returned: string[];
  readonly addresses: number;
}

export interface EmptyBlockGiveBackOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly node: string;
  readonly ledgers: LedgerCache;
  readonly own: OwnBlocks;
  /** Shared with allocation (see the module header). */
  readonly locks: KeyedMutex;
}

export class EmptyBlockGiveBack {
  /** The store and the shared state a give-back must keep true (pictures, own blocks, locks). */
  readonly #o: EmptyBlockGiveBackOptions;
  /** Own blocks seen unused (empty, or holding only addresses lent out), and since when (ms). */
  readonly #emptySince = new Map<string, number>();

  constructor(options: EmptyBlockGiveBackOptions) {
    this.#o = options;
  }

  /** Gives back this node's blocks that have been empty for `graceMs`; reports what it did. */
  async run(graceMs: number): Promise<BlockReturn> {
    const { store, clock, node, locks } = this.#o;
    const returned: string[] = [];
    const errors: string[] = [];
    // How long a block has been empty is measured on the monotonic clock, never by two wall-clock readings.
    const now = clock.monotonic();
    // Claims of this node its store never recorded (a crash between the claim and the local commit)
    // are given back first, unused. Never throws: a comparison that could not run says why in
    // status, and the next run tries it again.
    await store.cluster?.owners.settleClaims();
    const mine = (await store.ledgers()).filter((p) => p.affinity === node && isBlockKey(p.ledger));
    const seen = new Set<string>();
    for (const summary of mine) {
      seen.add(summary.ledger);
      // Unused by this node: nothing but addresses lent out. The grace runs from then; the block
      // goes back only once those are back too (empty).
      const unused =
        summary.allocated === 0 ||
        (await store.list({ ledger: summary.ledger, network: LENT_NETWORK })).length === summary.allocated;
      if (!unused) {
        this.#emptySince.delete(summary.ledger);
        continue;
      }
      const since = this.#emptySince.get(summary.ledger);
      if (since === undefined) {
        this.#emptySince.set(summary.ledger, now);
        if (graceMs > 0) continue;
      } else if (now - since < graceMs || summary.allocated > 0) {
        continue;
      }
      try {
        if (await locks.run(rangePoolOfKey(summary.ledger), () => this.#unclaim(summary)))
          returned.push(summary.ledger);
      } catch (error) {
        errors.push(`${summary.ledger}: ${messageOf(error)}`);
      }
    }
    // Blocks no longer ours (given back, forgotten) stop their grace; one offered to another node
    // (lending/handover.ts) keeps it, so an offer taken back does not start the grace again.
    const offered = new Set(store.cluster?.handover?.offered().map((c) => c.key));
    for (const key of this.#emptySince.keys()) if (!seen.has(key) && !offered.has(key)) this.#emptySince.delete(key);
    return { returned, errors };
  }

  /**
   * Gives back at once, for another node asking for `wanted` addresses of range `rangePool`, this
   * node's empty blocks of it that hold no more than what is still wanted (a one-address block
   * always), fewest addresses first; under the range pool's lock, each at the revision read empty.
   */
  async forRequest(rangePool: string, wanted: number): Promise<RoomGiven> {
    const { store, clock, node, ledgers, locks } = this.#o;
    return locks.run(rangePool, async () => {
      const returned: string[] = [];
      let addresses = 0;
      const empty = (await store.ledgers(blockKeyPrefix(rangePool)))
        .filter((p) => p.affinity === node && p.allocated === 0 && rangePoolOfKey(p.ledger) === rangePool)
        .map((p) => ({ summary: p, size: Number(p.description?.capacity ?? Number.NaN) }))
        .filter((b) => b.size > 0)
        .sort((a, b) => a.size - b.size);
      for (const { summary, size } of empty) {
        if (addresses + size > Math.max(1, wanted)) break;
        if (summary.resting > 0) {
          // A rest still running keeps the block: its address is not to be handed out yet, here or there.
          ledgers.forget(summary.ledger);
          const read = await store.readLedger(summary.ledger);
          const now = clock.monotonic();
          if (read.kind !== 'snapshot' || read.resting.some((r) => restEnd(r, clock) > now)) continue;
        }
        if (await this.#unclaim(summary)) {
          returned.push(summary.ledger);
          addresses += size;
        }
      }
      return { returned, addresses };
    });
  }

  /** Gives `summary`'s block back at the revision it was seen empty; whether it was. Under the range's lock. */
  async #unclaim(summary: LedgerSummary): Promise<boolean> {
    const { store, ledgers, own } = this.#o;
    const result = await store.commit(summary.ledger, summary.revision, [{ op: 'unclaim' }]);
    ledgers.forget(summary.ledger);
    if (result.kind !== 'committed') return false;
    this.#emptySince.delete(summary.ledger);
    own.drop(rangePoolOfKey(summary.ledger), summary.ledger);
    return true;
  }
}
