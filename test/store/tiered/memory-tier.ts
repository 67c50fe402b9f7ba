/**
 * A ClusterTier in memory (src/store/tiered/cluster-tier.ts), for unit tests of the two-tier store: one
 * MemoryTier object is one cluster, which several TieredStores may share. `session()` gives another
 * agent's connection to the same cluster (its own membership view); `away` makes every call fail
 * with TRY_AGAIN, as an API server that cannot be reached.
 *
 * Guarantees (the contract's):
 * - a block is claimed at most once: `claim` of a claimed block answers undefined;
 * - `unclaim` removes a claim only at exactly its uid and version ('changed' otherwise, 'gone'
 *   when there is none): a block given back and claimed again is never removed by the old claim;
 *   `moveClaim` rewrites one (a handover) only there too, keeping its uid;
 * - a range record is created once, the first block size wins;
 * - every listing answers at most `limit` records (default 500) and a `continue` when more remain;
 * - versions are one counter for the whole cluster (as resourceVersion), strictly increasing;
 * - spaces: an admission applies only if no admission of the space changed and no block of a
 *   retired range was claimed, given back or published since the reading; `held` counts each
 *   claimed block at least 1 (as the Kubernetes tier does);
 * - membership and chores on the injected Clock (memory-membership.ts);
 * - watches (`watchClaims`, `watchSpaces`) show the cluster as it is now, at its version, and call
 *   their listeners on a later turn after each change, as a watch's event comes; while the cluster
 *   is away they show nothing (undefined), as a watch cut; `holdClaimWatches` makes them lag.
 */
import type { Clock } from '../../../src/core/clock.ts';
import { WarrenError } from '../../../src/core/errors.ts';
import { blockKeysOverlap, rangePoolOfKey } from '../../../src/ipam/blocks.ts';
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
} from '../../../src/store/tiered/cluster-tier.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from '../../../src/store/store.ts';
import type { HoldingRecord } from '../../../src/store/cluster-holdings.ts';
import { type RecordView, type RequestChange, type RequestScope, inRequestScope } from '../../../src/store/cluster.ts';
import { MemoryHoldings } from './memory-holdings.ts';
import { MemoryCluster, MemoryMembership } from './memory-membership.ts';
import type { Recovery } from '../../../src/store/tiered/recovery.ts';

const DEFAULT_LIMIT = 500;

/** Everything the agents of one memory cluster share. */
class ClusterState {
  readonly members: MemoryCluster;
  away = false;
  version = 0;
  uid = 0;
  readonly ranges = new Map<string, RangeRecord>();
  readonly claims = new Map<string, BlockClaim>();
  /** Ranges a node found with no block free, and no block given back since (ClusterTier.fullyClaimed). */
  readonly fullyClaimed = new Set<string>();
  readonly published = new Map<string, PublishedBlock>();
  /** `pool \0 node` → the request. */
  readonly requests = new Map<string, AddressRequest>();
  /** Space → admitted range pools. */
  readonly admitted = new Map<string, Set<string>>();
  /** Space → version at which its admissions last changed. */
  readonly spaceWritten = new Map<string, number>();
  /** Range pool → version at which one of its blocks was last claimed, given back or published. */
  readonly rangeWritten = new Map<string, number>();
  /** Calls answered, by method: what a test counts. */
  readonly calls = new Map<string, number>();
  /** The views of requests open (watchRequests), each told of the requests written, as a watch would. */
  readonly requestViews = new Set<MemoryRequestView>();

  /** Told after each change of a claim (watchClaims), of the node whose claim changed. */
  readonly claimListeners = new Set<(node: string) => void>();
  /** Told after each change of an admission (watchSpaces). */
  readonly spaceListeners = new Set<() => void>();
  /** What claim watches show while held (holdClaimWatches): the cluster's claims and version then. */
  heldClaims: { claims: BlockClaim[]; version: number } | undefined;

  /** A claim of `node` changed: the watches are told on a later turn, as a watch's event comes. */
  changedClaim(node: string): void {
    for (const listener of [...this.claimListeners]) queueMicrotask(() => listener(node));
  }

  changedSpace(): void {
    for (const listener of [...this.spaceListeners]) queueMicrotask(() => listener());
  }

