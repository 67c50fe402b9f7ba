/**
 * The cluster's records as lending reads them (ClusterRecords, store/cluster.ts), the address
 * requests it reads periodically served from watches of what this node needs instead of listings
 * (issue 36: an idle agent makes no periodic LIST). While open (`open`, prompt-lending.ts), it keeps
 * four views (ClusterRecords.watchRequests):
 * - the open requests of the ranges this node holds blocks of, asks in or borrows from (`cover`:
 *   lending's round sets them, a claim adds its range at once), which the lender answers
 *   (lender.ts) and which send idle loans back at once (ask-ending.ts, `askedElsewhere`);
 * - the requests lent to by this node, whose grants keep its placeholders (lender.ts tidy-up);
 * - the requests lent to by a migration (`whereabouts`), what migrated.ts adopts and holds;
 * - this node's own requests, which its borrower waits on, checks (loan-check.ts) and gives back
 *   (loan-return.ts).
 * The rest of ClusterRecords passes to the tier unchanged.
 *
 * Guarantees:
 * - a reading is served from a view only once the view is synced (its first listing in) and covers
 *   what is read; otherwise, closed, or before `open`, it is the tier's listing or read, as before:
 *   what a reading answers is never less than what the cluster held when the view was last told;
 * - the open requests' view follows the ranges covered: opened again (one listing) only when the
 *   set changes, none while this node holds no block;
 * - `open`'s listener is told each change of this node's requests, of the requests lent to by
 *   this node and of the open requests of the ranges covered, as the watches tell them
 *   (store/cluster.ts RequestChange);
 * - once the signal aborts, every view is closed and nothing more is told.
 */
import type {
  AddressRequest,
  ClusterRecords,
  Grant,
  Page,
  PublishedBlock,
  RecordView,
  RequestChange,
  RequestScope,
} from '../../store/cluster.ts';
import { MIGRATION_LENDER } from './loans.ts';

interface Views {
  readonly own: RecordView<AddressRequest>;
  readonly lent: RecordView<AddressRequest>;
  readonly migrated: RecordView<AddressRequest>;
  open: { readonly pools: ReadonlySet<string>; readonly view: RecordView<AddressRequest> };
  readonly tell: (change: RequestChange) => void;
}

export class WatchedRequests implements ClusterRecords {
  readonly #tier: ClusterRecords;
  readonly #node: string;
  /** The ranges the open requests' view covers (kept while closed too, for the next `open`). */
  #pools: ReadonlySet<string> = new Set();
  #views: Views | undefined;

  constructor(tier: ClusterRecords, node: string) {
    this.#tier = tier;
    this.#node = node;
  }

  get description(): string {
    return this.#tier.description;
  }

  /** Keeps the views until `signal` aborts, telling `listener` (see the header); false if it already has. */
  open(signal: AbortSignal, listener: (change: RequestChange) => void): boolean {
    if (signal.aborted || this.#views !== undefined) return false;
    const node = this.#node;
    this.#views = {
      own: this.#tier.watchRequests({ node }, listener),
      lent: this.#tier.watchRequests({ lentBy: node }, listener),
      migrated: this.#tier.watchRequests({ lentBy: MIGRATION_LENDER }),
      open: { pools: this.#pools, view: this.#tier.watchRequests({ open: [...this.#pools] }, listener) },
      tell: listener,
    };
    signal.addEventListener('abort', () => this.#close(), { once: true });
    return true;
  }

  #close(): void {
    const views = this.#views;
    this.#views = undefined;
    if (views === undefined) return;
    for (const view of [views.own, views.lent, views.migrated, views.open.view]) view.close();
  }

  /** The ranges the open requests' view is to cover: those this node holds blocks of (opened again if changed). */
  cover(pools: Iterable<string>): void {
    const wanted = new Set(pools);
    const same = wanted.size === this.#pools.size && [...wanted].every((p) => this.#pools.has(p));
    if (same) return;
    this.#pools = wanted;
    const views = this.#views;
    if (views === undefined) return;
    const before = views.open.view;
    views.open = { pools: wanted, view: this.#tier.watchRequests({ open: [...wanted] }, views.tell) };
    before.close();
  }

  /** Adds `pool` to the ranges covered (a block of it claimed), at once rather than at the next round. */
  include(pool: string): void {
    if (!this.#pools.has(pool)) this.cover([...this.#pools, pool]);
  }

  /** The view serving `scope`'s reading, if one is synced and covers it. */
  #served(scope: RequestScope): RecordView<AddressRequest> | undefined {
    const views = this.#views;
    if (views === undefined) return undefined;
    let view: RecordView<AddressRequest> | undefined;
    if ('open' in scope)
      view = scope.open.every((p) => views.open.pools.has(p)) && scope.open.length > 0 ? views.open.view : undefined;
    else if ('node' in scope) view = scope.node === this.#node ? views.own : undefined;
    else if (scope.lentBy === this.#node) view = views.lent;
    else if (scope.lentBy === MIGRATION_LENDER) view = views.migrated;
    return view?.synced === true ? view : undefined;
  }

  /**
   * Whether another node asks for addresses of `pool` now, as the open requests' view has it; false
   * when no synced view covers `pool` (a reading that costs no request).
   */
  askedElsewhere(pool: string): boolean {
    const view = this.#served({ open: [pool] });
    return view?.values().some((r) => r.pool === pool && r.node !== this.#node && r.wanted > 0) ?? false;
  }

  async openRequests(pool?: string): Promise<AddressRequest[]> {
    const view = pool === undefined ? undefined : this.#served({ open: [pool] });
    if (view === undefined) return this.#tier.openRequests(pool);
    return view.values().filter((r) => r.pool === pool && r.wanted > 0);
  }

  async requestsLentBy(lender: string): Promise<AddressRequest[]> {
    const view = this.#served({ lentBy: lender });
    if (view === undefined) return this.#tier.requestsLentBy(lender);
    return view.values().filter((r) => r.grants.some((g) => g.lender === lender));
  }

  /** This node's own requests, from the watch while it is synced; undefined when there is none to read. */
  ownRequests(): readonly AddressRequest[] | undefined {
    return this.#served({ node: this.#node })?.values();
  }

  async requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    const view = this.#served({ node });
    if (view === undefined) return this.#tier.requestOf(pool, node);
    return view.values().find((r) => r.pool === pool && r.node === node);
  }

  claimOf(key: string) {
    return this.#tier.claimOf(key);
  }

  published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    return this.#tier.published(filter, page);
  }

  ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    return this.#tier.ask(pool, node, wanted);
  }

  updateRequest(request: AddressRequest, grants: readonly Grant[], wanted: number) {
    return this.#tier.updateRequest(request, grants, wanted);
  }

  watchRequests(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    return this.#tier.watchRequests(scope, listener);
  }
}
