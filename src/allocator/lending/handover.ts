/**
 * Blocks handed over to their borrower (issue 36: every address of a tiny range usable): a block
 * whose owner has held no pod of its own in it for the grace, and every address in use in which is
 * lent to one node, becomes that node's, its loans of it that node's own allocations there. Before,
 * such a block was kept whole by its owner for as long as one loan of it was in use, its other free
 * addresses out of use by either node (stranded: a cold node's /31, a hot node's grown /28). The
 * cluster's steps, and why every crash point is safe, are the store's (store/tiered/handover.ts);
 * this is what the allocator does around them, in the lending rounds (lending.ts `run`):
 * - owner (`offerIdle`): a block of this node that has held only placeholders for `graceMs` (the
 *   block grace, as for giving an empty block back), now all lent to one node, with no rest still
 *   running, every placeholder granted in that node's request (a loan it holds, not given back), and
 *   no other node asking in the range (lending from the block serves it better then), is offered to
 *   it, read again under the range pool's lock (which every allocation of this process takes: none
 *   lands in the block between that reading and the offer); then the grants of the block in the
 *   borrower's request are flagged `offered` (Grant.offered), again each round while the offer
 *   stands; the offer is taken back once no loan of it is left, the borrower declined it (took the
 *   flags off), or OFFER_WAIT_MS passed without a take (an older borrower never takes one), the
 *   block's grace for giving it back running on meanwhile (give-back.ts);
 * - borrower (`takeOffered`, each round and as its request changes): every block its request's
 *   grants say offered, one of whose loans is in use here, is taken (the others are declined: the
 *   block would only sit idle here): the claim moved, then one local transaction at the revisions
 *   read, the block recorded as this node's with the pods' allocations of its loan ledgers, each loan
 *   ledger left with a given-back mark so no pick reaches the address there again (borrower.ts never
 *   adopts a grant flagged offered, so no grant of the block takes the mark off); then the grants of
 *   the block are dropped from the request (a lost write: the next round). A take already under way
 *   (the claim taken, the file not yet written: a crash in between) is finished the same way.
 * The rounds read requests from the watches (watched-requests.ts): an idle node makes no request.
 * Blocks lent to two or more nodes are not handed over: they stay their owner's until all but one
 * of the loans come back (the tiny range's audit counts them: bench/scale/tiny-range.ts).
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { formatIP, parseIP } from '../../ipam/address.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockOfKey, isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, BlockClaim, BlockHandover, Grant } from '../../store/cluster.ts';
import type { LedgerCommit, LedgerOp, Store } from '../../store/store.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { restEnd } from '../ledger-cache.ts';
import { metadataOps } from '../ledger-metadata.ts';
import { LENT_NETWORK, loanKey, returnedMarkOf } from './loans.ts';
import { isMigrated } from './migrated.ts';
import type { WatchedRequests } from './watched-requests.ts';

/** How long an offer stands untaken before its owner takes it back (an older borrower never takes one). */
export const OFFER_WAIT_MS = 60_000;

export interface HandoverOptions {
  readonly store: Store;
  readonly requests: WatchedRequests;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  readonly locks: KeyedMutex;
  /** The range as split in the store, once this node served it (its exclusions, its block sizes). */
  readonly splitRange: (pool: string) => Promise<RangeSpec | undefined>;
}

export interface HandoverReport {
  /** Blocks offered, taken back or taken this round, said for the log. */
  readonly handed: string[];
  readonly errors: string[];
}

export class BlockHandovers {
  readonly #o: HandoverOptions;
  /** Own blocks seen holding only placeholders (of loans to any number of nodes), and since when (monotonic ms). */
  readonly #lentOnlySince = new Map<string, number>();
  /** The borrower's run under way (a round's, or one a change of its request started). */
  #taking: Promise<HandoverReport> | undefined;
  /** Offers of this node whose grants it flagged (written): flags gone since are the borrower's no. */
  readonly #flagged = new Set<string>();
  /** Offers of this node standing, and since when (monotonic ms), by block key. */
  readonly #offeredSince = new Map<string, number>();

  constructor(options: HandoverOptions) {
    this.#o = options;
  }

