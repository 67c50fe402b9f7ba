/**
 * A Store that passes every member on to another: the base of the agent's store wrappers (commit
 * timing for the metrics, commit health for readiness), which override only what they watch. The
 * forwarding lives in this one place, so a member added to Store reaches every wrapper; optional
 * members and arguments a wrapper forgot would not be caught by the compiler (one such slip once
 * kept every cluster agent from starting). Three are optional: `cluster` (everything a shared store
 * offers, as one member), `listPage` (a store that can page) and `commitAll` (one that commits to
 * several ledgers at once: a handover's, store/tiered/handover.ts; a wrapper that dropped it once
 * left every block a borrower took stuck half taken). test/agent/store-wrappers.test.ts
 * holds the wrappers to it.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type {
  AllocationFilter,
  CommitResult,
  ListCursor,
  ListPage,
  LedgerRead,
  LedgerSummary,
  Revision,
  Store,
  StoreCluster,
} from './store.ts';

export class ForwardingStore implements Store {
  protected readonly inner: Store;
  readonly description: string;
  readonly cluster?: StoreCluster;
  readonly listPage?: (filter: AllocationFilter, page: { limit: number; after?: ListCursor }) => Promise<ListPage>;
  readonly commitAll?: NonNullable<Store['commitAll']>;

  /** `cluster`: the wrapper's own view of the inner store's cluster, when it watches part of it. */
  constructor(inner: Store, cluster: StoreCluster | undefined = inner.cluster) {
    this.inner = inner;
    this.description = inner.description;
    if (cluster !== undefined) this.cluster = cluster;
    const listPage = inner.listPage;
    if (listPage !== undefined) this.listPage = (filter, page) => listPage.call(inner, filter, page);
    const commitAll = inner.commitAll;
    if (commitAll !== undefined) this.commitAll = (commits) => commitAll.call(inner, commits);
  }

  readLedger(pool: string, knownRevision?: Revision): Promise<LedgerRead> {
    return this.inner.readLedger(pool, knownRevision);
  }

  /** Every argument as given (the guard, the options), no more: none is dropped on the way. */
  commit(...args: Parameters<Store['commit']>): Promise<CommitResult> {
    return this.inner.commit(...args);
  }

  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.inner.findByOwner(owner);
  }

  list(filter?: AllocationFilter): Promise<Allocation[]> {
    return this.inner.list(filter);
  }

  ledgers(prefix?: string): Promise<LedgerSummary[]> {
    return this.inner.ledgers(prefix);
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
