/**
 * The claim watch and what follows from it: every agent keeps the claim cache current from the
 * list-watch of IPAMClaims, and a claim's deletion ends its holding — the address goes back to its
 * pool once no pod uses it any more (each pod's own release, as for any address).
 *
 * One agent ends each holding: the one whose node keeps the holding's placeholder (the node whose
 * block holds the address; allocator/holdings/), known from its own store with no API request.
 * The other agents see the same deletion and find nothing of theirs to do. (A dual-stack claim may
 * have its two addresses in blocks of two nodes: each ends the holding; ending one is idempotent.)
 *
 * Guarantees:
 * - a claim deleted (its DELETED event, while no newer claim of its name stands) ends its holding;
 *   before it is ended the API server is asked (one GET, on this rare path only) whether a claim of
 *   that name exists: a listing answered just before the claim was made never ends its holding;
 *   a claim only marked for deletion (KubeVirt's finalizer) keeps it until it is gone;
 * - deletions missed while this agent was away are found after each listing: the claim holdings
 *   this node keeps whose claim the listing does not hold; and every `sweepMs` the same look is
 *   taken against the watch's cache (no API request): a placeholder this node took over since (the
 *   block of a node gone came to it) or an end given up on is found within one sweep;
 * - nothing is judged before the first listing, nor from a listing that did not come;
 * - a failed end is retried with per-key backoff on the injected clock, `maxRetries` times, then
 *   found again after the next listing; a claim seen again meanwhile is not ended.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../../core/clock.ts';
import { defined } from '../../../core/defined.ts';
import { messageOf } from '../../../core/errors.ts';
import { PeriodicTask } from '../../../core/periodic-task.ts';
import { DEFAULT_MAX_RETRIES, RateLimitedQueue } from '../../../core/rate-limited-queue.ts';
import type { ListWatchItem } from '../../../sources/kubernetes/list-watch.ts';
import { type ClaimCache, type ClaimRef, claimHolderKey } from './claim-cache.ts';
import { claimOfHolding } from './claim-planner.ts';

/** What the upkeep needs of the holdings (allocator/holdings/), narrowed to it. */
export interface ClaimHoldings {
  /** Whether this node keeps a placeholder of holder `key`: it is the one to end the holding. */
  keeps(key: string): Promise<boolean>;
  /** The holder keys of claims (`ipamclaim/...`) whose placeholders this node keeps. */
  keptClaimKeys(): Promise<readonly string[]>;
  /** Ends holder `key`'s holding; answers the addresses it held. */
  endHolding(key: string): Promise<readonly { readonly address: string }[]>;
}

export interface ClaimUpkeepOptions {
  readonly cache: ClaimCache;
  /** Whether the API server has a claim of that name now (a GET, not the cache). */
  readonly exists: (ref: ClaimRef) => Promise<boolean>;
  readonly holdings: ClaimHoldings;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxRetries?: number;
  /** How often the holdings kept here are checked against the cache, ms. Default 5 minutes. */
  readonly sweepMs?: number;
  /** Told of each holding ended (its key and addresses): metrics, logs. */
  readonly onEnded?: (key: string, addresses: readonly string[]) => void;
}

const DEFAULT_SWEEP_MS = 5 * 60_000;

export interface ClaimUpkeepStats {
  /** Holdings ended by this agent since it started. */
  readonly ended: number;
  readonly pending: number;
  readonly lastError?: string;
}

export class ClaimUpkeep {
  readonly #o: ClaimUpkeepOptions;
  readonly #queue: RateLimitedQueue;
  #ended = 0;
  #lastError: string | undefined;

  constructor(options: ClaimUpkeepOptions) {
    this.#o = options;
    this.#queue = new RateLimitedQueue({ clock: options.clock });
  }

  /** Consumes the claim watch and ends the holdings of deleted claims until the signal aborts. */
  async run(items: AsyncIterable<ListWatchItem<unknown>>, signal: AbortSignal): Promise<void> {
    const sweep = new PeriodicTask({
      clock: this.#o.clock,
      intervalMs: this.#o.sweepMs ?? DEFAULT_SWEEP_MS,
      run: () => this.#sweep(),
    });
    sweep.start(signal);
    const worker = this.#queue.run((key) => this.#end(key), {
      signal,
      onError: (key, error) =>
        this.#o.logger.error({ holding: key, err: messageOf(error) }, 'ipamclaims: ending a holding failed'),
    });
    try {
      for await (const item of items) await this.#take(item);
    } finally {
      sweep.stop();
      this.#queue.shutDown();
      await worker;
    }
  }

  stats(): ClaimUpkeepStats {
    const q = this.#queue.stats();
    return {
      ended: this.#ended,
      pending: q.depth + q.delayed + q.processing,
      ...defined({ lastError: this.#lastError }),
    };
  }

  async #take(item: ListWatchItem<unknown>): Promise<void> {
    for (const gone of this.#o.cache.observe(item)) this.#queue.add(claimHolderKey(gone));
    if (item.kind === 'listed') await this.#sweep();
  }

  /** Queues the holdings kept here whose claim the cache does not hold (once it has listed). */
  async #sweep(): Promise<void> {
    if (!this.#o.cache.listed) return;
    try {
      for (const key of await this.#o.holdings.keptClaimKeys()) {
        const ref = claimOfHolding(key);
        if (ref !== undefined && this.#o.cache.peek(ref) === undefined) this.#queue.add(key);
      }
    } catch (error) {
      // The next listing looks again; the events in between still end what they delete.
      this.#lastError = messageOf(error);
      this.#o.logger.warn({ err: this.#lastError }, 'ipamclaims: could not read the claim holdings of this node');
    }
  }

  async #end(key: string): Promise<void> {
    const ref = claimOfHolding(key);
    // Back (made again under its name) since: its holding goes on.
    if (ref === undefined || this.#o.cache.peek(ref) !== undefined) return this.#queue.forget(key);
    try {
      if (!(await this.#o.holdings.keeps(key)) || (await this.#o.exists(ref))) return this.#queue.forget(key);
      const addresses = (await this.#o.holdings.endHolding(key)).map((h) => h.address);
      this.#queue.forget(key);
      this.#ended += 1;
      this.#o.logger.info({ holding: key, addresses }, 'ipamclaims: claim deleted; its addresses are no longer held');
      this.#o.onEnded?.(key, addresses);
    } catch (error) {
      this.#lastError = messageOf(error);
      if (this.#queue.retries(key) < (this.#o.maxRetries ?? DEFAULT_MAX_RETRIES)) {
        this.#queue.addRateLimited(key);
        return;
      }
      this.#queue.forget(key);
      this.#o.logger.warn(
        { holding: key, err: this.#lastError },
        'ipamclaims: gave up ending a deleted claim holding for now; the next listing finds it again',
      );
    }
  }
}