  /** A request written (`gone`: deleted): each view is told on a later turn, as a watch's event comes. */
  wroteRequest(request: AddressRequest, gone = false): void {
    for (const view of [...this.requestViews]) queueMicrotask(() => view.told(request, gone));
  }
  /** `key \0 pool` → the holding's record (memory-holdings.ts). */
  readonly holdings = new Map<string, HoldingRecord>();

  constructor(clock: Clock, leaseSeconds: number) {
    this.members = new MemoryCluster(clock, leaseSeconds);
  }

  next(): number {
    this.version += 1;
    return this.version;
  }

  touchRange(pool: string): void {
    this.rangeWritten.set(pool, this.next());
  }
}

/** One page of `items` (sorted by `keyOf`) after the `continue` token, which is the last key answered. */
function pageOf<T>(items: T[], keyOf: (t: T) => string, page?: { limit: number; continue?: string }): Page<T> {
  const limit = page?.limit ?? DEFAULT_LIMIT;
  const after = page?.continue;
  const sorted = items.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  const rest = after === undefined ? sorted : sorted.filter((t) => keyOf(t) > after);
  const chunk = rest.slice(0, limit);
  const last = chunk.at(-1);
  return rest.length > limit && last !== undefined ? { items: chunk, continue: keyOf(last) } : { items: chunk };
}

class MemorySpaces implements AddressSpaces {
  readonly #s: ClusterState;
  readonly #reach: (what: string) => void;

  constructor(state: ClusterState, reach: (what: string) => void) {
    this.#s = state;
    this.#reach = reach;
  }

  async read(space: string): Promise<SpaceReading> {
    this.#reach('spaces.read');
    // As the Kubernetes tier reads it: a claimed block holds what it published, and at least 1 (it
    // may hold addresses not published yet); a range without a claimed block holds nothing.
    const held = new Map<string, number>();
    for (const claim of this.#s.claims.values()) {
      const pool = rangePoolOfKey(claim.key);
      const counts = this.#s.published.get(claim.key)?.counts;
      held.set(pool, (held.get(pool) ?? 0) + Math.max(1, (counts?.allocated ?? 0) + (counts?.resting ?? 0)));
    }
    return { space, revision: this.#s.version, admitted: [...(this.#s.admitted.get(space) ?? [])], held };
  }

  async admit(
    reading: SpaceReading,
    rangePool: string,
    retire: readonly string[],
  ): Promise<AdmissionGuard | undefined> {
    this.#reach('spaces.admit');
    const s = this.#s;
    const since = (v: number | undefined) => (v ?? 0) > reading.revision;
    if (since(s.spaceWritten.get(reading.space)) || retire.some((r) => since(s.rangeWritten.get(r)))) return undefined;
    const admitted = s.admitted.get(reading.space) ?? new Set<string>();
    const changes = !admitted.has(rangePool) || retire.some((r) => admitted.has(r));
    admitted.add(rangePool);
    for (const r of retire) admitted.delete(r);
    s.admitted.set(reading.space, admitted);
    if (changes) s.spaceWritten.set(reading.space, s.next());
    if (changes) s.changedSpace();
    return { space: reading.space, rangePool };
  }
}

export interface MemoryTierOptions {
  readonly clock: Clock;
  /** Lifetime of an announcement not renewed (default 15). */
  readonly leaseSeconds?: number;
}

export class MemoryTier implements ClusterTier {
  readonly description = 'memory cluster tier';
  readonly #s: ClusterState;
  readonly membership: MemoryMembership;
  readonly spaces: MemorySpaces;
  readonly holdings: MemoryHoldings;

