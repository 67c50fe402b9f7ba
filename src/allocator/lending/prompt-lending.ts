/**
 * Lending on the requests as they change, not only on the upkeep's timer: on the watches of the
 * requests this node needs (watched-requests.ts: the open requests of the ranges it holds blocks
 * of, its own), a lender answers another node's open request as its watch event comes, and a
 * borrower waiting for grants looks at its request as it changes (borrower.ts `hint`).
 * Before, a node with no room polled its request every 250 ms and waited for a lender's next
 * upkeep run (10 s): a burst that had to ask ran at 10 ADD/s (issue 26).
 *
 * Guarantees:
 * - only hints are acted on here; the upkeep's lending round (lender.ts `run`) still reads the open
 *   requests (from the same watch's copy, which misses no change: a listing again after 410), so
 *   a hint whose answer failed costs time, never an answer;
 * - an answer is written as the lender's round writes it (placeholder first, the grant guarded by
 *   the version told), so answering on a hint is as safe as on the round, and a request changed
 *   since is left;
 * - API traffic is bounded by the requests' changes: one answer at a time per range, the requests
 *   told meanwhile answered together after it; each answer waits a random moment (0 to JITTER_MS),
 *   so that of the lenders told one request, the first to grant tells the others (its write is a
 *   change too) and they drop it rather than all writing and all but one losing;
 * - a loan its borrower flagged given back is taken back as told (take-back.ts), and what that
 *   frees is lent to the range's open requests at once; another node asking tells the borrowing
 *   side (`asked`), which gives its idle loans of that range back (loan-return.ts);
 * - stops when `signal` aborts: no answer starts after, the tier is no longer listened to.
 */
import type { Clock } from '../../core/clock.ts';
import type { AddressRequest, RequestChange } from '../../store/cluster.ts';
import type { Borrower } from './borrower.ts';
import type { Lender } from './lender.ts';
import type { WatchedRequests } from './watched-requests.ts';

/** Longest random wait before answering a request told (see the header). */
export const JITTER_MS = 40;

export interface PromptLendingOptions {
  /** The requests, watched while this runs (watched-requests.ts). */
  readonly requests: WatchedRequests;
  readonly node: string;
  readonly clock: Clock;
  readonly lender: Lender;
  readonly borrower: Borrower;
  /** Told what an answer lent, and what failed. */
  readonly report: (lent: readonly string[], errors: readonly string[]) => void;
  /** Told that another node asks for addresses of a range (its idle loans there go back: loan-return.ts). */
  readonly asked?: (pool: string) => void;
  /** Told that this node's request of a range changed (a loan given back whose flag lost is flagged again). */
  readonly changed?: (pool: string) => void;
  /** The random moment before an answer, ms (tests: 0). */
  readonly jitter?: () => number;
}

export class PromptLending {
  readonly #o: PromptLendingOptions;
  /** Other nodes' open requests told and not yet answered, by range pool then node. */
  readonly #told = new Map<string, Map<string, AddressRequest>>();
  /** Ranges with an answer waiting or under way. */
  readonly #busy = new Set<string>();
  #stopped = false;

  constructor(options: PromptLendingOptions) {
    this.#o = options;
  }

  /** Listens to the watches until `signal` aborts; false when it already has (timers alone). */
  start(signal: AbortSignal): boolean {
    const { requests, borrower } = this.#o;
    if (!requests.open(signal, (change) => this.#hint(change))) return false;
    borrower.watched(true);
    signal.addEventListener(
      'abort',
      () => {
        this.#stopped = true;
        borrower.watched(false);
        this.#told.clear();
      },
      { once: true },
    );
    return true;
  }

  #hint({ request, gone }: RequestChange): void {
    if (this.#stopped) return;
    if (request.node === this.#o.node) {
      if (!gone) this.#o.borrower.hint(request);
      if (!gone) this.#o.changed?.(request.pool);
      return;
    }
    // A loan of this node's given back: taken back at once, and what it frees lent to who asks.
    if (!gone && request.grants.some((g) => g.returned === true && g.lender === this.#o.node)) this.#takeBack(request);
    // Another node asks: an idle loan of this node's in the range is of more use there.
    if (!gone && request.wanted > 0) this.#o.asked?.(request.pool);
    const told = this.#told.get(request.pool) ?? new Map<string, AddressRequest>();
    // The latest word on a request: answered elsewhere (nothing wanted, or no longer open) means nothing to do here.
    if (request.wanted > 0 && !gone) told.set(request.node, request);
    else told.delete(request.node);
    if (told.size === 0) {
      this.#told.delete(request.pool);
      return;
    }
    this.#told.set(request.pool, told);
    this.#schedule(request.pool);
  }

  #takeBack(request: AddressRequest): void {
    const { lender, requests, report } = this.#o;
    const answer = async () => {
      if ((await lender.takeBack([request])).length === 0 || this.#stopped) return;
      const { lent, errors } = await lender.answer(await requests.openRequests(request.pool));
      report(lent, errors);
    };
    answer().catch((error: unknown) => report([], [`taking back loans given back in ${request.pool}: ${error}`]));
  }

  #schedule(pool: string): void {
    if (this.#busy.has(pool)) return;
    this.#busy.add(pool);
    const wait = Math.max(0, this.#o.jitter?.() ?? Math.random() * JITTER_MS);
    this.#o.clock.setTimer(wait, () => {
      this.#answer(pool).catch((error: unknown) => this.#o.report([], [`answering requests of ${pool}: ${error}`]));
    });
  }

  async #answer(pool: string): Promise<void> {
    const told = this.#told.get(pool);
    this.#told.delete(pool);
    try {
      if (told !== undefined && !this.#stopped) {
        const { lent, errors } = await this.#o.lender.answer([...told.values()]);
        this.#o.report(lent, errors);
      }
    } finally {
      this.#busy.delete(pool);
      // Told more while answering: those are answered next.
      if (this.#told.has(pool) && !this.#stopped) this.#schedule(pool);
    }
  }
}
