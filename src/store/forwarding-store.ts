/**
 * A Store that passes every member on to another: the base of the agent's store wrappers (commit
 * timing for the metrics, commit health for readiness), which override only what they watch. The
 * forwarding lives in this one place, so a member added to Store reaches every wrapper; optional
 * members and arguments a wrapper forgot would not be caught by the compiler (one such slip once
 * kept every cluster agent from starting). test/agent/store-wrappers.test.ts holds the wrappers to it.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type {
  AddressSpaces,
  AllocationFilter,
  BlockOwners,
  CommitResult,
  ListCursor,
  ListPage,
  Membership,
  PoolRead,
  PoolSummary,
  Revision,
  Store,
  StoreHistory,
} from './store.ts';

export class ForwardingStore implements Store {
  protected readonly inner: Store;
  readonly description: string;
  readonly membership?: Membership;
  readonly spaces?: AddressSpaces;
  readonly blockOwners?: BlockOwners;
  readonly history?: StoreHistory;
  readonly listPage?: (filter: AllocationFilter, page: { limit: number; after?: ListCursor }) => Promise<ListPage>;

  /** `spaces`: the wrapper's own view of the inner store's address spaces, when it watches them. */
  constructor(inner: Store, spaces: AddressSpaces | undefined = inner.spaces) {
    this.inner = inner;
    this.description = inner.description;
    if (inner.membership !== undefined) this.membership = inner.membership;
    if (spaces !== undefined) this.spaces = spaces;
    if (inner.blockOwners !== undefined) this.blockOwners = inner.blockOwners;
    if (inner.history !== undefined) this.history = inner.history;
    const listPage = inner.listPage;
    if (listPage !== undefined) this.listPage = (filter, page) => listPage.call(inner, filter, page);
  }

  readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    return this.inner.readPool(pool, knownRevision);
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

  pools(prefix?: string): Promise<PoolSummary[]> {
    return this.inner.pools(prefix);
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