  constructor(options: MemoryTierOptions, shared?: ClusterState) {
    this.#s = shared ?? new ClusterState(options.clock, options.leaseSeconds ?? 15);
    this.membership = new MemoryMembership(this.#s.members, () => this.#reach('membership'));
    this.spaces = new MemorySpaces(this.#s, (what) => this.#reach(what));
    const clock = this.#s.members.clock;
    this.holdings = new MemoryHoldings(
      this.#s,
      (what) => this.#reach(what),
      () => clock.now(),
    );
  }

  /** Another agent's connection to this cluster: the same records, its own membership. */
  session(): MemoryTier {
    return new MemoryTier({ clock: this.#s.members.clock }, this.#s);
  }

  /** The cluster cannot be reached while true: every call throws TRY_AGAIN. */
  get away(): boolean {
    return this.#s.away;
  }

  set away(value: boolean) {
    this.#s.away = value;
  }

  /** How many views of requests with a listener are open (watchRequests), every session of the cluster counted. */
  get requestListeners(): number {
    return [...this.#s.requestViews].filter((v) => v.listened).length;
  }

  /** Calls answered so far, by method name (every session of the cluster counted). */
  get calls(): ReadonlyMap<string, number> {
    return this.#s.calls;
  }

  /** Sets the recovery marker, as the first node to notice a store lost its data writes it: for tests. */
  markRecovery(recovery: Recovery | undefined): void {
    this.#s.members.recovery = recovery;
  }

  /**
   * Removes a claim as someone else would (an operator's delete of the block object, which leaves
   * its publication; with `publication`, both, as a cluster restored from before either): for tests
   * of vanished claims.
   */
  deleteClaim(key: string, o: { publication?: boolean } = {}): void {
    const claim = this.#s.claims.get(key);
    this.#s.claims.delete(key);
    if (claim !== undefined) this.#s.changedClaim(claim.node);
    if (o.publication === true) this.#s.published.delete(key);
    this.#s.touchRange(rangePoolOfKey(key));
  }

  /** Removes a publication and tells no watch, as a restore of the cluster's data from before it was written does. */
  dropPublication(key: string): void {
    this.#s.published.delete(key);
  }

  /**
   * Puts a claim (and its publication) back as they stood when read, as a restore of the cluster's
   * data from a snapshot taken then does: for tests of claims resurrected by a restore.
   */
  putBack(claim: BlockClaim, publication?: PublishedBlock): void {
    this.#s.claims.set(claim.key, claim);
    if (publication !== undefined) this.#s.published.set(claim.key, publication);
    this.#s.touchRange(rangePoolOfKey(claim.key));
    this.#s.changedClaim(claim.node);
  }

  /** Removes a node's address request as someone else would (a hand edit, a tool): for tests of lost grants. */
  deleteRequest(pool: string, node: string): void {
    const request = this.#s.requests.get(`${pool}\0${node}`);
    this.#s.requests.delete(`${pool}\0${node}`);
    if (request !== undefined) this.#s.wroteRequest(request, true);
  }

  #reach(what: string): void {
    if (this.#s.away) throw new WarrenError('TRY_AGAIN', `the memory cluster is away (${what})`);
    this.#s.calls.set(what, (this.#s.calls.get(what) ?? 0) + 1);
  }

  async pinRange(record: RangeRecord): Promise<RangeRecord> {
    this.#reach('pinRange');
    const held = this.#s.ranges.get(record.pool);
    if (held !== undefined) return held;
    this.#s.ranges.set(record.pool, record);
    return record;
  }

  async claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined> {
    this.#reach('claim');
    if (rangePoolOfKey(key) !== range.pool) throw new Error(`block ${key} is not in range ${range.pool}`);
    if (this.#s.claims.has(key)) return undefined;
    // Blocks that grow: a claim sharing an address with one made before it is refused.
    if (range.largestBlockPrefix !== undefined && [...this.#s.claims.keys()].some((k) => blockKeysOverlap(k, key)))
      return undefined;
    this.#s.uid += 1;
    const claim: BlockClaim = { key, node, uid: `uid-${this.#s.uid}`, version: String(this.#s.next()) };
    this.#s.claims.set(key, claim);
    this.#s.touchRange(range.pool);
    this.#s.changedClaim(node);
    return claim;
  }

  async claimOf(key: string): Promise<BlockClaim | undefined> {
    this.#reach('claimOf');
    return this.#s.claims.get(key);
  }

  async claimsOf(node: string, pool?: string): Promise<BlockClaim[]> {
    this.#reach('claimsOf');
    return [...this.#s.claims.values()].filter(
      (c) => c.node === node && (pool === undefined || rangePoolOfKey(c.key) === pool),
    );
  }

  watchClaims(node: string): ClusterWatch<ClaimsSeen> {
    const s = this.#s;
    const mine = (claims: Iterable<BlockClaim>) => [...claims].filter((c) => c.node === node);
    return this.#watch(
      s.claimListeners,
      (changed) => changed === node,
      () => {
        const held = s.heldClaims;
        if (held !== undefined) return { claims: mine(held.claims), version: held.version };
        return { claims: mine(s.claims.values()), version: s.version };
      },
    );
  }

  watchSpaces(): ClusterWatch<SpacesSeen> {
    const s = this.#s;
    return this.#watch(
      s.spaceListeners,
      () => true,
      () => ({
        admitted: (space: string) => ({
          ranges: [...(s.admitted.get(space) ?? [])],
          version: s.spaceWritten.get(space) ?? 0,
        }),
      }),
    );
  }

  /** A watch told through `listeners` of the changes `mine` says are its, showing `seen()` while the cluster is not away. */
  #watch<S, C>(listeners: Set<(changed: C) => void>, mine: (changed: C) => boolean, seen: () => S): ClusterWatch<S> {
    const own = new Set<(changed: C) => void>();
    return {
      seen: () => (this.#s.away ? undefined : seen()),
      onChange: (listener) => {
        const told = (changed: C) => {
          if (mine(changed)) listener();
        };
        own.add(told);
        listeners.add(told);
        return () => listeners.delete(told);
      },
      close: () => {
        for (const told of own) listeners.delete(told);
      },
    };
  }

  /**
   * Makes every claim watch show the claims as they are now until the function returned is called
   * (a watch whose events have not come yet): for tests of judgments on a lagging watch.
   */
  holdClaimWatches(): () => void {
    this.#s.heldClaims = { claims: [...this.#s.claims.values()], version: this.#s.version };
    return () => {
      this.#s.heldClaims = undefined;
      for (const node of new Set([...this.#s.claims.values()].map((c) => c.node))) this.#s.changedClaim(node);
    };
  }

  /** Watches open, every session of the cluster counted. */
  get watches(): number {
    return this.#s.claimListeners.size + this.#s.spaceListeners.size;
  }

  async claimHolders(): Promise<string[]> {
    this.#reach('claimHolders');
    return [...new Set([...this.#s.claims.values()].map((c) => c.node))].sort();
  }

  async claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>> {
    this.#reach('claimsIn');
    const inRange = [...this.#s.claims.values()].filter((c) => rangePoolOfKey(c.key) === pool);
    return pageOf(inRange, (c) => c.key, page);
  }

  async unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    this.#reach('unclaim');
    const held = this.#s.claims.get(claim.key);
    if (held === undefined) return 'gone';
    if (held.uid !== claim.uid || held.version !== claim.version) return 'changed';
    this.#s.claims.delete(claim.key);
    // As every tier: the claim's node's publication goes with it, another node's stays.
    if (this.#s.published.get(claim.key)?.node === claim.node) this.#s.published.delete(claim.key);
    this.#s.fullyClaimed.delete(rangePoolOfKey(claim.key));
    this.#s.touchRange(rangePoolOfKey(claim.key));
    this.#s.changedClaim(claim.node);
    return 'released';
  }

  async moveClaim(claim: BlockClaim, state: ClaimState): Promise<BlockClaim | undefined> {
    this.#reach('moveClaim');
    const held = this.#s.claims.get(claim.key);
    if (held === undefined || held.uid !== claim.uid || held.version !== claim.version) return undefined;
    const moved: BlockClaim = { key: claim.key, uid: claim.uid, version: String(this.#s.next()), ...state };
    this.#s.claims.set(claim.key, moved);
    this.#s.changedClaim(held.node);
    if (state.node !== held.node) this.#s.changedClaim(state.node);
    return moved;
  }

  async fullyClaimed(pool: string): Promise<boolean> {
    this.#reach('fullyClaimed');
    return this.#s.fullyClaimed.has(pool);
  }

  async markFullyClaimed(pool: string, full: boolean): Promise<void> {
    this.#reach('markFullyClaimed');
    if (full) this.#s.fullyClaimed.add(pool);
    else this.#s.fullyClaimed.delete(pool);
  }

  async publish(block: PublishedBlock): Promise<void> {
    this.#reach('publish');
    const held = this.#s.claims.get(block.key);
    if (held === undefined || held.node !== block.node || block.loan === true)
      throw new WarrenError('TRY_AGAIN', `block ${block.key} is not claimed by ${block.node}`);
    // A publication is its own record (as on Kubernetes): the claim's version stays.
    this.#s.published.set(block.key, block);
    this.#s.rangeWritten.set(rangePoolOfKey(block.key), this.#s.version);
  }

  async publishLoan(block: PublishedBlock): Promise<void> {
    this.#reach('publishLoan');
    // No claim names a loan ledger: the address's latest borrower replaces what was published.
    this.#s.published.set(block.key, { ...block, loan: true });
    this.#s.rangeWritten.set(rangePoolOfKey(block.key), this.#s.version);
  }

  async withdraw(key: string, node: string): Promise<void> {
    this.#reach('withdraw');
    if (this.#s.published.get(key)?.node === node) this.#s.published.delete(key);
  }

  async publicationOf(key: string): Promise<PublishedBlock | undefined> {
    this.#reach('publicationOf');
    return this.#s.published.get(key);
  }

  async published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    this.#reach('published');
    const matching = [...this.#s.published.values()].filter(
      (p) =>
        (filter.pool === undefined || rangePoolOfKey(p.key) === filter.pool) &&
        (filter.node === undefined || p.node === filter.node),
    );
    return pageOf(matching, (p) => p.key, page);
  }

  async ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    this.#reach('ask');
    const key = `${pool}\0${node}`;
    const request: AddressRequest = {
      pool,
      node,
      wanted,
      grants: this.#s.requests.get(key)?.grants ?? [],
      version: String(this.#s.next()),
    };
    this.#s.requests.set(key, request);
    this.#s.wroteRequest(request);
    return request;
  }

  async requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    this.#reach('requestOf');
    return this.#s.requests.get(`${pool}\0${node}`);
  }

  async openRequests(pool?: string): Promise<AddressRequest[]> {
    this.#reach('openRequests');
    return [...this.#s.requests.values()].filter((r) => r.wanted > 0 && (pool === undefined || r.pool === pool));
  }

  async requestsLentBy(lender: string): Promise<AddressRequest[]> {
    this.#reach('requestsLentBy');
    return [...this.#s.requests.values()].filter((r) => r.grants.some((g) => g.lender === lender));
  }

  async updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    this.#reach('updateRequest');
    const key = `${request.pool}\0${request.node}`;
    if (this.#s.requests.get(key)?.version !== request.version) return undefined;
    const updated: AddressRequest = { ...request, grants: [...grants], wanted, version: String(this.#s.next()) };
    this.#s.requests.set(key, updated);
    this.#s.wroteRequest(updated);
    return updated;
  }

  watchRequests(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    const views = this.#s.requestViews;
    const view = new MemoryRequestView(scope, this.#s.requests, listener, () => views.delete(view));
    views.add(view);
    return view;
  }

  async ping(): Promise<void> {
    this.#reach('ping');
  }

  async close(): Promise<void> {}
}

/**
 * A view of the requests of a scope (ClusterRecords.watchRequests), as a watch keeps it: synced a
 * turn after it opens (its listing), then told of each request written; what it answers is the
 * cluster's requests in scope as of the last write told.
 */
class MemoryRequestView implements RecordView<AddressRequest> {
  readonly #scope: RequestScope;
  readonly #listener: ((change: RequestChange) => void) | undefined;
  readonly #closed: () => void;
  readonly #copy = new Map<string, AddressRequest>();
  #synced = false;
  #open = true;

  constructor(
    scope: RequestScope,
    requests: ReadonlyMap<string, AddressRequest>,
    listener: ((change: RequestChange) => void) | undefined,
    closed: () => void,
  ) {
    this.#scope = scope;
    this.#listener = listener;
    this.#closed = closed;
    queueMicrotask(() => {
      if (!this.#open) return;
      for (const request of requests.values()) this.told(request, false);
      this.#synced = true;
    });
  }

  get listened(): boolean {
    return this.#listener !== undefined;
  }

  get synced(): boolean {
    return this.#open && this.#synced;
  }

  values(): AddressRequest[] {
    return [...this.#copy.values()];
  }

  told(request: AddressRequest, gone: boolean): void {
    if (!this.#open) return;
    const id = `${request.pool}\0${request.node}`;
    const held = this.#copy.get(id);
    if (!gone && inRequestScope(this.#scope, request)) {
      this.#copy.set(id, request);
      this.#listener?.({ request, gone: false });
    } else if (held !== undefined) {
      this.#copy.delete(id);
      this.#listener?.({ request: held, gone: true });
    }
  }

  close(): void {
    this.#open = false;
    this.#copy.clear();
    this.#closed();
  }
}
