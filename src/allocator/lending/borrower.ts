/**
 * The borrowing side of lending, on a two-tier store (store/tiered/store.ts): a node whose blocks
 * are full and that finds no free block hands out addresses other nodes lent it. Lent addresses live
 * in loan ledgers of its own store (loans.ts), so handing one out is a local commit like any other,
 * with no request to the cluster; only when no loan ledger is free does it ask the owners (its
 * address request, store/tiered/cluster-tier.ts) and wait for their grants, on the injected clock.
 *
 * Guarantees:
 * - a grant is adopted into its loan ledger by one local commit, at the revision it was read at; a
 *   grant that carries a holder (a migration: `warren migrate whereabouts`) is adopted as that
 *   holder's allocation, so the pod keeps its address and its release frees it like any other;
 * - a loan ledger is used only while it is not marked given back (loan-return.ts); a grant of an
 *   address given back earlier takes the mark off again once the mark is GIVEN_BACK_GRACE_MS old,
 *   and a grant flagged given back (Grant.returned), or offered with its whole block (Grant.offered:
 *   handover.ts takes the block), is never adopted;
 * - the wait ends as soon as the request is answered: a grant to adopt, or `wanted` lower than this
 *   node asked (an owner gave an empty block back for it, give-back.ts `forRequest`, which block
 *   placement then claims; the only answer in a range of one-address blocks, which lend nothing);
 * - the wait is bounded (`waitMs` on the clock): at its end the caller decides once more (a block
 *   freed without the request saying so, by a lender stopped between its two writes or by the
 *   grace, is claimed then), and a wait begun after it answers false, for the caller to report the
 *   range full (POOL_EXHAUSTED); a cluster that cannot be reached is TRY_AGAIN naming it;
 * - a request no ADD waits on any more is withdrawn (`withdraw`: by lending's upkeep, and as the
 *   last ADD of the range gives up, lending.ts): nothing more wanted, grants never adopted marked
 *   and flagged given back, so lenders take the addresses back at once for an ask that is over;
 * - asking and adopting run under the range pool's lock (allocator.ts): no two borrows of one range
 *   at once; the wait for grants runs outside it (reads only), so a lending round adopting grants of
 *   the range is not held up by an ADD waiting there.
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { momentOf } from '../../core/moment.ts';
import { bitsOf, parseIP } from '../../ipam/address.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import type { AddressRequest, ClusterRecords, Grant } from '../../store/cluster.ts';
import type { AdmissionGuard, LedgerDescription, LedgerOp, LedgerSummary, Store } from '../../store/store.ts';
import type { AllocateRequest, Decision } from '../assignment.ts';
import type { LedgerAssigner } from '../ledger-assigner.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import { RETURNED_NETWORK, loanAddressOf, loanKey, loanSpan, returnedMarkOf } from './loans.ts';
import { GIVEN_BACK_GRACE_MS } from './lender.ts';
import { isMigrated } from './migrated.ts';

export interface BorrowerOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  readonly assigner: LedgerAssigner;
  /**
   * How long an ADD waits for a grant after asking (default 15 s: longer than the lenders' upkeep
   * interval, 10 s by default, and well inside the plugin's 30 s wait for the agent).
   */
  readonly waitMs?: number;
  /**
   * How often it looks at its request meanwhile (default 250 ms; WATCHED_POLL_MS while a watch of
   * the requests tells it of changes, `hint`, so the look is only what a lost hint falls back on).
   */
  readonly pollMs?: number;
  /**
   * How many addresses to ask for in a range: the ADDs under way there, so a burst asks once and
   * a single ADD takes no more than it needs (what a node holds idle, no other node can use).
   */
  readonly demand: (pool: string) => number;
}

/** The range a loan ledger belongs to, as much of it as adopting needs. */
export type LoanRange = Pick<RangeSpec, 'pool' | 'family'>;

/** How often a wait looks at its request while hints come (a missed one costs at most this). */
export const WATCHED_POLL_MS = 2_000;

export class Borrower {
  readonly #o: BorrowerOptions;
  /** Whether hints of this node's requests come (a watch, prompt-lending.ts). */
  #watched = false;
  /** This node's requests as last hinted, by range pool, with a count of hints (each looked at once a wait). */
  readonly #hinted = new Map<string, { request: AddressRequest; seq: number }>();
  /** Waits under way, by range pool: each woken by a hint of its range's request. */
  readonly #waiting = new Map<string, Set<() => void>>();
  /** What this node's request of each range pool wanted when it last asked: less since is an answer. */
  readonly #asked = new Map<string, number>();

