/**
 * The two-tier store: the node's own store (`local`, its SQLite file) holds the addresses of the
 * blocks this node owns; the cluster (`tier`, a ClusterTier: the Kubernetes API or etcd) holds
 * who owns which block, each range's block size, range admissions, liveness and the published
 * allocations.
 *
 * How the Store contract maps onto the two tiers:
 * - allocate, release, relocate, unrest, cursor, cooldown and describe commit to `local` only: the
 *   common ADD and DEL make no request to the cluster and work while it is away;
 * - a `claim` commit claims the block in the cluster first (its range pinned there once, cached):
 *   a block another node claimed is a conflict; an `unclaim` removes the claim only while it is
 *   still exactly this node's record (uid, read again for its current version), never another
 *   node's (ABA): a claim gone or replaced is a conflict; a commit's `precededBy` (other ledgers of
 *   the node's file) is made in its local transaction (a claim's: after the cluster's claim);
 * - an allocation in a block of a range split in the cluster (its description carries a block
 *   size) needs this node's claim of the block: otherwise the commit is a conflict naming why (no
 *   address is handed out in another node's block on this store); releases need no claim, so a DEL
 *   in a block whose claim vanished still works; nor do loan and use ledgers (loan-key.ts, holding-key.ts);
 * - a `describe` with a block size on a range pool pins the range in the cluster (tiered/range-pins.ts):
 *   a range already split differently there writes the cluster's size into the local description and
 *   answers a conflict, so the allocator's next look at `pools(range)` sees the stored size (and refuses
 *   a config that asks for another);
 * - `pools(<range>#)` answers this node's blocks only (read from the cluster once per range, then
 *   cached), with local counts; the whole range is read only through `cluster.owners.rangeBlocks`,
 *   which block placement calls when this node's blocks are full and probing what this node knows
 *   (`cluster.owners.knownBlocks`: no other node's claim read) found no block; findByOwner, list, readLedger: local;
 * - blocks whose local picture changed are published in batches every `publishIntervalMs` on the
 *   clock (tiered/publisher.ts), retried while the cluster is away; a change its publication covers
 *   already (an announced address taken, one released) waits up to `publishSettleMs`; `flush`
 *   publishes every pending block now; the first run after `start` publishes every block this node
 *   holds, so what changed before a restart and was not published yet is not lost;
 * - this node's claims are compared with the cluster's (tiered/claims.ts) at each change the watch
 *   of its claims shows (ClusterTier.watchClaims, opened by `start`: tiered/chores.ts), on the next
 *   turn of the clock, and every `claimCheckMs`; one vanished is claimed again or halts its range;
 *   a block nobody holds is claimed only if its publication allows (both: tiered/reclaim.ts). With
 *   the watches open and synced a check sends nothing unless a claim is lost; without them (the
 *   cluster away, or a tier that has none), each check lists this node's claims and reads its spaces;
 * - before its first allocation or claim in a block, the node's file is compared with what it
 *   published (tiered/file-check.ts): until then those commits throw TRY_AGAIN saying why; a claim
 *   of this node the file never recorded, where it holds nothing, is given back (tiered/stray-claims.ts);
 * - `cluster.handover` hands a block over to the node holding its addresses in use (tiered/handover.ts).
 *
 * Admission (AdmissionGuard) across nodes, without a request per ADD: `spaces` are the cluster's;
 * a commit that claims a block checks in the cluster that its range is still admitted, and the
 * watch of the address spaces (or, without one, the periodic check) judges the guards seen again;
 * a guard found retired makes every commit carrying it a conflict with `admissionLost` until the
 * range is admitted again (through `spaces.admit`). So an admission lost elsewhere stops this
 * node's allocations as soon as the watch shows it (within one check without one).
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isBlockKey, rangePoolListed, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import { isUseKey } from '../../ipam/holding-key.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import type { ClusterTier } from './cluster-tier.ts';
import type {
  AdmissionGuard,
  AllocationFilter,
  CommitOptions,
  CommitResult,
  LedgerCommit,
  LedgerOp,
  LedgerRead,
  LedgerSummary,
  Revision,
  Store,
  StoreCluster,
} from '../store.ts';
import { TieredAdmissions } from './admissions.ts';
import { ClaimAnnouncements } from './claim-announcements.ts';
import { storeMembership } from './store-membership.ts';
import { type ClaimCommitParts, commitClaim, conflict } from './claim-commit.ts';
import { TieredChores } from './chores.ts';
import { TieredClaims } from './claims.ts';
import { TieredHandover } from './handover.ts';
import { ClaimKeeper } from './reclaim.ts';
import { TieredPublisher } from './publisher.ts';
import { RangePins } from './range-pins.ts';
import { notClaimedHere } from './stray-claims.ts';
import { forgetNodeBlocks, heldByNode, ownBlocks, rangeOwners, recordFromKey } from './ranges.ts';

export interface TieredStoreOptions {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  readonly clock: Clock;
  readonly notice?: (message: string) => void;
  /** How often changed blocks are published, ms (default 2000). */
  readonly publishIntervalMs?: number;
  /** Addresses a block's publication announces as handed out next (tiered/publisher.ts; default 16). */
  readonly publishAhead?: number;
  /** Most time a change that leaves its block covered waits for its write, ms (default 600000). */
  readonly publishSettleMs?: number;
  /** How often this node's claims are compared with the cluster's, ms (default 10000). */
  readonly claimCheckMs?: number;
}

