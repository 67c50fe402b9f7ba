/**
 * Lending addresses between the nodes of a range, on a two-tier store (store/tiered-store.ts,
 * Store.blockOwners): the parts wired for the allocator. Block placement (block-assigner.ts) uses
 * `fromLoans`, `borrow` and `migratedIn` on the ADD path; the agent's cluster upkeep calls `run`
 * periodically (allocator.ts `lend`).
 *
 * - borrower.ts: loan pools, asking the owners and waiting for grants, adopting them;
 * - lender.ts: answering other nodes' requests, placeholders, tidying orphans up;
 * - loan-return.ts: giving idle loans back;
 * - grant-policy.ts: how many addresses and which a lender lends;
 * - loans.ts: the records of a loan on both sides.
 *
 * Guarantee of the whole: an address is held by at most one node's store at a time, as handed out
 * or lendable: the lender holds a placeholder for as long as the grant exists (written before it,
 * released only after it is gone for a grace), and the borrower hands out only addresses whose grant
 * it adopted and stops (marks the loan given back) before removing the grant.
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { bitsOf, parseIP } from '../../ipam/address.ts';
import type { Block } from '../../ipam/blocks.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, ClusterTier } from '../../store/cluster-tier.ts';
import type { AdmissionGuard, PoolOp, Store } from '../../store/store.ts';
import type { AllocateRequest, Decision } from '../assignment.ts';
import type { PoolAssigner } from '../pool-assigner.ts';
import type { PoolCache } from '../pool-cache.ts';
import { Borrower } from './borrower.ts';
import { Lender } from './lender.ts';
import { LoanReturn } from './loan-return.ts';
import { MIGRATION_LENDER, placeholderOf } from './loans.ts';
import { blockKeyPrefix } from '../../ipam/blocks.ts';

export interface LendingOptions {
  readonly store: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  readonly clock: Clock;
  readonly pools: PoolCache;
  readonly assigner: PoolAssigner;
  readonly locks: KeyedMutex;
  /** The range as this node's configs define it, when it has served it (its exclusions). */
  readonly rangeOf: (pool: string) => RangeSpec | undefined;
  /** How long an ADD waits for grants (default 15 s, borrower.ts). */
  readonly waitMs?: number;
  /** ADDs under way in a range pool: how many addresses to ask for at once. */
  readonly demand: (pool: string) => number;
}

export interface LendingReport {
  readonly lent: string[];
  readonly released: string[];
  readonly returned: string[];
  readonly adopted: number;
  readonly errors: string[];
}

export class Lending {
  readonly #o: LendingOptions;
  readonly #borrower: Borrower;
  readonly #lender: Lender;
  readonly #return: LoanReturn;
  /**
   * The requests holding a migration's grants, as last read (each upkeep run reads them): a claim
   * looks here, so claiming a block costs no request more; read at the first claim after a start.
   */
  #migrated: readonly AddressRequest[] | undefined;