  constructor(options: BorrowerOptions) {
    this.#o = options;
  }

  /**
   * One round in a free loan ledger of `range` (`summaries`: the store's pools of the range), or
   * undefined when no loan ledger is free.
   */
  async fromLoans(
    range: RangeSpec,
    request: AllocateRequest,
    summaries: readonly LedgerSummary[],
    guard?: AdmissionGuard,
  ): Promise<Decision | undefined> {
    for (const summary of summaries) {
      // A loan ledger holds one address: any allocation in it (a pod's, or the given-back mark) fills it.
      if (summary.allocated > 0) continue;
      // With one-address blocks a key of one address is a block, never a loan (ipam/loan-key.ts).
      const address = isLoanKey(summary.ledger, range.blockPrefix) ? loanAddressOf(range, summary.ledger) : undefined;
      // A lender's config may span more of the range than this node's (range_start, range_end).
      if (address === undefined || address < range.first || address > range.last) continue;
      const decision = await this.#o.assigner.decide(loanSpan(range, address), range, request, undefined, guard);
      if (decision.kind !== 'full') return decision;
    }
    return undefined;
  }

  /**
   * Asks the owners of `range` for addresses: the number of loan ledgers adopted now (grants already
   * there and not yet adopted are adopted first, without asking); 0 when the caller must wait for
   * grants (`waitForGrants`, outside the range pool's lock).
   */
  async ask(range: RangeSpec): Promise<number> {
    const { tier, node } = this.#o;
    const wanted = Math.max(1, this.#o.demand(range.pool));
    const request = await this.#reach(range, 'read its address request', () => tier.requestOf(range.pool, node));
    // Where blocks are one address, a loan's key would be a block's: nothing is lent, so nothing adopted.
    if (request !== undefined && lendsIn(range)) {
      const adopted = await this.adopt(range, request);
      if (adopted > 0) return adopted;
    }
    const asked =
      request === undefined || request.wanted < wanted
        ? await this.#reach(range, 'ask for addresses', () => tier.ask(range.pool, node, wanted))
        : request;
    this.#asked.set(range.pool, asked.wanted);
    return 0;
  }

  /** From now on, hints of this node's requests come (`hint`): waits look at the cluster less often. */
  watched(on: boolean): void {
    this.#watched = on;
    if (!on) this.#hinted.clear();
  }

  /** A request of this node as a watch told it: waits of its range look at it at once. */
  hint(request: AddressRequest): void {
    if (request.node !== this.#o.node) return;
    this.#hinted.set(request.pool, { request, seq: (this.#hinted.get(request.pool)?.seq ?? 0) + 1 });
    for (const wake of this.#waiting.get(request.pool) ?? []) wake();
  }

  /**
   * Waits until the request of `range` holds a grant not adopted here: true then (the caller takes
   * the range pool's lock again and adopts it), false when none came by `waitMs` on the clock after
   * `since` (one ADD's waits share that deadline). While hints come (`hint`), each is looked at as it
   * comes (local reads) and the cluster is read only every WATCHED_POLL_MS, for a hint lost.
   * Reads only: it holds no lock, so lending rounds (adopting, lending) and other ADDs go on meanwhile.
   */
  async waitForGrants(range: RangeSpec, since: number = this.#o.clock.monotonic()): Promise<boolean> {
    const { tier, node, clock } = this.#o;
    const waitMs = this.#o.waitMs ?? 15_000;
    const deadline = since + waitMs;
    if (clock.monotonic() >= deadline) return false;
    let looked = 0; // the last hint this wait looked at: each once (one that came before it too)
    while (clock.monotonic() < deadline) {
      const told = this.#hinted.get(range.pool);
      if (told !== undefined && told.seq > looked) {
        looked = told.seq;
        if (await this.#answered(range, told.request)) return true;
      }
      const pollMs = this.#o.pollMs ?? (this.#watched ? WATCHED_POLL_MS : 250);
      const woken = await this.#nap(range.pool, Math.min(pollMs, deadline - clock.monotonic()));
      if (woken) continue; // the hint is looked at first thing
      const request = await this.#reach(range, 'read its address request', () => tier.requestOf(range.pool, node));
      if (request !== undefined && (await this.#answered(range, request))) return true;
    }
    // Decide once more before the ADD is refused: a block freed without the request saying so.
    return true;
  }

  /** Whether `request` answers this node's ask: a grant to adopt, or less wanted than it asked. */
  async #answered(range: RangeSpec, request: AddressRequest): Promise<boolean> {
    if (request.wanted < (this.#asked.get(range.pool) ?? 0)) return true;
    if (!lendsIn(range)) return false;
    for (const grant of request.grants) if (await this.#adoptable(range, grant)) return true;
    return false;
  }

  /** Sleeps `ms` on the clock, or until a hint of `pool`'s request: whether a hint woke it. */
  #nap(pool: string, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const waits = this.#waiting.get(pool) ?? new Set<() => void>();
      this.#waiting.set(pool, waits);
      const end = (woken: boolean) => {
        cancel();
        waits.delete(wake);
        if (waits.size === 0) this.#waiting.delete(pool);
        resolve(woken);
      };
      const wake = () => end(true);
      const cancel = this.#o.clock.setTimer(ms, () => end(false));
      waits.add(wake);
    });
  }

  /**
   * Adopts every grant of `request` that has no loan ledger in use here: the number adopted. A grant
   * whose commit met a change is left for the next look. Migrated grants (with a holder) are left
   * to the lending round (migrated.ts), which knows where their pod's allocation belongs.
   */
  async adopt(range: LoanRange, request: AddressRequest): Promise<number> {
    let adopted = 0;
    for (const grant of request.grants)
      if (!isMigrated(grant) && !ended(grant) && (await this.#adoptOne(range, grant))) adopted += 1;
    return adopted;
  }

  /**
   * Withdraws `request` when no ADD of this node waits in its range: grants never adopted are
   * flagged given back (their lenders take the addresses back at once, take-back.ts) and nothing
   * more is wanted, so an ask whose ADDs were served otherwise (a block given back, claimed) or gave
   * up strands nothing. The caller holds the range pool's lock (adopting takes it too): no grant
   * flagged here was adopted. How many grants it flagged or removed; undefined when it left the
   * request as it was.
   */
  async withdraw(range: LoanRange, request: AddressRequest): Promise<number | undefined> {
    if ((this.#waiting.get(range.pool)?.size ?? 0) > 0) return undefined;
    const ending = new Map<Grant, 'flag' | 'remove'>();
    for (const grant of request.grants) {
      const what = isMigrated(grant) || grant.returned === true ? 'keep' : await this.#withdrawn(range, grant);
      if (what !== 'keep') ending.set(grant, what);
    }
    if (ending.size === 0 && request.wanted === 0) return undefined;
    const grants = request.grants.flatMap((g) => {
      const what = ending.get(g);
      return what === undefined ? [g] : what === 'remove' ? [] : [{ ...g, returned: true as const }];
    });
    const written = await this.#o.tier.updateRequest(request, grants, 0);
    return written === undefined ? undefined : ending.size;
  }

  /**
   * What withdrawing does with `grant`: `flag` when it is not adopted here and its loan ledger
   * carries a young mark (written now if the ledger never was: a lagging copy of the request
   * showing the grant unflagged cannot have it adopted, `#markTakenOff`), `remove` when the ledger
   * holds only an older mark (its lender keeps the placeholder for its grace), `keep` when it is
   * adopted (an idle loan adopted goes back by loan-return.ts only, mark first).
   */
  async #withdrawn(range: LoanRange, grant: Grant): Promise<'flag' | 'remove' | 'keep'> {
    const { store, ledgers, node, clock } = this.#o;
    const ip = parseIP(grant.address);
    if (ip === undefined || ip.family !== range.family) return 'keep';
    const key = loanKey(range.pool, range.family, ip.value);
    const read = await store.readLedger(key);
    if (read.kind !== 'snapshot') return 'keep';
    if (read.revision === 0) {
      const mark = returnedMarkOf(key, grant.address, node, momentOf(clock));
      const describe: LedgerOp = { op: 'describe', description: loanDescription(grant.address) };
      const result = await store.commit(key, 0, [describe, { op: 'allocate', allocation: mark }]);
      ledgers.forget(key);
      return result.kind === 'committed' ? 'flag' : 'keep';
    }
    const held = await store.list({ ledger: key });
    if (held.length !== 1 || held[0]?.network !== RETURNED_NETWORK) return 'keep';
    return this.#markTakenOff(held[0]) ? 'remove' : 'flag';
  }

  /** Adopts the migrated `grant` into its loan ledger, as its holder's allocation: whether it was. */
  adoptMigrated(range: LoanRange, grant: Grant): Promise<boolean> {
    return this.#adoptOne(range, grant);
  }

  /** Whether `grant` is a loan this node could adopt now (its loan ledger unused, or only marked given back). */
  async #adoptable(range: LoanRange, grant: Grant): Promise<boolean> {
    const ip = parseIP(grant.address);
    if (isMigrated(grant) || ended(grant) || ip === undefined || ip.family !== range.family) return false;
    const key = loanKey(range.pool, range.family, ip.value);
    const read = await this.#o.store.readLedger(key);
    if (read.kind !== 'snapshot') return false;
    if (read.revision === 0 || read.allocations.length === 0) return true;
    const held = await this.#o.store.list({ ledger: key });
    return held.length === 1 && this.#markTakenOff(held[0]);
  }

  /**
   * Whether a grant may take `mark` (a give-back's, loans.ts) off its loan ledger: once it is
   * GIVEN_BACK_GRACE_MS old. A younger one may be of a grant flagged given back that a copy of the
   * request lagging behind still shows unflagged, whose lender may have let go of the address.
   */
  #markTakenOff(mark: Allocation | undefined): boolean {
    return mark?.network === RETURNED_NETWORK && this.#o.clock.now() - mark.createdAt >= GIVEN_BACK_GRACE_MS;
  }

  async #adoptOne(range: LoanRange, grant: Grant): Promise<boolean> {
    const { store, ledgers, node } = this.#o;
    const ip = parseIP(grant.address);
    if (ip === undefined || ip.family !== range.family) return false;
    const key = loanKey(range.pool, range.family, ip.value);
    const read = await store.readLedger(key);
    if (read.kind !== 'snapshot') return false;
    const ops: LedgerOp[] = [];
    if (read.revision === 0) {
      // The description makes the loan ledger exist (listed among the range's pools) even while free.
      ops.push({ op: 'describe', description: loanDescription(grant.address) });
      // A migrated address is its holder's from the start: recorded once, at adoption, so a holder
      // released since (its pod gone) is never recorded again while the grant is still there.
      if (grant.holder !== undefined)
        ops.push({ op: 'allocate', allocation: { ...grant.holder, pool: key, address: grant.address, node } });
    } else if (read.allocations.length > 0) {
      // In use, unless all it holds is the mark of an earlier give-back: granted again, it is taken off.
      const held = await store.list({ ledger: key });
      const mark = held.find((a) => a.network === RETURNED_NETWORK);
      if (mark === undefined || held.length > 1 || !this.#markTakenOff(mark)) return false;
      ops.push({ op: 'release', address: mark.address });
    }
    if (ops.length === 0) return false;
    const result = await store.commit(key, read.revision, ops);
    ledgers.forget(key);
    return result.kind === 'committed';
  }

  /** Runs a request to the cluster; a failure is TRY_AGAIN naming the cluster (the API server). */
  async #reach<T>(range: RangeSpec, what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new WarrenError(
        'TRY_AGAIN',
        `pool ${range.pool} has no free address on node ${this.#o.node}, and the node could not ${what} of ` +
          `the other nodes through ${this.#o.tier.description}: ${messageOf(error)}`,
        { cause: error },
      );
    }
  }
}

/** Whether `grant` is no loan to adopt: given back, or of a block offered whole to this node (handover.ts). */
function ended(grant: Grant): boolean {
  return grant.returned === true || grant.offered === true;
}

/** Whether addresses of `range` can be lent: its blocks are larger than one address (loans.ts). */
function lendsIn(range: RangeSpec): boolean {
  return range.blockPrefix < bitsOf(range.family);
}

/** A loan ledger's description for operators: one address (the subnet is the address's own). */
function loanDescription(address: string): LedgerDescription {
  return { subnet: address, first: address, last: address, capacity: '1', cooldownSeconds: 0 };
}
