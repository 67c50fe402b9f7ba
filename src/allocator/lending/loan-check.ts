/**
 * The borrower's check of its loans in use: a loan ledger (loans.ts) holding a container's
 * allocation must keep its grant in this node's address request, for the grant is what keeps the
 * lender's placeholder (lender.ts releases a placeholder whose grant has been gone for its grace,
 * and would then hand the address out while this node's container still uses it). A grant removed
 * by someone else (the request edited or deleted by hand, a tool) while the loan is in use is
 * found here, reported by name, and written back, so the lender keeps its placeholder until the
 * use ends and the loan is given back the ordinary way (loan-return.ts). Run with lending's upkeep.
 *
 * Guarantees:
 * - only a loan in use counts: an idle loan, or one marked given back (a bookkeeping record, no
 *   container), is left to loan-return.ts, whose grant removal is meant;
 * - the grant written back names the loan's lender as the last grant seen did, else the node
 *   whose claim holds the address's block now; with neither known it is reported, not guessed;
 * - a request deleted is made again (`ask` for nothing more) before the grant goes back in; the
 *   write is guarded by the request's version, and one that lost is tried on the next run;
 * - under the range pool's lock, as a loan's return is, so no return and restore interleave.
 * The lender's side (`loanUser`, lender.ts): a placeholder whose grant has been gone for the grace
 * is kept while its borrower publishes a container using the loan (the borrower's agent may be
 * down, its container not), and said by name.
 */
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { formatIP, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockKey, blocksHolding, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { ClusterRecords, Grant } from '../../store/cluster.ts';
import type { Store } from '../../store/store.ts';
import { loanAddressOf, loanLedgers } from './loans.ts';
import { splitInStore } from './split-range.ts';

export interface LoanCheckOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly locks: KeyedMutex;
  /** The range as this node's configs define it, when it has served it (its block size). */
  readonly rangeOf: (pool: string) => RangeSpec | undefined;
}

export interface LoansChecked {
  /** One line per grant found removed while its loan was in use, naming the address and its user. */
  readonly restored: string[];
  readonly errors: string[];
}

export class LoanCheck {
  readonly #o: LoanCheckOptions;
  /** The grants of this node's requests as last read, by range pool and address: who lent what. */
  readonly #seen = new Map<string, Map<string, Grant>>();

  constructor(options: LoanCheckOptions) {
    this.#o = options;
  }

  async run(): Promise<LoansChecked> {
    const restored: string[] = [];
    const errors: string[] = [];
    for (const [pool, inUse] of await this.#loansInUse()) {
      try {
        restored.push(...(await this.#o.locks.run(pool, () => this.#check(pool, inUse))));
      } catch (error) {
        errors.push(`checking the grants of the loans of ${pool}: ${messageOf(error)}`);
      }
    }
    return { restored, errors };
  }

  /** Range pool → address → the allocations of containers in its loan ledger (local reads only). */
  async #loansInUse(): Promise<Map<string, Map<string, Allocation[]>>> {
    const { store } = this.#o;
    const inUse = new Map<string, Map<string, Allocation[]>>();
    for (const summary of loanLedgers(await store.ledgers(), this.#o.rangeOf)) {
      if (summary.allocated === 0 || summary.affinity !== undefined) continue;
      const pool = rangePoolOfKey(summary.ledger);
      const family = parsePoolKey(pool)?.family;
      if (family === undefined) continue;
      const value = loanAddressOf({ pool, family }, summary.ledger);
      const held = (await store.list({ ledger: summary.ledger })).filter((a) => !isBookkeeping(a));
      if (value === undefined || held.length === 0) continue;
      const byAddress = inUse.get(pool) ?? new Map<string, Allocation[]>();
      byAddress.set(formatIP({ family, value }), held);
      inUse.set(pool, byAddress);
    }
    return inUse;
  }

  /** Writes back the grants of `pool`'s loans in use that its request lacks; what it restored. */
  async #check(pool: string, inUse: ReadonlyMap<string, Allocation[]>): Promise<string[]> {
    const { tier, node } = this.#o;
    let request = await tier.requestOf(pool, node);
    const granted = new Map((request?.grants ?? []).map((g) => [g.address, g]));
    const seen = this.#seen.get(pool) ?? new Map<string, Grant>();
    for (const [address, grant] of granted) seen.set(address, grant);
    this.#seen.set(pool, seen);
    const missing = [...inUse.keys()].filter((address) => !granted.has(address));
    if (missing.length === 0) return [];
    const back: Grant[] = [];
    const lines: string[] = [];
    for (const address of missing) {
      const users = (inUse.get(address) ?? []).map(userOf).join(', ');
      const grant = seen.get(address) ?? (await this.#grantFromClaim(pool, address));
      const from = request === undefined ? 'the cluster (the request is gone)' : "this node's address request";
      const what =
        `loan ${address} of ${pool} is in use on node ${node} (${users}), but its grant was removed from ` +
        `${from} by someone else`;
      if (grant === undefined) {
        lines.push(`${what}; its lender is not known here, so it could not be granted back`);
        continue;
      }
      back.push(grant);
      lines.push(`${what}: granted back from node ${grant.lender}, which keeps the address until the loan ends`);
    }
    if (back.length === 0) return lines;
    request ??= await tier.ask(pool, node, 0);
    const kept = request.grants.filter((g) => !back.some((b) => b.address === g.address));
    const written = await tier.updateRequest(request, [...kept, ...back], request.wanted);
    if (written === undefined) throw new Error(`the request changed while ${back.length} grant(s) went back; retrying`);
    return lines;
  }

  /**
   * The grant of `address` from the claim of its block now: its owner is its lender. Where the
   * range's blocks grow, the block holding it may be of any size: the smallest first.
   */
  async #grantFromClaim(pool: string, address: string): Promise<Grant | undefined> {
    const configured = this.#o.rangeOf(pool);
    const ip = parseIP(address);
    if (configured === undefined || ip === undefined || ip.family !== configured.family) return undefined;
    const range = (await splitInStore(this.#o.store, configured)) ?? configured;
    for (const block of blocksHolding(range, ip.value)) {
      const claim = await this.#o.tier.claimOf(block.key);
      if (claim !== undefined) return { address, lender: claim.node, block: block.key };
    }
    return undefined;
  }
}

/**
 * The container `borrower` published as using its loan of `address` in range `pool` (its loan
 * pool's publication, tiered/cluster-tier.ts publishLoan), if any: what a lender looks at before it lets go of
 * a placeholder whose grant is gone. Reads the borrower's publications in that range, page by page.
 */
export async function loanUser(
  tier: ClusterRecords,
  pool: string,
  borrower: string,
  address: string,
): Promise<Allocation | undefined> {
  const ip = parseIP(address);
  if (ip === undefined) return undefined;
  const key = blockKey(pool, `${address}/${ip.family === 4 ? 32 : 128}`);
  let token: string | undefined;
  do {
    const page = await tier.published({ pool, node: borrower }, { limit: 100, ...defined({ continue: token }) });
    const loan = page.items.find((b) => b.loan === true && b.key === key);
    if (loan !== undefined) return loan.allocations.find((a) => !isBookkeeping(a) && a.address === address);
    token = page.continue === '' ? undefined : page.continue;
  } while (token !== undefined);
  return undefined;
}

/** A container as a report names it: its pod when recorded, else its container ID. */
export function userOf(a: Allocation): string {
  return a.podName === undefined
    ? `container ${a.containerID}`
    : `pod ${a.podNamespace === undefined ? '' : `${a.podNamespace}/`}${a.podName}`;
}