  constructor(options: LendingOptions) {
    this.#o = options;
    const { store, tier, node, clock, pools, assigner, locks, rangeOf, demand } = options;
    this.#borrower = new Borrower({
      store,
      tier,
      node,
      clock,
      pools,
      assigner,
      demand,
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
    });
    this.#lender = new Lender({ store, tier, node, clock, pools, locks, rangeOf });
    this.#return = new LoanReturn({ store, tier, node, clock, pools, locks });
  }

  /** One round in a free loan pool of `range` (a local read, no request), or undefined when none is free. */
  async fromLoans(range: RangeSpec, request: AllocateRequest, guard?: AdmissionGuard): Promise<Decision | undefined> {
    const summaries = await this.#o.store.pools(blockKeyPrefix(range.pool));
    return this.#borrower.fromLoans(range, request, summaries, guard);
  }

  /** No free block and no free loan: asks the owners; `conflict` (decide again) once a grant is adopted. */
  async borrow(range: RangeSpec): Promise<Decision> {
    // Blocks of one address are never lent (loans.ts): with every one claimed, the range is full here.
    if (range.blockPrefix >= bitsOf(range.family)) return { kind: 'full' };
    return (await this.#borrower.borrow(range)) > 0 ? { kind: 'conflict' } : { kind: 'full' };
  }

  /**
   * What claiming `block` must commit with the claim: a placeholder for every address a migration
   * recorded in it (grant lender `whereabouts`), so the claimer never hands one out; it takes over
   * as their lender (lender.ts keeps them while their grants stand). The grants as the last upkeep
   * run read them (a claim costs no request more); a grant written since is held by the next run
   * (lender.ts), which is why the migration records before the attachments switch to Warren.
   * TRY_AGAIN when they were never read and the cluster cannot be reached.
   */
  async migratedIn(range: RangeSpec, block: Block): Promise<PoolOp[]> {
    const { tier, clock } = this.#o;
    let requests = this.#migrated;
    if (requests === undefined) {
      try {
        requests = await this.#readMigrated();
      } catch (error) {
        throw new WarrenError(
          'TRY_AGAIN',
          `block ${block.key} cannot be claimed: the addresses migrated into it cannot be read from ` +
            `${tier.description}: ${messageOf(error)}`,
          { cause: error },
        );
      }
    }
    const ops: PoolOp[] = [];
    const now = momentOf(clock);
    for (const request of requests) {
      if (request.pool !== range.pool) continue;
      for (const grant of request.grants) {
        const ip = parseIP(grant.address);
        if (grant.lender !== MIGRATION_LENDER || ip === undefined || ip.family !== range.family) continue;
        if (ip.value < block.span.first || ip.value > block.span.last) continue;
        ops.push({
          op: 'allocate',
          allocation: placeholderOf(block.key, range.family, ip.value, request.node, now),
        });
      }
    }
    return ops;
  }

  /**
   * One round of lending's upkeep: adopts migrated addresses granted to this node, answers other
   * nodes' requests and tidies placeholders up (`orphanGraceMs`), gives back loans idle for
   * `returnGraceMs`.
   */
  async run(o: { readonly returnGraceMs: number; readonly orphanGraceMs: number }): Promise<LendingReport> {
    const errors: string[] = [];
    let migrated: readonly AddressRequest[] | undefined;
    try {
      migrated = await this.#readMigrated();
    } catch (error) {
      errors.push(`reading migrated addresses: ${messageOf(error)}`);
    }
    const adopted = migrated === undefined ? 0 : await this.#adoptMigrated(migrated, errors);
    const lending = await this.#lender.run(o.orphanGraceMs, migrated ?? []).catch((error: unknown) => {
      errors.push(`lending: ${messageOf(error)}`);
      return { lent: [], released: [], errors: [] };
    });
    const returning = await this.#return.run(o.returnGraceMs).catch((error: unknown) => {
      errors.push(`giving loans back: ${messageOf(error)}`);
      return { returned: [], errors: [] };
    });
    return {
      lent: lending.lent,
      released: lending.released,
      returned: returning.returned,
      adopted,
      errors: [...errors, ...lending.errors, ...returning.errors],
    };
  }

  async #readMigrated(): Promise<readonly AddressRequest[]> {
    this.#migrated = await this.#o.tier.requestsLentBy(MIGRATION_LENDER);
    return this.#migrated;
  }

  /** Records the addresses a migration granted this node as their holders' allocations. */
  async #adoptMigrated(requests: readonly AddressRequest[], errors: string[]): Promise<number> {
    const { node, locks } = this.#o;
    let adopted = 0;
    for (const request of requests) {
      const key = parsePoolKey(request.pool);
      if (request.node !== node || key === undefined) continue;
      const range = { pool: request.pool, family: key.family };
      try {
        adopted += await locks.run(request.pool, () => this.#borrower.adopt(range, request));
      } catch (error) {
        errors.push(`adopting migrated addresses of ${request.pool}: ${messageOf(error)}`);
      }
    }
    return adopted;
  }
}
