/**
 * Giving back empty blocks: a block this node claimed and that has held no allocation for a grace
 * period loses its affinity, so a node that needs a block can claim it. Run periodically by the
 * agent's cluster upkeep.
 *
 * Guarantees: a block is given back with a compare-and-swap on the revision at which it was seen
 * empty, so an allocation that lands meanwhile keeps it; the give-back runs under the range pool's
 * lock, so it never races an allocation of this process in the same range; a failure for one block
 * is reported and the others are still tried. On a two-tier store, this node's claims its store
 * never recorded (the agent died between the cluster's claim and the local commit) are recorded as
 * its empty blocks first (Store.cluster.owners.adoptClaims), so they are given back after the grace too.
 */
import type { Clock } from '../core/clock.ts';
import { messageOf } from '../core/errors.ts';
import type { KeyedMutex } from '../core/keyed-mutex.ts';
import { isBlockKey, rangePoolOfKey } from '../ipam/blocks.ts';
import type { Store } from '../store/store.ts';
import type { OwnBlocks } from './own-blocks.ts';
import type { LedgerCache } from './ledger-cache.ts';

export interface BlockReturn {
  readonly returned: string[];
  readonly errors: string[];
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
  /** Own blocks seen empty, and since when (ms): the grace runs from the first empty sighting. */
  readonly #emptySince = new Map<string, number>();

  constructor(options: EmptyBlockGiveBackOptions) {
    this.#o = options;
  }

  /** Gives back this node's blocks that have been empty for `graceMs`; reports what it did. */
  async run(graceMs: number): Promise<BlockReturn> {
    const { store, clock, node, ledgers, own, locks } = this.#o;
    const returned: string[] = [];
    const errors: string[] = [];
    // How long a block has been empty is measured on the monotonic clock, never by two wall-clock readings.
    const now = clock.monotonic();
    // Claims of this node its store never recorded (a crash between the claim and the local commit)
    // become its empty blocks first, so their grace runs from here like any other's. Never throws:
    // a comparison that could not run says why in status, and the next run tries it again.
    await store.cluster?.owners.adoptClaims();
    const mine = (await store.ledgers()).filter((p) => p.affinity === node && isBlockKey(p.ledger));
    const seen = new Set<string>();
    for (const summary of mine) {
      seen.add(summary.ledger);
      if (summary.allocated > 0) {
        this.#emptySince.delete(summary.ledger);
        continue;
      }
      const since = this.#emptySince.get(summary.ledger);
      if (since === undefined) {
        this.#emptySince.set(summary.ledger, now);
        if (graceMs > 0) continue;
      } else if (now - since < graceMs) {
        continue;
      }
      const rangePool = rangePoolOfKey(summary.ledger);
      try {
        await locks.run(rangePool, async () => {
          const result = await store.commit(summary.ledger, summary.revision, [{ op: 'unclaim' }]);
          ledgers.forget(summary.ledger);
          if (result.kind === 'committed') {
            returned.push(summary.ledger);
            this.#emptySince.delete(summary.ledger);
            own.drop(rangePool, summary.ledger);
          }
        });
      } catch (error) {
        errors.push(`${summary.ledger}: ${messageOf(error)}`);
      }
    }
    // Blocks no longer ours (given back, forgotten) stop their grace.
    for (const key of this.#emptySince.keys()) if (!seen.has(key)) this.#emptySince.delete(key);
    return { returned, errors };
  }
}
