/**
 * Addresses a migration recorded (`warren migrate whereabouts`: grants of lender `whereabouts`,
 * each naming the pod's allocation as its `holder`), on a two-tier store: how the node a grant
 * names (the pod's node) adopts it, and what claiming a block that holds such addresses commits.
 *
 * Guarantees:
 * - a block claimed holding migrated addresses takes, in the claim's own commit, each one granted
 *   to THIS node as its holder's allocation, and each one granted to another node as a placeholder
 *   lent to it (loans.ts): never a placeholder lent to itself, never an address already recorded;
 * - adopting a migrated grant, once this node knows how the range is split (it served the range):
 *   the block holding the address, unclaimed, is claimed for this node with the holder's allocation
 *   (an ordinary own block); this node's already, the allocation is committed in it; another
 *   node's (which holds a placeholder for it, lender.ts), the address is adopted into a loan ledger,
 *   except in a range of one-address blocks, where the loan ledger's key would be the block's key:
 *   that is REFUSED (reported, nothing committed; the other node keeps the address held for the
 *   pod; once the pod's release emptied what this node recorded, the grant goes, and the
 *   other node's placeholder with it);
 * - before this node knows the split, the grant is adopted into its loan ledger key (borrower.ts),
 *   so the pod's release frees it from the start; when this node then claims the block holding it,
 *   the claim takes the pod's allocation over into the block (never free in a block of this node
 *   while the pod lives). Where the store commits to several ledgers at once (Store.commitAll: the
 *   SQLite store, and the two-tier store in its node's SQLite file: every store the agent runs on),
 *   the loan ledger's record is let go in the claim's own transaction (CommitOptions.precededBy),
 *   the ledger left with a given-back mark (loans.ts) so no pick reaches the address there again:
 *   recorded once at every moment, as the store's one-address-per-owner-and-range guarantee
 *   (store.ts) requires. A store without commitAll is given two commits: the claim recording it in
 *   the block, and the next adoption letting the loan ledger's record go (#letLoanGo; a store
 *   keeping that guarantee refuses the first, as a conflict). Should the range turn out to be split into
 *   one-address blocks, that pool is the block itself, claimed for this node at a later round when
 *   nobody holds it (a claim skips what is already recorded), or left as it is when another node does;
 * - an address is recorded once: an address already recorded here (in its block or its loan ledger) is
 *   not recorded again; every commit is at the revision read, under the range pool's lock; a grant
 *   adopted into its block is then removed (the caller), so it is adopted once. (Left open: a pod
 *   released after its block's claim recorded it and before the next round removed its grant is
 *   recorded again; the garbage collection of gone containers frees it.)
 */
import { formatIP, bitsOf, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import { type Block, blockAt, blocksHolding } from '../../ipam/blocks.ts';
import { loanKey } from '../../ipam/loan-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, BlockClaim, ClusterRecords, Grant } from '../../store/cluster.ts';
import type { CommitOptions, LedgerCommit, LedgerOp, LedgerRead, Store } from '../../store/store.ts';
import { momentOf } from '../../core/moment.ts';
import type { Clock } from '../../core/clock.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { metadataOps } from '../ledger-metadata.ts';
import { MIGRATION_LENDER, placeholderOf, returnedMarkOf } from './loans.ts';

export interface MigratedOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
}

/**
 * What a claim of a block commits for the migrated addresses in it: `ops` in the block, after
 * `precededBy` (the loan ledgers whose records the block takes over) in the same transaction.
 */
export interface MigratedInBlock {
  readonly ops: readonly LedgerOp[];
  readonly precededBy: readonly LedgerCommit[];
}

/** The options a claim's commit takes for `migrated` (none when no loan ledger is let go with it). */
export function commitOptionsOf(migrated: MigratedInBlock | undefined): CommitOptions | undefined {
  return migrated === undefined || migrated.precededBy.length === 0 ? undefined : { precededBy: migrated.precededBy };
}

/** A grant the migration wrote: its lender is `whereabouts` and it names the pod's allocation. */
export function isMigrated(grant: Grant): grant is Grant & { readonly holder: Allocation } {
  return grant.lender === MIGRATION_LENDER && grant.holder !== undefined;
}

/**
 * What adopting one migrated grant came to. `adopted`, `held`: its holder's allocation is in its
 * block, this node's (now, or already): the grant has done its work, the caller removes it, so a
 * release of the pod is never followed by recording it again. `released`: recorded here once and
 * released since (one-address blocks): the caller removes the grant, so a node holding a
 * placeholder for it lets the address go. `held-loan`: in its loan ledger
 * already (the grant stays: it is the loan). `loan`: another node holds its block (larger than one
 * address): the caller adopts it into its loan ledger (borrower.ts).
 */
