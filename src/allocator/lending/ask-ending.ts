/**
 * What this node lets go of as its asks end (issue 36): its address request of a range withdrawn
 * once no ADD waits on it (borrower.ts `withdraw`: grants it did not adopt flagged given back,
 * nothing more wanted), and its idle loans of a range given back while another node asks there
 * (loan-return.ts). Lending (lending.ts) calls it as the last ADD of a range ends (`settled`), as
 * another node's ask is told (`asked`), as the last ADD gives up (`withdraw`) and on its upkeep
 * round (`withdrawIdle`, `idleLoansIn`).
 *
 * Guarantees:
 * - a request is withdrawn under the range pool's lock; as an ADD ends, only while no other ADD is
 *   under way in the range (one begun since asks again, and its wait is not cut short);
 * - a request is read from the watch of this node's own requests as the ADD ends: ending an ADD
 *   costs the cluster no read, and a write only when the request still wants or holds something;
 * - one give-back pass at a time; an ask told during one runs another after it, so none is lost
 *   to the upkeep round;
 * - a grant flagged given back that its lender did not take back within FLAGGED_KEPT_MS (an agent
 *   older than the flag, in a rolling upgrade, or one down) is removed by this node's upkeep round,
 *   so mixed versions never leak an address: the old protocol's lender lets go of a removed grant's
 *   placeholder after its grace.
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { AddressRequest, Grant } from '../../store/cluster.ts';
import type { Borrower, LoanRange } from './borrower.ts';
import type { LoanReturn } from './loan-return.ts';
import { isMigrated } from './migrated.ts';
import type { WatchedRequests } from './watched-requests.ts';

/**
 * How long a grant flagged given back stands before this node removes it itself: its lender, told,
 * takes it back at once (take-back.ts); one that does not is older than the flag, or down.
 */
export const FLAGGED_KEPT_MS = 60_000;

/** Told what failed. */
type Report = (lent: readonly string[], errors: readonly string[]) => void;

export interface AskEndingOptions {
  readonly requests: WatchedRequests;
  readonly borrower: Borrower;
  readonly loanReturn: LoanReturn;
  readonly node: string;
  readonly locks: KeyedMutex;
  readonly clock: Clock;
  /** ADDs under way in a range pool (0 when none). */
  readonly underWay: (pool: string) => number;
}

export class AskEnding {
  readonly #o: AskEndingOptions;
  /** Range pools this node held idle loans of at the last round (lending.ts sets it). */
  idleLoansIn: readonly string[] = [];
  /** Whether a give-back pass is under way. */
  #givingBack = false;
  /** Range pools asked in during the pass under way: each given back again after it. */
  readonly #again = new Set<string>();
  /** Grants flagged given back in this node's requests, and since when (monotonic ms; `#removeStale`). */
  readonly #flaggedSince = new Map<string, number>();
  /** Range pools an ADD of this process asked in: their request is this process's to withdraw as it changes. */
  readonly #askedIn = new Set<string>();

  constructor(options: AskEndingOptions) {
    this.#o = options;
  }

  /** An ADD of this process asked in range `pool` (borrower.ts `ask`). */
  asking(pool: string): void {
    this.#askedIn.add(pool);
  }

