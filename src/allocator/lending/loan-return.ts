/**
 * Giving lent addresses back: a loan ledger (loans.ts) that has held no allocation for a grace is
 * marked given back in this node's store, then its grant is flagged given back in this node's
 * request (Grant.returned), so its lender takes it back and releases the placeholder at once
 * (lender.ts `takeBack`) and can use the address again. Run periodically
 * (allocator.ts `lend`). In a range another node asks for addresses of (an open request), an idle
 * loan goes back without waiting for the grace (issue 36: a free address out of reach of the asker
 * for the whole 300 s grace was a refusal while the range had room).
 *
 * Guarantees:
 * - the mark is committed at the revision at which the pool was read empty, under the range pool's
 *   lock, before the grant is flagged: no ADD of this node can take the address after (an
 *   allocation that landed first keeps the loan), nor a grant take the mark off before it is
 *   GIVEN_BACK_GRACE_MS old (borrower.ts: a copy of the request lagging behind may still show the
 *   grant unflagged while its lender lets go of the address);
 * - a rest that is over counts as empty (rests end only when a pick passes them, and nothing picks
 *   in an idle loan ledger); one still running keeps the loan;
 * - a flag that lost (the request changed) is tried again on the next run; a failure for one
 *   loan is reported and the others are still tried.
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { formatIP } from '../../ipam/address.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { ClusterRecords, Grant } from '../../store/cluster.ts';
import type { LedgerOp, Store } from '../../store/store.ts';
import { type LedgerCache, restEnd } from '../ledger-cache.ts';
import { MIGRATION_LENDER, RETURNED_NETWORK, loanAddressOf, loanLedgers, returnedMarkOf } from './loans.ts';
import type { RangeSpec } from '../../ipam/range.ts';

export interface LoanReturnOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  readonly locks: KeyedMutex;
  /** The range as this node's configs define it, when it has served it (its block size). */
  readonly rangeOf: (pool: string) => RangeSpec | undefined;
}

export interface LoansReturned {
  readonly returned: string[];
  /** The range pools this node holds idle loans of, still to go back (their open requests are worth a watch). */
  readonly idleIn: string[];
  readonly errors: string[];
}

export class LoanReturn {
  readonly #o: LoanReturnOptions;
  /** Loan ledgers seen idle, and since when (monotonic ms). */
  readonly #idleSince = new Map<string, number>();
  /** Loans marked given back whose grant is still to be removed, by range pool. */
  readonly #pending = new Map<string, Set<string>>();
  /**
   * Whether the marks already in the store were looked at: once per process, so a removal a crash
   * interrupted (marked, grant still there) is finished after a restart.
   */
  #recovered = false;

  constructor(options: LoanReturnOptions) {
    this.#o = options;
  }