const ADDRESSES_CHANGE = new Set<LedgerOp['op']>(['allocate', 'release', 'relocate', 'unrest']);

export class TieredStore implements Store {
  readonly description: string;
  readonly tier: ClusterTier;
  readonly cluster: StoreCluster;
  readonly listPage?: NonNullable<Store['listPage']>; // this node's allocations a page at a time: local's
  readonly #local: Store;
  readonly #node: string;
  readonly #notice: (message: string) => void;
  readonly #claims: TieredClaims;
  readonly #keeper: ClaimKeeper;
  readonly #publisher: TieredPublisher;
  /** Claims of this node being published before their blocks' first addresses (claim-announcements.ts). */
  readonly #announcements = new ClaimAnnouncements();
  readonly #ranges: RangePins;
  readonly #admissions: TieredAdmissions;
  readonly #chores: TieredChores; // publication, the claim check and its watches, `start` to `close`
  readonly #claimParts: ClaimCommitParts; // what a `claim` commit needs (tiered/claim-commit.ts)
  #clusterProblem: string | undefined; // the cluster's failure at the last ping

  /** `extend`: what a backend adds to the cluster capability (etcd: its history and old layout). */
  constructor(o: TieredStoreOptions, extend: (cluster: StoreCluster) => StoreCluster = (cluster) => cluster) {
    this.#local = o.local;
    this.tier = o.tier;
    this.#node = o.node;
    this.#notice = o.notice ?? (() => undefined);
    this.description = `${o.local.description}, blocks in ${o.tier.description}`;
    const listPage = o.local.listPage;
    if (listPage !== undefined) this.listPage = (filter, page) => listPage.call(o.local, filter, page);
    this.#claims = new TieredClaims(o.tier, o.node);
    this.#ranges = new RangePins(o.local, o.tier);
    const rangeOf = async (key: string) =>
      (await this.#ranges.rangeOf(rangePoolOfKey(key))) ?? this.tier.pinRange(recordFromKey(key));
    const republish = (key: string) => this.#publisher.vanished(key); // its publication vanished, or its claim
    const claiming = (key: string) => this.#announcements.claiming(key);
    const compared = () => this.#publisher.fileCheck.compared;
    const kept = { claims: this.#claims, notice: this.#notice, rangeOf };
    this.#keeper = new ClaimKeeper({ ...o, ...kept, claiming, republish, compared });
    this.#publisher = new TieredPublisher({
      ...{ local: o.local, tier: o.tier, node: o.node, clock: o.clock },
      holds: (key) => this.#claims.held(key),
      // A range never split has no loan ledgers: 128 makes no key one.
      isLoan: async (key) => isLoanKey(key, (await this.#ranges.blockPrefix(rangePoolOfKey(key))) ?? 128),
      everyOwnBlock: async () => (await this.#claims.loadAll()).map((c) => c.key),
      notice: this.#notice,
      ahead: o.publishAhead,
      settleMs: o.publishSettleMs,
      written: (key) => this.#announcements.written(key),
    });
    this.#admissions = new TieredAdmissions(o.tier, (space) => heldByNode(o.local, o.node, space));
    const mark = (key: string) => this.#publisher.mark(key);
    const publish = (key: string) => this.#publisher.publishBlock(key);
    const parts = { claims: this.#claims, keeper: this.#keeper, admissions: this.#admissions, ranges: this.#ranges };
    this.#claimParts = { ...o, ...parts, mark, publish, announcements: this.#announcements };
    this.#chores = new TieredChores({
      ...o,
      ...parts,
      publish: () => this.#publisher.run(),
      republish,
      publishMs: o.publishIntervalMs ?? 2000,
      checkMs: o.claimCheckMs ?? 10_000,
      notice: this.#notice,
    });
    this.cluster = extend({
      membership: storeMembership(o.tier.membership, this.#claims, this.#publisher, this.#chores),
      spaces: this.#admissions.spaces,
      owners: {
        ...rangeOwners(
          {
            local: this.#local,
            tier: this.tier,
            claims: this.#claims,
            compared: () => this.#publisher.fileCheck.compared,
          },
          (p) => this.#ranges.rangeOf(p),
        ),
        holders: () => this.tier.claimHolders(),
        forgetNode: (node) => forgetNodeBlocks(this.tier, node),
        settleClaims: () => this.#publisher.fileCheck.run(),
      },
      records: o.tier,
      fileCheck: () => this.#publisher.fileCheck.status(),
      whenRestored: (listener) => this.#publisher.fileCheck.whenRestored(listener),
      ...defined({ holdings: o.tier.holdings, handover: this.#handover(o) }),
    });
  }

  #handover(o: TieredStoreOptions): TieredHandover | undefined {
    const mark = (key: string) => this.#publisher.mark(key);
    return o.tier.moveClaim === undefined ? undefined : new TieredHandover({ ...o, claims: this.#claims, mark });
  }

  /**
   * Compares the node's file with its publications, opens the tier's watches, and starts
   * publication and the claim check on the clock (tiered/chores.ts).
   */
  start(): void {
    void this.#publisher.fileCheck.run();
    this.#chores.start();
  }

  /** Publishes every pending block now, covered or not (`due`: only those a run on the clock would). */
  flush(o: { due?: boolean } = {}): Promise<void> {
    return this.#publisher.run({ all: o.due !== true });
  }

  /** Blocks waiting to be published. */
  get pendingPublication(): number {
    return this.#publisher.pending;
  }

  /**
   * Holds this node's claims and guards to the cluster's, after any check running; tells `notice`,
   * never throws (the next check retries).
   */
  check(): Promise<void> {
    return this.#chores.check();
  }

  readLedger(pool: string, knownRevision?: Revision): Promise<LedgerRead> {
    return this.#local.readLedger(pool, knownRevision);
  }

  async commit(
    pool: string,
    expected: Revision,
    ops: readonly LedgerOp[],
    guard?: AdmissionGuard,
    options?: CommitOptions,
  ): Promise<CommitResult> {
    const refused = guard === undefined ? undefined : this.#admissions.refusal(guard);
    if (refused !== undefined) return conflict(refused, true);
    if (!isBlockKey(pool)) {
      const described = ops.find((op) => op.op === 'describe' && op.description.blockPrefix !== undefined);
      if (described?.op === 'describe') return this.#ranges.commitDescribed(pool, expected, ops, described);
      return this.#local.commit(pool, expected, ops, undefined, options);
    }
    const allocates = ops.some((op) => op.op === 'allocate');
    if (allocates || ops.some((op) => op.op === 'claim')) await this.#publisher.fileCheck.compare(pool, allocates);
    if (ops.some((op) => op.op === 'claim'))
      return this.#committed(
        pool,
        await commitClaim(this.#claimParts, pool, expected, ops, guard, options?.precededBy),
        ops,
        options,
      );
    if (ops.some((op) => op.op === 'unclaim')) return this.#keeper.unclaim(pool, expected, ops);
    if (ops.some((op) => op.op === 'allocate')) {
      const refused = await this.#refusal(pool);
      if (refused !== undefined) return conflict(refused);
    }
    return this.#committed(pool, await this.#local.commit(pool, expected, ops, undefined, options), ops, options);
  }

  #committed(pool: string, result: CommitResult, ops: readonly LedgerOp[], options?: CommitOptions): CommitResult {
    if (result.kind !== 'committed') return result;
    if (ops.some((op) => ADDRESSES_CHANGE.has(op.op))) this.#publisher.mark(pool);
    for (const c of options?.precededBy ?? []) this.#publisher.mark(c.ledger);
    return result;
  }

  /** Why an allocation in block `key` may not be made on this node; undefined when it may. */
  async #refusal(key: string): Promise<string | undefined> {
    const rangePool = rangePoolOfKey(key);
    this.#keeper.refuseHalted(rangePool);
    const unannounced = await this.#announcements.refusal(key);
    if (unannounced !== undefined) throw new WarrenError('TRY_AGAIN', unannounced);
    if (this.#claims.vanished(key))
      return `the claim of block ${key} by node ${this.#node} vanished from ${this.tier.description}`;
    const blockPrefix = await this.#ranges.blockPrefix(rangePool);
    if (blockPrefix === undefined) return undefined; // a range never split in the cluster
    // A loan ledger (lent by another node: allocator/lending/) or a use ledger (holdings/) is this node's alone.
    if (isLoanKey(key, blockPrefix) || isUseKey(key)) return undefined;
    try {
      await this.#claims.load(rangePool);
    } catch {
      // The cluster is away and this range's claims were never read in this process (a restart):
      // the local record of the claims this node made stands in until the cluster answers.
      const read = await this.#local.readLedger(key);
      return read.kind === 'snapshot' && read.affinity === this.#node
        ? undefined
        : `block ${key} is not claimed by node ${this.#node} (${this.tier.description} cannot be reached to check)`;
    }
    if (!this.#claims.holds(key)) return await notClaimedHere(this.#local, key, this.#node);
    // Claimed for this node, but never by it (its file does not record it): stray-claims.ts.
    const read = await this.#local.readLedger(key);
    if (read.kind === 'snapshot' && read.affinity === this.#node) return undefined;
    return `block ${key} is claimed for node ${this.#node}, which never recorded claiming it: not handed out from`;
  }

  async commitAll(commits: readonly LedgerCommit[]): Promise<CommitResult> {
    const result = (await this.#local.commitAll?.(commits)) ?? conflict(`${this.#local.description} cannot`);
    if (result.kind === 'committed') for (const c of commits) this.#publisher.mark(c.ledger);
    return result;
  }

  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.#local.findByOwner(owner);
  }

  list(filter?: AllocationFilter): Promise<Allocation[]> {
    return this.#local.list(filter);
  }

  async ledgers(prefix?: string): Promise<LedgerSummary[]> {
    const local = await this.#local.ledgers(prefix);
    const rangePool = rangePoolListed(prefix); // `<range pool>#` exactly: the blocks of one range
    const shown = local.map((p) => {
      // Not this node's to use: a block whose claim vanished, or one in a handover (tiered/handover.ts).
      if (!isBlockKey(p.ledger) || !(this.#claims.vanished(p.ledger) || this.#claims.handingOver(p.ledger))) return p;
      const { affinity: _gone, ...rest } = p;
      return rest;
    });
    if (rangePool === undefined) return shown;
    return ownBlocks(this.#claims, rangePool, shown, this.#publisher.fileCheck.compared);
  }

  /**
   * Checks both tiers. Only the node's store failing, or a range halted (tiered/reclaim.ts), throws:
   * CNI STATUS and readiness follow ping, and a node with room in its own blocks serves ADD and DEL
   * while the cluster is away. The cluster being away is told to `notice` once per outage and
   * answered by `clusterProblem`.
   */
  async ping(): Promise<void> {
    await this.#local.ping();
    this.#keeper.refuseHalted(); // a halted range: not ready, naming it
    try {
      await this.tier.ping();
      this.#clusterProblem = undefined;
    } catch (error) {
      const problem = `${this.tier.description} cannot be reached: ${messageOf(error)}`;
      if (this.#clusterProblem === undefined)
        this.#notice(`${problem}; ADD and DEL in the blocks node ${this.#node} holds go on`);
      this.#clusterProblem = problem;
    }
  }

  /** Why the cluster could not be reached at the last ping; undefined when it answered. */
  clusterProblem(): string | undefined {
    return this.#clusterProblem;
  }

  async close(): Promise<void> {
    this.#chores.stop();
    await this.#publisher.run({ all: true });
    await this.#local.close();
    await this.tier.close();
  }
}