  /**
   * Another node asks in `pool`: this node's idle loans there go back, unless its own ADDs are under
   * way (where it held idle loans at the last round, or asked: loans may have gone idle since).
   */
  asked(pool: string, report: Report): void {
    if (this.idleLoansIn.includes(pool) || this.#askedIn.has(pool)) this.#giveBackIdle(pool, report);
  }

  /** The last ADD of range `pool` here ended: the ask withdrawn, then idle loans given back if asked elsewhere. */
  settled(pool: string, report: Report): void {
    this.changed(pool, report).then(() => {
      if (this.#o.requests.askedElsewhere(pool)) this.#giveBackIdle(pool, report);
    });
  }

  /**
   * This node's request of `pool` changed (or its last ADD there ended): withdrawn while no ADD is
   * under way in the range, so a grant written after the ADDs ended, or a withdrawal whose write
   * lost, goes back as the watch tells it rather than at the upkeep round. Only in a range an ADD
   * of this process asked in (a request left by an earlier process is the upkeep round's).
   */
  async changed(pool: string, report: Report): Promise<void> {
    if (!this.#askedIn.has(pool)) return;
    const request = this.#o.requests.ownRequests()?.find((r) => r.pool === pool);
    const key = parsePoolKey(pool);
    if (request === undefined || key === undefined || !withdrawable(request) || this.#o.underWay(pool) > 0) return;
    await this.withdraw({ pool, family: key.family }, true).catch((error: unknown) => {
      report([], [`withdrawing the address request of ${pool}: ${messageOf(error)}`]);
    });
  }

  /** Gives back at once this node's idle loans of `pool` (one pass at a time; see the header). */
  #giveBackIdle(pool: string, report: Report): void {
    if (this.#o.underWay(pool) > 0) return;
    if (this.#givingBack) {
      this.#again.add(pool);
      return;
    }
    this.#givingBack = true;
    this.#o.loanReturn
      .run(Number.POSITIVE_INFINITY, (p) => p === pool)
      .then((r) => report([], r.errors))
      .catch((error: unknown) => report([], [`giving loans of ${pool} back: ${messageOf(error)}`]))
      .finally(() => {
        this.#givingBack = false;
        const next = this.#again.values().next();
        if (next.done === true) return;
        this.#again.delete(next.value);
        this.#giveBackIdle(next.value, report);
      });
  }

  /**
   * Withdraws this node's request of `range` (borrower.ts `withdraw`), under the range pool's lock;
   * `idle`: only while no ADD is under way in the range (one begun since the caller looked asks again).
   */
  async withdraw(range: LoanRange, idle = false): Promise<void> {
    await this.#o.locks.run(range.pool, async () => {
      if (idle && this.#o.underWay(range.pool) > 0) return;
      const request = await this.#o.requests.requestOf(range.pool, this.#o.node);
      if (request !== undefined) await this.#o.borrower.withdraw(range, request);
    });
  }

  /**
   * Withdraws this node's requests no ADD waits on (borrower.ts `withdraw`), as the watch has them;
   * first removes the grants flagged given back that stood FLAGGED_KEPT_MS (`#removeStale`).
   */
  async withdrawIdle(errors: string[]): Promise<void> {
    const own = this.#o.requests.ownRequests() ?? [];
    const flagged = new Set(own.flatMap((r) => r.grants.filter((g) => g.returned === true).map((g) => flagKey(r, g))));
    for (const key of this.#flaggedSince.keys()) if (!flagged.has(key)) this.#flaggedSince.delete(key);
    for (const request of own) {
      const key = parsePoolKey(request.pool);
      if (key === undefined || !withdrawable(request)) continue;
      const range = { pool: request.pool, family: key.family };
      try {
        if (await this.#removeStale(request)) continue; // the request changed: withdrawn next time
        await this.#o.locks.run(request.pool, () => this.#o.borrower.withdraw(range, request));
      } catch (error) {
        errors.push(`withdrawing the address request of ${request.pool}: ${messageOf(error)}`);
      }
    }
  }

  /**
   * Removes from `request` its grants flagged given back that have stood FLAGGED_KEPT_MS since this
   * process first saw them flagged: their lender did not take them back (an agent older than the
   * flag, or one down). Its placeholder then goes as a grant gone does (lender.ts: 30 s after it sees
   * it gone); the loan ledger here keeps its mark, so the address is never adopted on a copy lagging
   * behind. Whether it wrote.
   */
  async #removeStale(request: AddressRequest): Promise<boolean> {
    const now = this.#o.clock.monotonic();
    const stale = new Set<Grant>();
    for (const grant of request.grants) {
      if (grant.returned !== true) continue;
      const since = this.#flaggedSince.get(flagKey(request, grant)) ?? now;
      this.#flaggedSince.set(flagKey(request, grant), since);
      if (now - since >= FLAGGED_KEPT_MS) stale.add(grant);
    }
    if (stale.size === 0) return false;
    const kept = request.grants.filter((g) => !stale.has(g));
    return (await this.#o.requests.updateRequest(request, kept, request.wanted)) !== undefined;
  }
}

/** The key of a flagged grant in `request`, for how long it has stood. */
function flagKey(request: AddressRequest, grant: Grant): string {
  return `${request.pool} ${grant.address} ${grant.lender}`;
}

/** Whether withdrawing `request` may change it: something still wanted, or a grant a node lent. */
function withdrawable(request: AddressRequest): boolean {
  return request.wanted > 0 || request.grants.some((g) => !isMigrated(g));
}
