/**
 * The cluster tier on the Kubernetes API (cluster-tier.ts): custom resources of group warren.dev
 * (deploy/crds/) for ranges, blocks and their published allocations, address requests and address
 * spaces, and coordination.k8s.io Leases in the agent's namespace for membership and chores.
 *
 * How each guarantee of ClusterTier is kept:
 * - one claim per block: a claim creates the WarrenBlock named `blockName(key)` (names.ts), so the
 *   API server lets one creation of it succeed and answers AlreadyExists to the others (one request);
 *   where blocks grow, no two claims overlap either (kubernetes/block-claims.ts); a range found with
 *   no block free is marked so on its WarrenRange, and every give-back takes the mark off
 *   (kubernetes/fully-claimed.ts), so a full range is known in one GET;
 * - give back only what was claimed (ABA): `unclaim` deletes with the preconditions uid and
 *   resourceVersion; a block given back and claimed again is a new object with a new uid. The block
 *   object is the claim alone (spec; no status), changed only by a handover (`moveClaim`, guarded);
 * - what a listing of claims reads does not grow with the addresses: a block's published allocations
 *   are another object, its WarrenBlockPublication (same name, same labels), so `claimsIn` and
 *   `claimsOf` read claims only (a few hundred bytes each) and `published` reads the publications;
 * - a range's block size is pinned by whoever creates its WarrenRange first: the stored one is read
 *   first (and created when absent), once per tier, since it never changes once made;
 * - listings page on the server (`limit`, `continue`) and select by label on the server
 *   (`warren.dev/node`, `warren.dev/range`): what `claimsOf(node)` reads is that node's blocks;
 * - `publish` writes the block's publication (kubernetes/publications.ts: one request, two for a block's
 *   first), only while the block is claimed by the publishing node; `unclaim` deletes it after the
 *   claim (one request more when this tier published it, a read and a delete when not); a
 *   borrower's loan ledger is published by `publishLoan` (no claim to check) and `withdraw`;
 * - address requests are kubernetes/requests.ts's: an update is a PUT guarded by the version it was
 *   read at, and the server selects open requests and each lender's by label; what the allocator
 *   reads of them periodically it reads from watches of what it needs (kubernetes/request-watch.ts);
 * - a node's claims, the address spaces, this node's Lease and the state object are watched
 *   (kubernetes/tier-watches.ts: listed once, then watched from the version reached, listed again
 *   only after 410 Gone), and `ping` answers from them: a watch synced and open (its answer's head
 *   arrived, not one being opened again) means the API server answered; only when none is does
 *   `ping` send a request (a listing of at most one range).
 * Every failure to reach the API server is TRY_AGAIN naming it (api-client.ts).
 *
 * An API server that lost its data (kubernetes/continuity.ts: an answer's resourceVersion gone backwards,
 * the store's identity object gone or replaced, this node's live Lease gone or gone back, or this
 * node's name taken) halts the tier: every write of its Resources but the identity object's is
 * refused with TRY_AGAIN naming why, `ping` throws the same, and membership says it (`halted`),
 * until an operator accepts the store; `accept` claims again the blocks this node's file holds
 * (`onAccept`, as on etcd).
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type {
  AddressRequest,
  BlockClaim,
  ClaimState,
  ClaimsSeen,
  ClusterTier,
  ClusterWatch,
  Grant,
  Page,
  PublishedBlock,
  RangeRecord,
  SpacesSeen,
  UnclaimResult,
} from '../tiered/cluster-tier.ts';
import { KubeApiClient } from './api-client.ts';
import { KubeHoldings } from './holdings.ts';
import { KubePublications } from './publications.ts';
import { KubeSpaces } from './spaces.ts';
import { KubeClusterState } from './cluster-state.ts';
import { KubeContinuity } from './continuity.ts';
import { LeaseMembership } from './lease-membership.ts';
import { NODE_LABEL, RANGE_LABEL, blockName, labelValue, rangeName, selectorOf } from './names.ts';
import { claimBlock, moveClaim, standingClaims } from './block-claims.ts';
import { FullyClaimedMarks } from './fully-claimed.ts';
import { isPagedRange } from '../tiered/ranges.ts';
import { KubeRequests } from './requests.ts';
import { KubeRequestViews } from './request-watch.ts';
import { type KubeTierOptions, checkTierOptions } from './tier-options.ts';
import { KubeTierWatches } from './tier-watches.ts';
import { claimOfObject, rangeObject, rangeOf } from './objects.ts';
import { FULL_LIST_PAGE, Resource, coreKind, leaseKind, warrenKind } from './resources.ts';
import type { AcceptReport } from '../store.ts';
import type { RecordView, RequestChange, RequestScope } from '../cluster.ts';

/** Rounds of read-and-write against an object that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 5;

export type { KubeTierOptions };

export async function openKubeTier(o: KubeTierOptions): Promise<KubeTier> {
  checkTierOptions(o);
  const api = await KubeApiClient.open({
    kubeConfig: o.kubeConfig,
    ...defined({
      requestTimeoutMs: o.requestTimeoutMs,
      maxAnswerBytes: o.maxAnswerBytes,
      requests: o.requests,
      userAgent: o.userAgent,
    }),
  });
  return new KubeTier(api, o);
}

export class KubeTier implements ClusterTier {
  readonly description: string;
  readonly membership: LeaseMembership;
  readonly spaces: KubeSpaces;
  readonly holdings: KubeHoldings;
  readonly #api: KubeApiClient;
  readonly #ranges: Resource;
  readonly #blocks: Resource;
  readonly #requests: KubeRequests;
  readonly #publications: KubePublications;
  readonly #watch: KubeRequestViews;
  readonly #spaces: Resource;
  /** This node's claims and the address spaces, watched; what `ping` answers from. */
  readonly #watches: KubeTierWatches;
  /** Range records read or made: a record never changes once made, so it is read once. */
  readonly #pinned = new Map<string, RangeRecord>();
  readonly #continuity: KubeContinuity;
  /** Which ranges a node found with no block free (an annotation of their WarrenRange). */
  readonly #fullyClaimed: FullyClaimedMarks;
  readonly #state: KubeClusterState;
  /** What the operator's accept writes back (onAccept); nothing until the store on this tier says. */
  #republish: (node: string) => Promise<AcceptReport> = async () => ({ addresses: 0, blocks: 0, conflicts: [] });

  constructor(api: KubeApiClient, o: KubeTierOptions) {
    this.#api = api;
    this.description = `Kubernetes API ${api.server} (warren.dev custom resources; Leases in namespace ${o.namespace})`;
    const continuity = new KubeContinuity(`the Kubernetes API server ${api.server}`, () => o.clock.now(), o.debug);
    this.#continuity = continuity;
    // Every Resource of the tier reports the revisions it sees; all but the state object's refuse writes while halted.
    const guarded = continuity.observer(true);
    this.#ranges = new Resource(api, warrenKind('warrenranges'), guarded);
    this.#blocks = new Resource(api, warrenKind('warrenblocks'), guarded);
    this.#fullyClaimed = new FullyClaimedMarks(this.#ranges, o.clock);
    const requests = new Resource(api, warrenKind('warrenaddressrequests'), guarded);
    this.#requests = new KubeRequests(requests);
    const clusterState = new Resource(api, warrenKind('warrenclusterstates'), continuity.observer(false));
    this.#state = new KubeClusterState(clusterState, continuity, () => o.clock.now(), o.identity);
    this.#watch = new KubeRequestViews(requests, o.clock);
    this.#publications = new KubePublications({
      publications: new Resource(api, warrenKind('warrenblockpublications'), guarded),
      blocks: this.#blocks,
      notice: o.notice,
    });
    this.#spaces = new Resource(api, warrenKind('warrenaddressspaces'), guarded);
    this.#watches = new KubeTierWatches(o.clock);
    this.spaces = new KubeSpaces({ spaces: this.#spaces, ranges: this.#ranges, blocks: this.#blocks });
    this.holdings = new KubeHoldings(api, o.clock, continuity.observer(false));
    this.membership = new LeaseMembership({
      leases: new Resource(api, leaseKind(o.namespace), guarded),
      nodes: new Resource(api, coreKind('nodes')),
      watches: this.#watches,
      leaseSeconds: o.leaseSeconds,
      pingSeconds: o.pingSeconds,
      clock: o.clock,
      continuity,
      state: this.#state,
      holders: () => this.claimHolders(),
      republish: (node) => this.#republish(node),
      notice: o.notice,
    });
  }

  /**
   * Checks at start that the store is the one this agent knew (its identity object: created in a
   * store that never had one); a store that lost its data halts the tier here, before anything is
   * written. Nothing is thrown for a halt: `membership.halted()` says it.
   */
  async verifyStore(): Promise<void> {
    await this.#state.verify();
  }

  /** Sets what an accept of a store that lost its data writes back: the node's claims. */
  onAccept(republish: (node: string) => Promise<AcceptReport>): void {
    this.#republish = republish;
  }

  async pinRange(record: RangeRecord): Promise<RangeRecord> {
    const known = this.#pinned.get(record.pool);
    if (known !== undefined) return known;
    const name = rangeName(record.pool);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      // Read first: every node but the first finds the range recorded, in one request.
      const stored = rangeOf(await this.#ranges.get(`read range ${record.pool}`, name));
      if (stored !== undefined) {
        if (stored.pool !== record.pool)
          throw new WarrenError(
            'IO_FAILURE',
            `the WarrenRange ${name} records range ${stored.pool}, not ${record.pool}`,
          );
        return this.#pin(stored);
      }
      const created = await this.#ranges.create(`record range ${record.pool}`, rangeObject(name, record));
      if (created.kind === 'created') return this.#pin(rangeOf(created.object) ?? record);
    }
    throw new WarrenError('TRY_AGAIN', `the record of range ${record.pool} kept changing; try again`);
  }

  /** A range's record never changes once made: it is read once per tier. */
  #pin(record: RangeRecord): RangeRecord {
    this.#pinned.set(record.pool, record);
    return record;
  }

  claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined> {
    return claimBlock(this.#blocks, range, key, node);
  }

  readonly moveClaim = (claim: BlockClaim, state: ClaimState) => moveClaim(this.#blocks, claim, state);

  async claimOf(key: string): Promise<BlockClaim | undefined> {
    const claim = claimOfObject(await this.#blocks.get(`read block ${key}`, blockName(key)));
    return claim === undefined || claim.key !== key ? undefined : claim;
  }

  async claimsOf(node: string, pool?: string): Promise<BlockClaim[]> {
    const labels = {
      [NODE_LABEL]: labelValue(node),
      ...(pool === undefined ? {} : { [RANGE_LABEL]: labelValue(pool) }),
    };
    const items = await this.#blocks.listAll(`list the blocks of node ${node}`, selectorOf(labels));
    // A grown block that lost to an overlapping one claimed first (its maker died before it looked) is given back.
    return (await standingClaims(this.#blocks, items)).filter(
      (c) => c.node === node && (pool === undefined || rangePoolOfKey(c.key) === pool),
    );
  }

  watchClaims(node: string): ClusterWatch<ClaimsSeen> {
    return this.#watches.claims(this.#blocks, node);
  }

  watchSpaces(): ClusterWatch<SpacesSeen> {
    return this.#watches.spaces(this.#spaces);
  }

  readonly watchPublications = (node: string) => this.#watches.publications(this.#publications.resource, node);

  async claimHolders(): Promise<string[]> {
    const items = await this.#blocks.listAll('list the nodes holding blocks', '');
    const nodes = new Set<string>();
    for (const item of items) {
      const claim = claimOfObject(item);
      if (claim !== undefined) nodes.add(claim.node);
    }
    return [...nodes].sort();
  }

  async claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>> {
    const got = await this.#blocks.list(
      `list the blocks of range ${pool}`,
      selectorOf({ [RANGE_LABEL]: labelValue(pool) }),
      page?.limit ?? FULL_LIST_PAGE,
      page?.continue,
    );
    const items = got.items
      .map(claimOfObject)
      .filter((c): c is BlockClaim => c !== undefined && rangePoolOfKey(c.key) === pool);
    return { items, ...defined({ continue: got.continue }) };
  }

  async unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    const name = blockName(claim.key);
    const done = await this.#blocks.remove(`give back block ${claim.key}`, name, {
      uid: claim.uid,
      resourceVersion: claim.version,
    });
    if (done !== 'deleted') return done === 'conflict' ? 'changed' : 'gone';
    await this.#publications.unpublish(claim);
    // A block is free again: off with the mark (read only on ranges of more than a page of claims).
    const pinned = this.#pinned.get(rangePoolOfKey(claim.key));
    if (pinned === undefined || isPagedRange(pinned))
      await this.#fullyClaimed.mark(rangePoolOfKey(claim.key), false).catch(() => undefined); // a hint: trusted 10 min
    return 'released';
  }

  fullyClaimed(pool: string): Promise<boolean> {
    return this.#fullyClaimed.fullyClaimed(pool);
  }

  markFullyClaimed(pool: string, full: boolean): Promise<void> {
    return this.#fullyClaimed.mark(pool, full);
  }

  async publish(block: PublishedBlock): Promise<void> {
    // A block's publication always checks its claim: only publishLoan skips that.
    const { loan: _loan, ...claimed } = block;
    await this.#publications.publish(claimed);
  }

  async publicationOf(key: string): Promise<PublishedBlock | undefined> {
    return this.#publications.of(key);
  }

  async publishLoan(block: PublishedBlock): Promise<void> {
    await this.#publications.publish({ ...block, loan: true });
  }

  async withdraw(key: string, node: string): Promise<void> {
    await this.#publications.withdraw(key, node);
  }

  async published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    return this.#publications.list(filter, page);
  }

  ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    return this.#requests.ask(pool, node, wanted);
  }

  requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    return this.#requests.requestOf(pool, node);
  }

  openRequests(pool?: string): Promise<AddressRequest[]> {
    return this.#requests.openRequests(pool);
  }

  requestsLentBy(lender: string): Promise<AddressRequest[]> {
    return this.#requests.requestsLentBy(lender);
  }

  updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    return this.#requests.updateRequest(request, grants, wanted);
  }

  watchRequests(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    return this.#watch.view(scope, listener);
  }

  async ping(): Promise<void> {
    // Refused while halted; a listing's revision gone backwards halts.
    this.#continuity.refuseWhileHalted();
    if (this.#watches.reachable()) return; // a watch open and synced: the API server answered it
    await this.#ranges.list('reach the API server', '', 1);
  }

  async close(): Promise<void> {
    this.#watch.close();
    this.#watches.close();
    this.holdings.close();
    this.#api.close();
  }
}
