/**
 * The borrowing side of lending, on a two-tier store (store/tiered-store.ts): a node whose blocks
 * are full and that finds no free block hands out addresses other nodes lent it. Lent addresses live
 * in loan pools of its own store (loans.ts), so handing one out is a local commit like any other,
 * with no request to the cluster; only when no loan pool is free does it ask the owners (its
 * address request, store/cluster-tier.ts) and wait for their grants, on the injected clock.
 *
 * Guarantees:
 * - a grant is adopted into its loan pool by one local commit, at the revision it was read at; a
 *   grant that carries a holder (a migration: `warren migrate whereabouts`) is adopted as that
 *   holder's allocation, so the pod keeps its address and its release frees it like any other;
 * - a loan pool is used only while it is not marked given back (loan-return.ts); a grant of an
 *   address given back earlier takes the mark off again;
 * - the wait is bounded (`waitMs` on the clock): no grant in time answers 0, for the caller to
 *   report the range full (POOL_EXHAUSTED); a cluster that cannot be reached is TRY_AGAIN naming it;
 * - the caller holds the range pool's lock (allocator.ts): no two borrows of one range at once.
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { parseIP } from '../../ipam/address.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, ClusterTier, Grant } from '../../store/cluster-tier.ts';
import type { AdmissionGuard, PoolDescription, PoolOp, PoolSummary, Store } from '../../store/store.ts';
import type { AllocateRequest, Decision } from '../assignment.ts';
import type { PoolAssigner } from '../pool-assigner.ts';
import type { PoolCache } from '../pool-cache.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import { RETURNED_NETWORK, loanAddressOf, loanKey, loanSpan } from './loans.ts';

export interface BorrowerOptions {
  readonly store: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  readonly clock: Clock;
  readonly pools: PoolCache;
  readonly assigner: PoolAssigner;
  /**
   * How long an ADD waits for a grant after asking (default 15 s: longer than the lenders' upkeep
   * interval, 10 s by default, and well inside the plugin's 30 s wait for the agent).
   */
  readonly waitMs?: number;
  /** How often it looks at its request meanwhile (default 250 ms). */
  readonly pollMs?: number;
  /**
   * How many addresses to ask for in a range: the ADDs under way there, so a burst asks once and
   * a single ADD takes no more than it needs (what a node holds idle, no other node can use).
   */
  readonly demand: (pool: string) => number;
}

/** The range a loan pool belongs to, as much of it as adopting needs. */
export type LoanRange = Pick<RangeSpec, 'pool' | 'family'>;

export class Borrower {
  readonly #o: BorrowerOptions;

  constructor(options: BorrowerOptions) {
    this.#o = options;
  }

  /**
   * One round in a free loan pool of `range` (`summaries`: the store's pools of the range), or
   * undefined when no loan pool is free.
   */
  async fromLoans(
    range: RangeSpec,
    request: AllocateRequest,
    summaries: readonly PoolSummary[],
    guard?: AdmissionGuard,
  ): Promise<Decision | undefined> {
    for (const summary of summaries) {
      // A loan pool holds one address: any allocation in it (a pod's, or the given-back mark) fills it.
      if (summary.allocated > 0) continue;
      // With one-address blocks a key of one address is a block, never a loan (ipam/loan-key.ts).
      const address = isLoanKey(summary.pool, range.blockPrefix) ? loanAddressOf(range, summary.pool) : undefined;
      // A lender's config may span more of the range than this node's (range_start, range_end).
      if (address === undefined || address < range.first || address > range.last) continue;
      const decision = await this.#o.assigner.decide(loanSpan(range, address), range, request, undefined, guard);
      if (decision.kind !== 'full') return decision;
    }
    return undefined;
  }

  /**
   * Asks the owners of `range` for addresses and waits for grants: the number of loan pools adopted
   * (0 when none came within the wait). Grants already there and not yet adopted are adopted first,
   * without asking.
   */
  async borrow(range: RangeSpec): Promise<number> {
    const { tier, node, clock } = this.#o;
    const waitMs = this.#o.waitMs ?? 15_000;
    const pollMs = this.#o.pollMs ?? 250;
    const wanted = Math.max(1, this.#o.demand(range.pool));
    let request = await this.#reach(range, 'read its address request', () => tier.requestOf(range.pool, node));
    if (request !== undefined) {
      const adopted = await this.adopt(range, request);
      if (adopted > 0) return adopted;
    }
    if (request === undefined || request.wanted < wanted)
      request = await this.#reach(range, 'ask for addresses', () => tier.ask(range.pool, node, wanted));
    const deadline = clock.monotonic() + waitMs;
    while (clock.monotonic() < deadline) {
      await new Promise<void>((resolve) => clock.setTimer(Math.min(pollMs, deadline - clock.monotonic()), resolve));
      request = await this.#reach(range, 'read its address request', () => tier.requestOf(range.pool, node));
      if (request === undefined) continue;
      const adopted = await this.adopt(range, request);
      if (adopted > 0) return adopted;
    }
    return 0;
  }

  /**
   * Adopts every grant of `request` that has no loan pool in use here: the number adopted. A grant
   * whose commit met a change is left for the next look.
   */
  async adopt(range: LoanRange, request: AddressRequest): Promise<number> {
    let adopted = 0;
    for (const grant of request.grants) if (await this.#adoptOne(range, grant)) adopted += 1;
    return adopted;
  }

  async #adoptOne(range: LoanRange, grant: Grant): Promise<boolean> {
    const { store, pools, node } = this.#o;
    const ip = parseIP(grant.address);
    if (ip === undefined || ip.family !== range.family) return false;
    const key = loanKey(range.pool, range.family, ip.value);
    const read = await store.readPool(key);
    if (read.kind !== 'snapshot') return false;
    const ops: PoolOp[] = [];
    if (read.revision === 0) {
      // The description makes the loan pool exist (listed among the range's pools) even while free.
      ops.push({ op: 'describe', description: loanDescription(grant.address) });
      // A migrated address is its holder's from the start: recorded once, at adoption, so a holder
      // released since (its pod gone) is never recorded again while the grant is still there.
      if (grant.holder !== undefined)
        ops.push({ op: 'allocate', allocation: { ...grant.holder, pool: key, address: grant.address, node } });
    } else if (read.allocations.length > 0) {
      // In use, unless all it holds is the mark of an earlier give-back: granted again, it is taken off.
      const held = await store.list({ pool: key });
      const mark = held.find((a) => a.network === RETURNED_NETWORK);
      if (mark === undefined || held.length > 1) return false;
      ops.push({ op: 'release', address: mark.address });
    }
    if (ops.length === 0) return false;
    const result = await store.commit(key, read.revision, ops);
    pools.forget(key);
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

/** A loan pool's description for operators: one address (the subnet is the address's own). */
function loanDescription(address: string): PoolDescription {
  return { subnet: address, first: address, last: address, capacity: '1', cooldownSeconds: 0 };
}