export type Adoption = 'adopted' | 'held' | 'released' | 'held-loan' | 'refused' | 'retry' | 'loan';

export class MigratedAddresses {
  readonly #o: MigratedOptions;

  constructor(options: MigratedOptions) {
    this.#o = options;
  }

  /**
   * What a claim of `block` commits for the migrated addresses in it (`requests`: the requests
   * holding the migration's grants): the holder's allocation for this node's, a placeholder for
   * another node's, nothing for an address the block already records here; and, where the store
   * commits to several ledgers at once, the loan ledgers whose records the block takes over.
   */
  async inClaim(range: RangeSpec, block: Block, requests: readonly AddressRequest[]): Promise<MigratedInBlock> {
    const { store, node, clock } = this.#o;
    const read = await store.readLedger(block.key);
    const recorded = new Set(
      read.kind === 'snapshot' ? [...read.allocations, ...read.resting.map((r) => r.address)] : [],
    );
    const ops: LedgerOp[] = [];
    const precededBy: LedgerCommit[] = [];
    const now = momentOf(clock);
    for (const request of requests) {
      if (request.pool !== range.pool) continue;
      for (const grant of request.grants) {
        const ip = parseIP(grant.address);
        if (grant.lender !== MIGRATION_LENDER || ip === undefined || ip.family !== range.family) continue;
        if (ip.value < block.span.first || ip.value > block.span.last) continue;
        const text = formatIP(ip);
        if (recorded.has(text)) continue;
        recorded.add(text);
        // Adopted into its loan ledger before this node knew the range's split: while its pod holds
        // it there, the block claimed takes it over as the same pod's allocation (else the block
        // would count it free and hand it out again), the loan ledger's record let go in the
        // claim's transaction (see the header).
        if (request.node === node && (await this.#inLoanPool(range, block, ip.value))) {
          const [held] = await this.#loanRecords(range, ip.value);
          if (held === undefined) continue;
          ops.push({ op: 'allocate', allocation: { ...held, pool: block.key, node } });
          const letGo = store.commitAll === undefined ? undefined : await this.#loanLetGo(range, ip.value);
          if (letGo !== undefined) precededBy.push(letGo);
          continue;
        }
        // Granted to this node: the pod lives here, so the claim records its allocation itself.
        const allocation =
          request.node === node && grant.holder !== undefined
            ? { ...grant.holder, pool: block.key, address: text, node }
            : placeholderOf(block.key, range.family, ip.value, request.node, now);
        ops.push({ op: 'allocate', allocation });
      }
    }
    return { ops, precededBy };
  }

  /**
   * Adopts `grant` (migrated, granted to this node) in `range` as split in the store (the caller
   * holds the range pool's lock). `requests`: every request holding the migration's grants, for
   * the others a claim holds.
   */
  async adopt(range: RangeSpec, grant: Grant, requests: readonly AddressRequest[]): Promise<Adoption> {
    const { store, node, ledgers } = this.#o;
    const ip = parseIP(grant.address);
    if (ip === undefined || ip.family !== range.family || !isMigrated(grant)) return 'refused';
    const { block, read } = await this.#recordedBlock(range, ip.value);
    if (read.kind !== 'snapshot') return 'retry';
    const recorded = read.allocations.includes(grant.address);
    // Recorded in its own block of this node, or (larger blocks) in its loan ledger: adopted already.
    if (recorded && read.affinity === node) return (await this.#letLoanGo(range, block, ip.value)) ? 'held' : 'retry';
    if (!recorded && (await this.#inLoanPool(range, block, ip.value))) return 'held-loan';
    // A one-address block recorded here before (adopted while the split was unknown, or claimed)
    // and emptied since: the pod's release freed it; recording it again would undo that.
    if (!recorded && read.revision > 0 && range.blockPrefix >= bitsOf(range.family)) return 'released';
    const claim = await this.#claimOf(range, block, ip.value);
    if (claim !== undefined && claim.node !== node)
      return range.blockPrefix >= bitsOf(range.family) ? 'refused' : 'loan';
    const migrated = claim === undefined ? await this.inClaim(range, block, requests) : undefined;
    const ops: LedgerOp[] =
      migrated !== undefined
        ? [{ op: 'claim', node }, ...metadataOps(block.span, 0), ...migrated.ops]
        : recorded
          ? []
          : [{ op: 'allocate', allocation: { ...grant.holder, pool: block.key, address: grant.address, node } }];
    if (ops.length === 0) return 'held';
    const result = await store.commit(block.key, read.revision, ops, undefined, commitOptionsOf(migrated));
    ledgers.forget(block.key);
    return result.kind === 'committed' ? 'adopted' : 'retry';
  }

  /**
   * The block of `value` this node's file records (where the range's blocks grow, a grown block of
   * this node may hold it), else the smallest block holding it: local reads only.
   */
  async #recordedBlock(range: RangeSpec, value: bigint): Promise<{ block: Block; read: LedgerRead }> {
    const [smallest, ...larger] = blocksHolding(range, value);
    const first = smallest ?? blockAt(range, value);
    const read = await this.#o.store.readLedger(first.key);
    if (read.kind !== 'snapshot' || read.revision > 0) return { block: first, read };
    for (const block of larger) {
      const grown = await this.#o.store.readLedger(block.key);
      if (grown.kind === 'snapshot' && grown.revision > 0) return { block, read: grown };
    }
    return { block: first, read };
  }

  /**
   * The claim of the block holding `value`: `block`'s, else (blocks growing) the first of the
   * others holding it that is claimed. A claim of `block` made while another node holds a block
   * around it is refused by the tier, so claiming the smallest when none is found is safe.
   */
  async #claimOf(range: RangeSpec, block: Block, value: bigint): Promise<BlockClaim | undefined> {
    const own = await this.#o.tier.claimOf(block.key);
    if (own !== undefined) return own;
    for (const other of blocksHolding(range, value)) {
      if (other.key === block.key) continue;
      const claim = await this.#o.tier.claimOf(other.key);
      if (claim !== undefined) return claim;
    }
    return undefined;
  }

  /**
   * What this node's loan ledger of `value` (other than its block) records now: its pod's
   * allocation, or nothing (a given-back mark is no record of a pod).
   */
  async #loanRecords(range: RangeSpec, value: bigint): Promise<Allocation[]> {
    const key = loanKey(range.pool, range.family, value);
    const held = await this.#o.store.list({ ledger: key, address: formatIP({ family: range.family, value }) });
    return held.filter((a) => !isBookkeeping(a));
  }

  /**
   * Lets the loan ledger's record of an address go once its own block of this node records it
   * (a claim on a store without commitAll recorded it there and left it: see the header; elsewhere
   * nothing is left, and this is a look): the address is recorded once, in its block. False when that commit
   * met a newer revision (the next round tries again); the block keeps the address either way.
   */
  async #letLoanGo(range: RangeSpec, block: Block, value: bigint): Promise<boolean> {
    const key = loanKey(range.pool, range.family, value);
    if (key === block.key || (await this.#loanRecords(range, value)).length === 0) return true;
    const letGo = await this.#loanLetGo(range, value);
    if (letGo === undefined) return false;
    const result = await this.#o.store.commit(letGo.ledger, letGo.expected, letGo.ops);
    this.#o.ledgers.forget(key);
    return result.kind === 'committed';
  }

  /**
   * The commit letting the loan ledger's record of `value` go, at the revision read now: the ledger
   * is left holding a given-back mark (loans.ts), as a handover leaves it (handover.ts), so no pick
   * of this node reaches the address there again while its block holds it.
   */
  async #loanLetGo(range: RangeSpec, value: bigint): Promise<LedgerCommit | undefined> {
    const { store, ledgers, node, clock } = this.#o;
    const key = loanKey(range.pool, range.family, value);
    const read = await store.readLedger(key);
    if (read.kind !== 'snapshot') return undefined;
    ledgers.forget(key);
    const address = formatIP({ family: range.family, value });
    const mark = returnedMarkOf(key, address, node, momentOf(clock));
    return {
      ledger: key,
      expected: read.revision,
      ops: [
        { op: 'release', address },
        { op: 'allocate', allocation: mark },
      ],
    };
  }

  /**
   * Whether the address was adopted into its loan ledger here (a pool apart from `block`): the pool
   * exists, even if the pod's release emptied it since (then it is never recorded again).
   */
  async #inLoanPool(range: RangeSpec, block: Block, value: bigint): Promise<boolean> {
    const key = loanKey(range.pool, range.family, value);
    if (key === block.key) return false;
    const read = await this.#o.store.readLedger(key);
    return read.kind === 'snapshot' && read.revision > 0;
  }
}