  /** One round: blocks offered to this node taken over, then its idle lent blocks offered (`graceMs`). */
  async run(graceMs: number): Promise<HandoverReport> {
    const [taken, offered] = [await this.takeOffered(), await this.offerIdle(graceMs)];
    return { handed: [...taken.handed, ...offered.handed], errors: [...taken.errors, ...offered.errors] };
  }

  /** The owner's side (see the header): offers idle lent blocks, tends and takes back offers. */
  async offerIdle(graceMs: number): Promise<HandoverReport> {
    const handover = this.#o.store.cluster?.handover;
    const report: HandoverReport = { handed: [], errors: [] };
    if (handover === undefined) return report;
    const { store, node, clock } = this.#o;
    const now = clock.monotonic();
    await this.#tend(handover, report);
    const seen = new Set<string>();
    for (const summary of await store.ledgers()) {
      if (summary.affinity !== node || !isBlockKey(summary.ledger) || summary.allocated === 0) continue;
      const held = await store.list({ ledger: summary.ledger });
      if (!held.every((a) => a.network === LENT_NETWORK)) continue;
      // The grace runs from when the block holds nothing of this node's own, however many nodes it
      // lends to then: one whose other loans came back goes over as soon as one borrower is left.
      seen.add(summary.ledger);
      const since = this.#lentOnlySince.get(summary.ledger) ?? now;
      this.#lentOnlySince.set(summary.ledger, since);
      const borrowers = new Set(held.map((a) => a.containerID));
      const [to] = borrowers;
      if (borrowers.size !== 1 || to === undefined || now - since < graceMs) continue;
      // Not while another node asks in the range: this node lends from the block then (an offered
      // block is nobody's to hand out from until it is taken).
      if (this.#o.requests.askedElsewhere(rangePoolOfKey(summary.ledger))) continue;
      try {
        if (await this.#offer(handover, summary.ledger, to, held)) {
          this.#offeredSince.set(summary.ledger, now);
          report.handed.push(`block ${summary.ledger} offered to ${to}`);
        }
      } catch (error) {
        report.errors.push(`offering block ${summary.ledger} to ${to}: ${messageOf(error)}`);
      }
    }
    for (const key of this.#lentOnlySince.keys()) if (!seen.has(key)) this.#lentOnlySince.delete(key);
    return report;
  }

  /** Offers block `key` to `to` if its loans are all granted to `to` and still all it holds (under the lock). */
  async #offer(handover: BlockHandover, key: string, to: string, held: readonly Allocation[]): Promise<boolean> {
    const { store, node, locks, ledgers, clock } = this.#o;
    const pool = rangePoolOfKey(key);
    const request = await this.#requestOf(pool, to);
    const granted = (a: Allocation) =>
      request?.grants.some((g) => g.address === a.address && g.lender === node && g.block === key && usable(g));
    if (request === undefined || !held.every(granted)) return false;
    const offered = await locks.run(pool, () =>
      handover.offer(key, to, async () => {
        ledgers.forget(key);
        const read = await store.readLedger(key);
        const mono = clock.monotonic();
        if (read.kind !== 'snapshot' || read.resting.some((r) => restEnd(r, clock) > mono)) return false;
        const now = await store.list({ ledger: key });
        return now.length === held.length && now.every((a) => a.network === LENT_NETWORK && a.containerID === to);
      }),
    );
    if (offered === undefined) return false;
    await this.#flag(offered);
    return true;
  }

  /**
   * Flags the grants of the offered block in its borrower's request: `none` when it has none left (every
   * loan of the block came back: nothing to hand over), `lost` when the write lost (flagged next round).
   */
  async #flag(claim: BlockClaim): Promise<'flagged' | 'lost' | 'none'> {
    const { requests, node } = this.#o;
    const to = claim.offeredTo;
    if (to === undefined) return 'none';
    const request = await this.#requestOf(rangePoolOfKey(claim.key), to);
    const ofBlock = (g: Grant) => g.lender === node && g.block === claim.key;
    if (request === undefined || !request.grants.some(ofBlock)) return 'none';
    if (request.grants.every((g) => !ofBlock(g) || g.offered === true)) return 'flagged';
    // Flagged once and the flags gone since: the borrower declined (none of its loans of it in use).
    if (this.#flagged.has(claim.key)) return 'none';
    const grants = request.grants.map((g) => (ofBlock(g) ? { ...g, offered: true as const } : g));
    if ((await requests.updateRequest(request, grants, request.wanted)) === undefined) return 'lost';
    this.#flagged.add(claim.key);
    return 'flagged';
  }

  /** `to`'s request of `pool` granting something of this node's: from the watch of those, while it is open. */
  async #requestOf(pool: string, to: string): Promise<AddressRequest | undefined> {
    return (await this.#o.requests.requestsLentBy(this.#o.node)).find((r) => r.pool === pool && r.node === to);
  }

  /** Standing offers: flagged again where a write lost them, taken back once OFFER_WAIT_MS passed untaken. */
  async #tend(handover: BlockHandover, report: HandoverReport): Promise<void> {
    const now = this.#o.clock.monotonic();
    const standing = new Set<string>();
    for (const claim of handover.offered()) {
      standing.add(claim.key);
      const since = this.#offeredSince.get(claim.key) ?? now;
      this.#offeredSince.set(claim.key, since);
      try {
        // Nothing left to hand over (every loan came back), or not taken in time: the block is this node's again.
        if (now - since >= OFFER_WAIT_MS || (await this.#flag(claim)) === 'none') {
          if (await handover.retract(claim.key)) {
            this.#offeredSince.delete(claim.key);
            this.#lentOnlySince.delete(claim.key);
            report.handed.push(`offer of block ${claim.key} to ${claim.offeredTo} taken back`);
          }
        }
      } catch (error) {
        report.errors.push(`tending the offer of block ${claim.key}: ${messageOf(error)}`);
      }
    }
    for (const key of this.#offeredSince.keys()) if (!standing.has(key)) this.#offeredSince.delete(key);
    for (const key of this.#flagged) if (!standing.has(key)) this.#flagged.delete(key);
  }

  /** The borrower's side (see the header): takes every block its requests' grants say offered, one run at a time. */
  takeOffered(): Promise<HandoverReport> {
    this.#taking ??= this.#takeOffered().finally(() => {
      this.#taking = undefined;
    });
    return this.#taking;
  }

  async #takeOffered(): Promise<HandoverReport> {
    const handover = this.#o.store.cluster?.handover;
    const report: HandoverReport = { handed: [], errors: [] };
    if (handover === undefined) return report;
    const own = await this.#ownRequests().catch((error: unknown) => {
      report.errors.push(`reading this node's requests: ${messageOf(error)}`);
      return [];
    });
    for (const request of own) {
      if (request.node !== this.#o.node) continue;
      const blocks = new Set(
        request.grants.filter((g) => g.offered === true && g.block !== undefined).map((g) => g.block),
      );
      for (const key of blocks) {
        if (key === undefined) continue;
        try {
          const outcome = await this.#take(handover, request.pool, key);
          if (outcome === 'conflict') continue; // the next round looks again
          if (outcome === 'taken') report.handed.push(`block ${key} taken over`);
          await this.#dropGrants(request.pool, key, outcome === 'taken');
        } catch (error) {
          report.errors.push(`taking block ${key} over: ${messageOf(error)}`);
        }
      }
    }
    return report;
  }

  /** This node's requests, from the watch; without one, read for each range it holds others' addresses of. */
  async #ownRequests(): Promise<readonly AddressRequest[]> {
    const { requests, store, node } = this.#o;
    const watched = requests.ownRequests();
    if (watched !== undefined) return watched;
    const loans = (await store.ledgers()).filter((p) => p.affinity === undefined && isBlockKey(p.ledger));
    const read = [];
    for (const pool of new Set(loans.map((p) => rangePoolOfKey(p.ledger))))
      read.push(await requests.requestOf(pool, node));
    return read.filter((r) => r !== undefined);
  }

  async #take(handover: BlockHandover, pool: string, key: string) {
    const range = await this.#o.splitRange(pool);
    const block = range === undefined ? undefined : blockOfKey(range, key);
    if (block === undefined) return 'conflict';
    const { store } = this.#o;
    // A store that cannot record the block with its loans in one commit never takes the claim.
    if (store.commitAll === undefined) return 'not offered';
    // A fresh offer is declined while none of its loans here is in use: the block would only sit idle
    // here instead of there. Its flags go (as for an offer no longer standing), which tells the owner
    // to take it back; the idle loans go back as such.
    const claim = await this.#o.requests.claimOf(key);
    if (claim?.offeredTo === this.#o.node && !(await this.#inUse(range?.blockPrefix ?? 0, block.span)))
      return 'not offered';
    // No lock: the local commit is at the revisions its moves read (a loan changed meanwhile, by a DEL
    // or a pick, makes it a conflict, tried again next round), and nothing is handed out in the block
    // here until the take is done (the store's claims cache says so).
    const record = async () => (await store.commitAll?.(await this.#moves(block.span, key)))?.kind === 'committed';
    return handover.take(key, record);
  }

  /** Whether a pod of this node holds one of its loans of an address of `span`. */
  async #inUse(blockPrefix: number, span: RangeSpec): Promise<boolean> {
    const held = await this.#o.store.list({ rangePool: rangePoolOfKey(span.pool) });
    return held.some((a) => {
      const v = parseIP(a.address)?.value;
      return (
        !isBookkeeping(a) && isLoanKey(a.pool, blockPrefix) && v !== undefined && v >= span.first && v <= span.last
      );
    });
  }

  /**
   * The local commits recording block `key` (span `span`) as this node's: each loan ledger of one
   * of its addresses emptied and marked given back (its pod's allocation, if any, moving into the
   * block), then the block itself, described and claimed, holding those allocations.
   */
  async #moves(span: RangeSpec, key: string): Promise<LedgerCommit[]> {
    const { store, node, clock, ledgers } = this.#o;
    const commits: LedgerCommit[] = [];
    const moved: Allocation[] = [];
    const now = momentOf(clock);
    for (let v = span.first; v <= span.last; v++) {
      const loan = loanKey(rangePoolOfKey(key), span.family, v);
      ledgers.forget(loan);
      const read = await store.readLedger(loan);
      if (read.kind !== 'snapshot' || read.revision === 0) continue;
      const held = await store.list({ ledger: loan });
      const text = formatIP({ family: span.family, value: v });
      const ops: LedgerOp[] = [
        ...held.map((a) => ({ op: 'release' as const, address: a.address })),
        ...read.resting.map((r) => ({ op: 'unrest' as const, address: r.address })),
        { op: 'allocate', allocation: returnedMarkOf(loan, text, node, now) },
      ];
      commits.push({ ledger: loan, expected: read.revision, ops });
      moved.push(...held.filter((a) => !isBookkeeping(a)));
    }
    ledgers.forget(key);
    const read = await store.readLedger(key);
    const revision = read.kind === 'snapshot' ? read.revision : 0;
    const ops: LedgerOp[] = [
      ...metadataOps(span, 0),
      { op: 'claim', node },
      ...moved.map((a): LedgerOp => ({ op: 'allocate', allocation: { ...a, pool: key } })),
    ];
    commits.push({ ledger: key, expected: revision, ops });
    return commits;
  }

  /** Drops the grants of block `key` from this node's request of `pool` (`taken`), or only their offer flags. */
  async #dropGrants(pool: string, key: string, taken: boolean): Promise<void> {
    const { requests, node } = this.#o;
    const request = await requests.requestOf(pool, node);
    if (request === undefined) return;
    const ofBlock = (g: Grant) => g.block === key && g.offered === true;
    if (!request.grants.some(ofBlock)) return;
    const grants = taken
      ? request.grants.filter((g) => !ofBlock(g))
      : request.grants.map((g) => (ofBlock(g) ? withoutOffer(g) : g));
    await requests.updateRequest(request, grants, request.wanted);
  }
}

/** A grant its borrower holds as a loan: not given back, not a migration's. */
function usable(g: Grant): boolean {
  return g.returned !== true && !isMigrated(g);
}

function withoutOffer(g: Grant): Grant {
  const { offered: _offered, ...rest } = g;
  return rest;
}
