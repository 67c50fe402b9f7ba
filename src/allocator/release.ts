/**
 * The one release path. A release names what it covers with a selector (an owner's allocations,
 * or given addresses of a pool); the selector is asked once to find the ledgers involved, and
 * again inside each pool's lock and commit round, because between the first look and the commit an
 * address may have been released or allocated again. Each pool is released in its own commit.
 *
 * The cooldown applied is the caller's (from the network config, for a DEL or GC), or else the
 * pool's cooldown attribute (a journaled DEL or a runtime event has no config), or none. A rest is
 * recorded on both clocks (store.ts RestingAddress) and timed on the monotonic one, so a wall
 * clock stepped back or forward neither lengthens nor cuts it short.
 *
 * Guarantees: releasing what is not allocated is a no-op and returns []; what is returned was
 * released by this call; an allocation newer than the release's limits is never taken.
 */
import type { Clock } from '../core/clock.ts';
import { defined } from '../core/defined.ts';
import type { KeyedMutex } from '../core/keyed-mutex.ts';
import { parseIP } from '../ipam/address.ts';
import { type Allocation, createdMoment } from '../ipam/allocation.ts';
import { type Moment, atOrBefore, momentOf, shifted } from '../core/moment.ts';
import type { LedgerOp, Store } from '../store/store.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { LedgerCache } from './ledger-cache.ts';

/**
 * Which of an owner's allocations a release may take. An intent recorded at some instant (a
 * journaled DEL, a GC's list of valid attachments) speaks only for allocations made before it: the
 * same container and interface may have been ADDed again since, and that address is in use.
 */
export interface ReleaseLimits {
  /** Release only allocations made at or before this moment (ordered as core/moment.ts says). */
  readonly createdAtOrBefore?: Moment;
  /**
   * Release only allocations still recorded in this network namespace. A release decided because
   * a namespace is gone speaks for that namespace only: an owner ADDed again in another namespace
   * since (a container restarted without a DEL) is in use there. Checked in the commit round, so a
   * re-ADD that moved the record after the decision wins.
   */
  readonly netns?: string;
}

/**
 * Whether the limits let a release take `a`; `boot`: the boot running now; `here`: this node, on a
 * store several nodes share (allocation.ts createdMoment).
 */
export function within(a: Allocation, only: ReleaseLimits, boot: string | undefined, here?: string): boolean {
  return (
    (only.createdAtOrBefore === undefined || atOrBefore(createdMoment(a, here), only.createdAtOrBefore, boot)) &&
    (only.netns === undefined || a.netns === only.netns)
  );
}

/**
 * What a release covers: its allocations, read from the store now. Called with a ledger when
 * only that pool's are needed (the selector may narrow its query), without one to find the pools.
 */
export type ReleaseSelector = (pool?: string) => Promise<Allocation[]>;

export interface ReleaserOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly maxAttempts: number;
  readonly ledgers: LedgerCache;
  /** Shared with allocation: a pool's releases and allocations in this process run one at a time. */
  readonly locks: KeyedMutex;
}

export class Releaser {
  /** The store, the shared pool pictures and locks: a release updates the picture allocation uses. */
  readonly #o: ReleaserOptions;

  constructor(options: ReleaserOptions) {
    this.#o = options;
  }

  /** Releases everything `select` covers, pool by pool; returns what was released. */
  async release(select: ReleaseSelector, cooldownSeconds?: number): Promise<Allocation[]> {
    const pools = new Set((await select()).map((a) => a.pool));
    const released: Allocation[] = [];
    for (const pool of pools) released.push(...(await this.#releaseIn(pool, select, cooldownSeconds)));
    return released;
  }

  async #releaseIn(pool: string, select: ReleaseSelector, cooldownSeconds: number | undefined): Promise<Allocation[]> {
    return this.#o.locks.run(pool, () =>
      retryOnConflict({ subject: `pool ${pool}`, action: 'release' }, this.#o.maxAttempts, async () => {
        // Read again inside the lock: the first look may be stale (see the module header).
        const held = (await select(pool)).filter((a) => a.pool === pool);
        if (held.length === 0) return [];
        return (await this.#commit(
          pool,
          held.map((a) => a.address),
          cooldownSeconds,
        ))
          ? held
          : CONFLICT;
      }),
    );
  }

  /** One release commit inside the pool lock; false on a revision conflict. */
  async #commit(pool: string, addresses: readonly string[], cooldownSeconds: number | undefined): Promise<boolean> {
    const { store, clock, ledgers } = this.#o;
    const picture = await ledgers.load(pool);
    const seconds = cooldownSeconds ?? picture.cooldownSeconds ?? 0;
    const mono = clock.monotonic();
    const rest = seconds > 0 ? shifted(momentOf(clock), seconds * 1000) : undefined;
    const ops: LedgerOp[] = addresses.map((address) =>
      rest === undefined
        ? { op: 'release', address }
        : {
            op: 'release',
            address,
            reusableAt: rest.wall,
            ...defined({ reusableStamp: rest.stamp }),
          },
    );
    const result = await store.commit(pool, picture.revision, ops);
    if (result.kind === 'conflict') {
      ledgers.forget(pool);
      return false;
    }
    picture.revision = result.revision;
    for (const text of addresses) {
      const ip = parseIP(text);
      if (ip !== undefined)
        picture.state.markReleased(ip.value, rest === undefined ? undefined : mono + seconds * 1000, mono);
    }
    return true;
  }
}