  /**
   * Gives back loans idle for `graceMs`, at once in a range another node asks for addresses of
   * (`asked`): an idle loan is of no use here, and its lender can lend it to the asker.
   */
  async run(graceMs: number, asked: (pool: string) => boolean = () => false): Promise<LoansReturned> {
    const { store, clock } = this.#o;
    const returned: string[] = [];
    const errors: string[] = [];
    const now = clock.monotonic();
    const seen = new Set<string>();
    const idleIn = new Set<string>();
    if (!this.#recovered) {
      for (const mark of await store.list({ network: RETURNED_NETWORK }))
        this.#addPending(rangePoolOfKey(mark.pool), mark.address);
      this.#recovered = true;
    }
    // With one-address blocks, a key of one address is a block (this node's, or one whose claim
    // vanished), never a loan (ipam/loan-key.ts): loanLedgers tells them apart by the block size.
    for (const summary of loanLedgers(await store.ledgers(), this.#o.rangeOf)) {
      if (summary.allocated > 0 || summary.affinity !== undefined) continue;
      const range = rangeOfLoan(summary.ledger);
      if (range === undefined) continue;
      seen.add(summary.ledger);
      const since = this.#idleSince.get(summary.ledger);
      if (since === undefined) this.#idleSince.set(summary.ledger, now);
      if ((since ?? now) + (asked(range.pool) ? 0 : graceMs) > now) {
        idleIn.add(range.pool);
        continue;
      }
      try {
        const address = await this.#mark(summary.ledger);
        if (address !== undefined) {
          this.#idleSince.delete(summary.ledger);
          this.#addPending(range.pool, address);
        }
      } catch (error) {
        errors.push(`${summary.ledger}: ${messageOf(error)}`);
      }
    }
    for (const key of this.#idleSince.keys()) if (!seen.has(key)) this.#idleSince.delete(key);
    for (const [pool, addresses] of this.#pending) {
      try {
        returned.push(...(await this.flagPending(pool)));
      } catch (error) {
        errors.push(`giving back ${[...addresses].join(', ')} of ${pool}: ${messageOf(error)}`);
      }
    }
    return { returned, idleIn: [...idleIn], errors };
  }

  /**
   * Flags the grants of this node's loans of `pool` marked given back and not flagged yet (`run`
   * does too; lending calls this as its request changes, for a flag whose write lost). What it flagged.
   */
  async flagPending(pool: string): Promise<string[]> {
    const pending = this.#pending.get(pool);
    const addresses = [...(pending ?? [])];
    if (pending === undefined || !(await this.#flagGrants(pool, new Set(addresses)))) return [];
    for (const address of addresses) pending.delete(address); // marked meanwhile: left for the next call
    if (pending.size === 0) this.#pending.delete(pool);
    return addresses;
  }

  #addPending(pool: string, address: string): void {
    const pending = this.#pending.get(pool) ?? new Set<string>();
    pending.add(address);
    this.#pending.set(pool, pending);
  }

  /** Marks the loan ledger given back if it is still idle: the address, or undefined when it is not. */
  async #mark(key: string): Promise<string | undefined> {
    const { store, ledgers, locks, clock, node } = this.#o;
    return locks.run(rangePoolOfKey(key), async () => {
      ledgers.forget(key);
      const read = await store.readLedger(key);
      if (read.kind !== 'snapshot' || read.allocations.length > 0) return undefined;
      const mono = clock.monotonic();
      if (read.resting.some((r) => restEnd(r, clock) > mono)) return undefined;
      const range = rangeOfLoan(key);
      const value = range === undefined ? undefined : loanAddressOf(range, key);
      if (range === undefined || value === undefined) return undefined;
      const address = formatIP({ family: range.family, value });
      const ops: LedgerOp[] = read.resting.map((r) => ({ op: 'unrest', address: r.address }));
      ops.push({ op: 'allocate', allocation: returnedMarkOf(key, address, node, momentOf(clock)) });
      const result = await store.commit(key, read.revision, ops);
      return result.kind === 'committed' ? address : undefined;
    });
  }

  /**
   * Flags given back, in this node's request, the grants of `addresses` whose loan ledger still
   * carries the mark (a grant of the address since took it off: that loan is in use again). Under the range
   * pool's lock, so no borrow takes a mark off between the look and the removal. False when the
   * write lost.
   */
  async #flagGrants(pool: string, addresses: ReadonlySet<string>): Promise<boolean> {
    const { tier, node, store, locks } = this.#o;
    return locks.run(pool, async () => {
      const marked = new Set(
        (await store.list({ rangePool: pool, network: RETURNED_NETWORK }))
          .filter((a) => addresses.has(a.address))
          .map((a) => a.address),
      );
      const request = await tier.requestOf(pool, node);
      const ending = (g: Grant) => marked.has(g.address) && g.returned !== true;
      if (request === undefined || !request.grants.some(ending)) return true;
      // A node's grant is flagged given back, for its lender to take back at once (lender.ts
      // `takeBack`); a migration's, which no node takes back, is removed.
      const grants = request.grants.flatMap((g) =>
        !ending(g) ? [g] : g.lender === MIGRATION_LENDER ? [] : [{ ...g, returned: true as const }],
      );
      return (await tier.updateRequest(request, grants, request.wanted)) !== undefined;
    });
  }
}

/** The range pool and family of a loan ledger key, or undefined when `key` is no loan ledger. */
function rangeOfLoan(key: string): { pool: string; family: 4 | 6 } | undefined {
  const pool = rangePoolOfKey(key);
  const parsed = parsePoolKey(pool);
  if (parsed === undefined) return undefined;
  const range = { pool, family: parsed.family };
  return loanAddressOf(range, key) === undefined ? undefined : range;
}
