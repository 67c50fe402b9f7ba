/**
 * Lending addresses between the nodes of a range, on a two-tier store (store/tiered/store.ts,
 * Store.cluster): the parts wired for the allocator. Block placement (block-assigner.ts) uses
 * `fromLoans`, `borrow` and `migratedIn` on the ADD path; the agent's cluster upkeep calls `run`
 * periodically (allocator.ts `lend`) and `promptly` once, to lend as requests change
 * (allocator.ts `lendPromptly`). While `promptly` runs, the rounds read the requests from its
 * watches (watched-requests.ts): an idle node's rounds make no request to the cluster.
 *
 * - borrower.ts: loan ledgers, asking the owners and waiting for grants, adopting them;
 * - lender.ts: answering other nodes' requests (empty blocks given back at once, then loans),
 *   placeholders, tidying orphans up;
 * - prompt-lending.ts: both answered as the tier tells of changed requests, not only on the timer;
 * - watched-requests.ts: the requests the rounds read, from watches of what this node needs;
 * - loan-return.ts: giving idle loans back;
 * - handover.ts: a block holding only loans of one node handed over to it, taken over as offered;
 * - ask-ending.ts: an ask withdrawn as its last ADD ends or gives up, idle loans given back as asked;
 * - loan-check.ts: writing back the grant of a loan in use that someone else removed;
 * - migrated.ts: the addresses a migration recorded, adopted or held in a block claimed;
 * - grant-policy.ts: how many addresses and which a lender lends;
 * - loans.ts: the records of a loan on both sides.
 *
 * Guarantee of the whole: an address is held by at most one node's store at a time, as handed out
 * or lendable: the lender holds a placeholder for as long as the grant exists (written before it;
 * released after the grant is gone for a grace, or at once once the borrower flagged it given back,
 * take-back.ts), and the borrower hands out only addresses whose grant it adopted and marks a loan
 * given back before it flags or removes its grant.
 *
 * Every address usable (issue 36): an owner asked gives back its empty blocks no larger than what
 * is wanted at once (give-back.ts `forRequest`), then lends from the rest, whatever the block size;
 * the asker's wait ends on the answer and it claims or adopts. A loan goes back as soon as it is
 * idle while another node asks in its range, and an ask as its last ADD ends or gives up; what is
 * given back is taken back at once, or removed by the borrower after FLAGGED_KEPT_MS
 * (ask-ending.ts). A free address is out of reach of a node that asks only while it is
 * resting after its release, held by a placeholder whose grant went unexplained (a grace), or in a
 * block whose owner cannot be reached, or does not use it but lends from it to two or more nodes
 * (kept whole; one lent to one node only is handed over to it after the grace, handover.ts).
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import type { Block } from '../../ipam/blocks.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, ClusterRecords } from '../../store/cluster.ts';
import type { AdmissionGuard, Store } from '../../store/store.ts';
import type { AllocateRequest, Decision } from '../assignment.ts';
import type { RoomGiven } from '../give-back.ts';
import type { LedgerAssigner } from '../ledger-assigner.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { AskEnding } from './ask-ending.ts';
import { Borrower } from './borrower.ts';
import { Lender } from './lender.ts';
import { LoanCheck } from './loan-check.ts';
import { LoanReturn } from './loan-return.ts';
import { MIGRATION_LENDER } from './loans.ts';
import { MigratedAddresses, type MigratedInBlock, isMigrated } from './migrated.ts';
import { PromptLending } from './prompt-lending.ts';
import { WatchedRequests } from './watched-requests.ts';
import { blockKeyPrefix } from '../../ipam/blocks.ts';
import { BlockHandovers } from './handover.ts';
import { describedInStore, splitInStore } from './split-range.ts';

export interface LendingOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  readonly assigner: LedgerAssigner;
  readonly locks: KeyedMutex;
  /** The range as this node's configs define it, when it has served it (its exclusions). */
  readonly rangeOf: (pool: string) => RangeSpec | undefined;
  /** How long an ADD waits for grants (default 15 s, borrower.ts). */
  readonly waitMs?: number;
  /** Prompt lending's random moment before an answer, ms (default: prompt-lending.ts). */
  readonly jitter?: (() => number) | undefined;
  /** ADDs under way in a range pool: how many addresses to ask for at once. */
  readonly demand: (pool: string) => number;
  /** ADDs under way in a range pool (0 when none): its idle loans are kept for them. */
  readonly underWay?: (pool: string) => number;
  /** Gives back at once this node's empty blocks of a range another node asks for (give-back.ts). */
  readonly giveBack?: ((pool: string, wanted: number) => Promise<RoomGiven>) | undefined;
}

