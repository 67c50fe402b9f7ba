/**
 * The watches of the etcd tier (tier.ts: `ClusterTier.watchClaims`, `watchSpaces`, and the keys
 * membership follows), each made of EtcdKeyWatch (key-watch.ts: read once, then watched from the
 * revision reached, read again only when etcd compacted it), seen through the contract's
 * `ClusterWatch`:
 * - a node's claims: the node's index, nodes-blocks/<node>/, and beside it one watch of each claim
 *   key it names, blocks/<range>/<block>, from the revision of the index key (the claim's own
 *   transaction wrote both), so what it reads and is sent grows with that node's blocks, never with
 *   a range: a claim key deleted by hand (its index key stays) is told by its own watch; a block
 *   given back leaves the index, and its claim's watch ends. All of them share the namespace's one
 *   gRPC stream;
 * - a node's publications: its index again, and beside it one watch of the publication key of each
 *   block it names, published/<range>/<block>, from the revision of the index key (the publication
 *   is written after the claim), each told to `onGone` when that key is deleted, and whenever its copy
 *   is whole again without it (read again after a compaction: a publication written and deleted while
 *   its put had not reached the copy yet is gone all the same); a block given back leaves the index,
 *   and its publication's watch ends;
 * - the address spaces: every admission, spaces/ (a handful of keys, written only when a range is
 *   admitted), one watch however many spaces the node uses;
 * - one key (`one`): the store's identity, this node's announcement and the recovery marker, which
 *   membership follows (membership.ts) instead of reading them at every renewal.
 * Each is told to `onChange` listeners at every change it applies and each time it is synced
 * again (a change made and undone while cut shows no change, yet must be judged). `seen` answers
 * undefined while any of its watches is not synced (reading, opening, resumed but not
 * verified, backing off, closed): the reader then asks etcd. A watch resumed after a cut counts again
 * only once the store was checked (`verify`: its identity record read, once for every watch resumed
 * meanwhile), since a wiped or restored etcd accepts a resumed watch and says nothing.
 */
import type { Namespace } from 'etcd3';
import type { Clock } from '../../core/clock.ts';
import type { BlockClaim, ClaimsSeen, ClusterWatch, PublicationsWatch, SpacesSeen } from '../tiered/cluster-tier.ts';
import { EtcdKeyWatch } from './key-watch.ts';
import { type TierKv, blockRecord, claimOfValue, lastSegment, nodeIndexOf, publishedRecord, spacesOf } from './kv.ts';

export interface EtcdTierWatchesParts {
  readonly ns: Namespace;
  readonly kv: TierKv;
  readonly clock: Clock;
  /** Checks the store is still the one known (its identity record); a halt is no failure here. */
  readonly verify: () => Promise<void>;
  /** Told each revision a watch's answer carried (the continuity floor). */
  readonly observe: (revision: number) => void;
}

export class EtcdTierWatches {
  readonly #p: EtcdTierWatchesParts;
  readonly #open = new Set<EtcdKeyWatch>();
  /** The check of the store under way, shared by every watch resumed meanwhile. */
  #verifying: Promise<void> | undefined;

  constructor(parts: EtcdTierWatchesParts) {
    this.#p = parts;
  }

  /** A watch of `key` (or of the keys under it), started; closed with the tier. */
  watch(what: string, key: string, prefix: boolean, from?: number): EtcdKeyWatch {
    const { ns, kv, clock, observe } = this.#p;
    const watch = new EtcdKeyWatch({
      ns,
      kv,
      what,
      key,
      prefix,
      clock,
      observe,
      verify: () => this.#verify(),
      ...(from === undefined ? {} : { from }),
    });
    this.#open.add(watch);
    watch.start();
    return watch;
  }

  /** Ends a watch this made. */
  end(watch: EtcdKeyWatch): void {
    watch.close();
    this.#open.delete(watch);
  }