/** A round's graces, ms: idle loans, orphaned placeholders, blocks lent to one node (handover.ts; else orphans'). */
export type LendGraces = { readonly returnGraceMs: number; readonly orphanGraceMs: number; handoverGraceMs?: number };

/** Told what an answer lent and what failed. */
type Report = (lent: readonly string[], errors: readonly string[]) => void;
export interface LendingReport {
  readonly lent: string[];
  readonly released: string[];
  readonly returned: string[];
  readonly adopted: number;
  /**
   * Loans in use whose grant someone else removed, said by name (loan-check.ts): as borrower, the
   * grant written back; as lender, the placeholder kept while the borrower publishes it in use.
   */
  readonly restored?: string[];
  /** Blocks offered, taken back or taken over (handover.ts). */
  readonly handed?: string[];
  readonly errors: string[];
}

export class Lending {
  readonly #o: LendingOptions;
  readonly #borrower: Borrower;
  readonly #lender: Lender;
  readonly #return: LoanReturn;
  readonly #check: LoanCheck;
  /** The cluster's records, the requests read from watches while prompt lending runs. */
  readonly #requests: WatchedRequests;
  /** A migration's grants as last read (each run reads them; a claim looks here, at no request). */
  #migrated: readonly AddressRequest[] | undefined;
  readonly #migratedAddresses: MigratedAddresses;
  /** Migrated addresses whose adoption was refused, already reported (`pool address`). */
  readonly #refused = new Set<string>();
  /** This node's asks withdrawn and idle loans given back as asks end (ask-ending.ts). */
  readonly #ending: AskEnding;
  /** Blocks handed over to their borrower, both sides (handover.ts). */
  readonly #handovers: BlockHandovers;
  /** Where prompt lending reports (set while it runs). */
  #report: Report | undefined;

  constructor(options: LendingOptions) {
    this.#o = options;
    const { store, node, clock, ledgers, assigner, locks, rangeOf, demand } = options;
    // Every part reads the requests through the watches while they are open (watched-requests.ts).
    const tier = new WatchedRequests(options.tier, node);
    this.#requests = tier;
    const waitMs = defined({ waitMs: options.waitMs });
    this.#borrower = new Borrower({ store, tier, node, clock, ledgers, assigner, demand, ...waitMs });
    this.#lender = new Lender({ store, tier, node, clock, ledgers, locks, rangeOf, giveBack: options.giveBack });
    this.#return = new LoanReturn({ store, tier, node, clock, ledgers, locks, rangeOf });
    this.#check = new LoanCheck({ store, tier, node, locks, rangeOf });
    this.#migratedAddresses = new MigratedAddresses({ store, tier, node, clock, ledgers });
    const underWay = (pool: string) => options.underWay?.(pool) ?? 0;
    const [borrower, loanReturn] = [this.#borrower, this.#return];
    this.#ending = new AskEnding({ requests: tier, borrower, loanReturn, node, locks, clock, underWay });
    const splitRange = async (pool: string) => (await this.#splitRange(pool)) ?? describedInStore(store, pool);
    this.#handovers = new BlockHandovers({ store, requests: tier, node, clock, ledgers, locks, splitRange });
  }

  /** One round in a free loan ledger of `range` (a local read, no request), or undefined when none is free. */
  async fromLoans(range: RangeSpec, request: AllocateRequest, guard?: AdmissionGuard): Promise<Decision | undefined> {
    const summaries = await this.#o.store.ledgers(blockKeyPrefix(range.pool));
    return this.#borrower.fromLoans(range, request, summaries, guard);
  }

  /**
   * Lends and borrows on the requests as they change until `signal` aborts, as the tier tells of
   * them (prompt-lending.ts): `report` is told what an answer lent and what failed. False when
   * `signal` already aborted: the upkeep's rounds and the borrower's polls alone, as before.
   */
  promptly(signal: AbortSignal, report: Report): boolean {
    const { node, clock } = this.#o;
    const requests = this.#requests;
    this.#report = report;
    const asked = (pool: string) => this.#ending.asked(pool, report);
    // This node's request changed: a flag of a loan given back whose write lost is written again,
    // and an ask no ADD waits on any more is withdrawn (ask-ending.ts).
    const changed = (pool: string) => {
      this.#return.flagPending(pool).catch((error: unknown) => report([], [`giving loans back: ${messageOf(error)}`]));
      // A block offered to this node is taken as the offer shows, not at the next round (handover.ts).
      void this.#handovers.takeOffered().then((taken) => report([], taken.errors));
      void this.#ending.changed(pool, report);
    };
    const [lender, borrower] = [this.#lender, this.#borrower];
    const jitter = defined({ jitter: this.#o.jitter });
    return new PromptLending({ requests, node, clock, lender, borrower, report, asked, changed, ...jitter }).start(
      signal,
    );
  }

  /**
   * The last ADD of range `pool` here ended: this node's ask there is withdrawn now, and while
   * another node asks in it, the idle loans go back (ask-ending.ts). Before, an ask whose ADDs were
   * over kept the grants it did not adopt until the upkeep round: an asker elsewhere was served up
   * to that round's 10 s late (issue 36).
   */
  settled(pool: string): void {
    if (this.#report !== undefined) this.#ending.settled(pool, this.#report);
  }

  /**
   * No free block and no free loan: asks the owners; `conflict` (decide again) once a grant is
   * adopted, or `conflict` with `wait` (wait for grants outside the range's locks, then decide again).
   */
  async borrow(range: RangeSpec): Promise<Decision> {
    // Blocks of one address are never lent (loans.ts), but asked, their owners give empty ones back
    // at once (lender.ts): the wait ends when the request says so, and placement claims the block.
    if ((await this.#borrower.ask(range)) > 0) return { kind: 'conflict' };
    this.#ending.asking(range.pool);
    const wait = async (since: number): Promise<boolean> => {
      if (await this.#borrower.waitForGrants(range, since)) return true;
      // The last ADD of the range here gives up: the ask is withdrawn now, not at the next upkeep
      // round, so no lender grants an address to a node where no ADD waits for it.
      if (this.#underWay(range.pool) <= 1) await this.#ending.withdraw(range).catch(() => undefined);
      return false;
    };
    return { kind: 'conflict', wait };
  }

  #underWay(pool: string): number {
    return this.#o.underWay?.(pool) ?? 0;
  }

  /**
   * What claiming `block` must commit with the claim: a placeholder for every address a migration
   * recorded in it (grant lender `whereabouts`), so the claimer never hands one out; it takes over
   * as their lender (lender.ts keeps them while their grants stand). The grants as the last upkeep
   * run read them (a claim costs no request more); a grant written since is held by the next run
   * (lender.ts), which is why the migration records before the attachments switch to Warren.
   * TRY_AGAIN when they were never read and the cluster cannot be reached. With the ops, the loan
   * ledgers let go in the claim's transaction (migrated.ts: commitOptionsOf).
   */
  async migratedIn(range: RangeSpec, block: Block): Promise<MigratedInBlock> {
    const { tier } = this.#o;
    // A block of the range is being claimed: its open requests are watched from now on.
    this.#requests.include(range.pool);
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
    return this.#migratedAddresses.inClaim(range, block, requests);
  }

  /**
   * One round of lending's upkeep: adopts migrated addresses granted to this node, answers other
   * nodes' requests and tidies placeholders up (`orphanGraceMs`), gives back loans idle for
   * `returnGraceMs` (at once where another node asks), and checks the grants of loans in use (loan-check.ts).
   */
  async run(o: LendGraces): Promise<LendingReport> {
    const errors: string[] = [];
    let migrated: readonly AddressRequest[] | undefined;
    try {
      migrated = await this.#readMigrated();
    } catch (error) {
      errors.push(`reading migrated addresses: ${messageOf(error)}`);
    }
    const adopted = migrated === undefined ? 0 : await this.#adoptMigrated(migrated, errors);
    await this.#ending.withdrawIdle(errors);
    const own = await this.#lender.ownRanges();
    this.#requests.cover([...own, ...this.#ending.idleLoansIn, ...this.#borrowingIn()]);
    const lending = await this.#lender.run(o.orphanGraceMs, migrated ?? []).catch((error: unknown) => {
      errors.push(`lending: ${messageOf(error)}`);
      return { lent: [], released: [], kept: [], errors: [] };
    });
    const asked = (pool: string) => this.#requests.askedElsewhere(pool) && this.#underWay(pool) === 0;
    const returning = await this.#return.run(o.returnGraceMs, asked).catch((error: unknown) => {
      errors.push(`giving loans back: ${messageOf(error)}`);
      return { returned: [], idleIn: [], errors: [] };
    });
    this.#ending.idleLoansIn = returning.idleIn;
    // Watched from now, not from the next round.
    this.#requests.cover([...own, ...this.#ending.idleLoansIn, ...this.#borrowingIn()]);
    const checked = await this.#check.run().catch((error: unknown) => {
      errors.push(`checking the grants of loans in use: ${messageOf(error)}`);
      return { restored: [], errors: [] };
    });
    const handed = await this.#handovers.run(o.handoverGraceMs ?? o.orphanGraceMs);
    return {
      lent: lending.lent,
      released: lending.released,
      returned: returning.returned,
      adopted,
      restored: [...checked.restored, ...lending.kept],
      handed: handed.handed,
      errors: [...errors, ...lending.errors, ...returning.errors, ...checked.errors, ...handed.errors],
    };
  }

  /** The ranges this node asks in or holds loans of, as its request says (grants or something wanted). */
  #borrowingIn(): string[] {
    const own = this.#requests.ownRequests() ?? [];
    return own.filter((r) => r.wanted > 0 || r.grants.some((g) => !isMigrated(g))).map((r) => r.pool);
  }

  async #readMigrated(): Promise<readonly AddressRequest[]> {
    this.#migrated = await this.#requests.requestsLentBy(MIGRATION_LENDER);
    return this.#migrated;
  }

  /**
   * Records the addresses a migration granted this node as their holders' allocations (migrated.ts):
   * in their blocks once this node knows how the range is split, in loan ledgers before.
   */
  async #adoptMigrated(requests: readonly AddressRequest[], errors: string[]): Promise<number> {
    const { node, locks } = this.#o;
    let adopted = 0;
    for (const request of requests) {
      const key = parsePoolKey(request.pool);
      if (request.node !== node || key === undefined) continue;
      const loanRange = { pool: request.pool, family: key.family };
      try {
        const done: string[] = [];
        adopted += await locks.run(request.pool, async () => {
          const range = await this.#splitRange(request.pool);
          let n = 0;
          for (const grant of request.grants) {
            if (!isMigrated(grant)) continue;
            const outcome = range === undefined ? 'loan' : await this.#migratedAddresses.adopt(range, grant, requests);
            if (outcome === 'adopted' || outcome === 'held' || outcome === 'released') done.push(grant.address);
            if (outcome === 'adopted') n += 1;
            else if (outcome === 'loan' && (await this.#borrower.adoptMigrated(loanRange, grant))) n += 1;
            else if (outcome === 'refused') this.#refuse(request.pool, grant.address, errors);
          }
          return n + (await this.#borrower.adopt(loanRange, request));
        });
        // In its block, the pod's allocation is this node's like any other: the grant goes (a lost
        // write is done again next round, which finds the allocation recorded).
        if (done.length > 0) {
          const kept = request.grants.filter((g) => !(isMigrated(g) && done.includes(g.address)));
          await this.#requests.updateRequest(request, kept, request.wanted);
        }
      } catch (error) {
        errors.push(`adopting migrated addresses of ${request.pool}: ${messageOf(error)}`);
      }
    }
    return adopted;
  }

  /** Reports, once, a migrated address refused: a one-address block of another node, which holds it for this one. */
  #refuse(pool: string, address: string, errors: string[]): void {
    if (this.#refused.has(`${pool} ${address}`)) return;
    this.#refused.add(`${pool} ${address}`);
    errors.push(
      `migrated address ${address} of ${pool} not adopted on node ${this.#o.node}: its block is one address, ` +
        'held by another node (which keeps it held for this one)',
    );
  }

  /** The range as split in the store (its pinned block sizes), once this node served it; else undefined. */
  async #splitRange(pool: string): Promise<RangeSpec | undefined> {
    const configured = this.#o.rangeOf(pool);
    return configured === undefined ? undefined : splitInStore(this.#o.store, configured);
  }
}