  #verify(): Promise<void> {
    this.#verifying ??= this.#p.verify().finally(() => {
      this.#verifying = undefined;
    });
    return this.#verifying;
  }

  /**
   * `node`'s index (the blocks it holds) and, beside it, one watch of `recordOf(block)` for each block it
   * names, from the revision of the index key (the transaction that put a block there wrote its claim
   * too, and its publication comes after). `opened` is told of each such watch, `removed` of each block
   * that left the index (its watch ended); `close` ends them all.
   */
  #perBlock(
    node: string,
    what: string,
    recordOf: (block: string) => string,
    hooks: { opened: (block: string, watch: EtcdKeyWatch) => void; removed?: () => void },
  ): { index: EtcdKeyWatch; watches: ReadonlyMap<string, EtcdKeyWatch>; close: () => void } {
    const watches = new Map<string, EtcdKeyWatch>();
    const index = this.watch(`the ${what}s index of node ${node}`, nodeIndexOf(node), true);
    const stopIndex = index.listen((change) => {
      const block = lastSegment(change.key);
      const held = watches.get(block);
      if (change.type === 'put' && held === undefined) {
        const watch = this.watch(
          `the ${what} of block ${block}`,
          recordOf(block),
          false,
          Number(change.kv.mod_revision),
        );
        hooks.opened(block, watch);
        watches.set(block, watch);
      } else if (change.type === 'delete' && held !== undefined) {
        this.end(held);
        watches.delete(block);
        hooks.removed?.();
      }
    });
    const close = (): void => {
      stopIndex();
      for (const watch of watches.values()) this.end(watch);
      watches.clear();
      this.end(index);
    };
    return { index, watches, close };
  }

  /** Watches `node`'s claims: its index, and each claim key it names. */
  claims(node: string): ClusterWatch<ClaimsSeen> {
    const listeners = new Set<() => void>();
    const changed = (): void => {
      for (const listener of [...listeners]) {
        try {
          listener();
        } catch {
          // A listener's failure is its own.
        }
      }
    };
    const synced = () => kept.index.synced && [...kept.watches.values()].every((w) => w.synced);
    // Synced again as a whole: told once, when the last of its watches is.
    const resynced = () => (synced() ? changed() : undefined);
    const kept = this.#perBlock(node, 'claim', blockRecord, {
      opened: (_block, watch) => {
        watch.listen(changed);
        watch.whenSynced(resynced);
      },
      removed: changed,
    });
    const stopSynced = kept.index.whenSynced(resynced);
    return {
      seen: () => {
        if (!synced()) return undefined;
        const seen: BlockClaim[] = [];
        for (const [block, watch] of kept.watches) {
          const kv = watch.get(blockRecord(block));
          const claim =
            kv === undefined ? undefined : claimOfValue(block, kv.value, kv.create_revision, kv.mod_revision);
          if (claim?.node === node) seen.push(claim);
        }
        return { claims: seen, version: kept.index.revision };
      },
      onChange: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close: () => {
        stopSynced();
        listeners.clear();
        kept.close();
      },
    };
  }

  /** Watches `node`'s publications: its index, and the publication key of each block it names. */
  publications(node: string): PublicationsWatch {
    const listeners = new Set<(key: string) => void>();
    const gone = (block: string): void => {
      for (const listener of [...listeners]) {
        try {
          listener(block);
        } catch {
          // A listener's failure is its own.
        }
      }
    };
    const { close } = this.#perBlock(node, 'publication', publishedRecord, {
      opened: (block, watch) => {
        watch.listen((c) => (c.type === 'delete' ? gone(block) : undefined));
        // Whole again without it (read after a compaction): gone too. Its put may never have reached the copy
        // (still on its way when the watch was cut), so its deletion is no change of the copy's.
        watch.whenSynced(() => (watch.get(publishedRecord(block)) === undefined ? gone(block) : undefined));
      },
    });
    return {
      onGone: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close: () => {
        listeners.clear();
        close();
      },
    };
  }

  /** Watches every admission of every address space. */
  spaces(): ClusterWatch<SpacesSeen> {
    const watch = this.watch('the address spaces', 'spaces/', true);
    return {
      seen: () =>
        watch.synced
          ? {
              admitted: (space) => {
                const prefix = spacesOf(space);
                const ranges = watch
                  .values()
                  .map((kv) => kv.key.toString('utf8'))
                  .filter((key) => key.startsWith(prefix))
                  .map(lastSegment);
                return { ranges, version: watch.revision };
              },
            }
          : undefined,
      onChange: (listener) => {
        const stops = [watch.listen(() => listener()), watch.whenSynced(listener)];
        return () => {
          for (const stop of stops) stop();
        };
      },
      close: () => this.end(watch),
    };
  }

  close(): void {
    for (const watch of this.#open) watch.close();
    this.#open.clear();
  }
}
