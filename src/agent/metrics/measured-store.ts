/**
 * A Store that tells telemetry about every commit — how long it took and how it ended — and about
 * every address it allocated. It wraps another store and changes nothing else: the one place all
 * writes pass, so no caller can allocate without being counted.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import type { AddressSpaces, AdmissionGuard, AllocationFilter, CommitResult, Membership, PoolOp, PoolRead, PoolSummary, Revision, Store } from '../../store/store.ts';
import type { Owner } from '../../ipam/allocation.ts';
import type { Telemetry } from './telemetry.ts';

export class MeasuredStore implements Store {
  readonly #inner: Store;
  readonly #telemetry: Telemetry;
  readonly description: string;
  readonly membership?: Membership;
  readonly spaces?: AddressSpaces;

  constructor(inner: Store, telemetry: Telemetry) {
    this.#inner = inner;
    this.#telemetry = telemetry;
    this.description = inner.description;
    if (inner.membership !== undefined) this.membership = inner.membership;
    if (inner.spaces !== undefined) this.spaces = inner.spaces;
  }

  /** The store wrapped (its own extras: SQLite's durability). */
  get inner(): Store {
    return this.#inner;
  }

  readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    return this.#inner.readPool(pool, knownRevision);
  }

  async commit(pool: string, expected: Revision, ops: readonly PoolOp[], guard?: AdmissionGuard): Promise<CommitResult> {
    const started = performance.now();
    let result: CommitResult;
    try {
      result = await this.#inner.commit(pool, expected, ops, guard);
    } catch (error) {
      this.#telemetry.commit((performance.now() - started) / 1000, 'error');
      throw error;
    }
    this.#telemetry.commit((performance.now() - started) / 1000, result.kind);
    if (result.kind === 'committed') {
      const allocated: Allocation[] = [];
      for (const op of ops) if (op.op === 'allocate') allocated.push(op.allocation);
      if (allocated.length > 0) this.#telemetry.allocated(allocated);
    }
    return result;
  }

  findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.#inner.findByOwner(owner);
  }

  list(filter?: AllocationFilter): Promise<Allocation[]> {
    return this.#inner.list(filter);
  }

  pools(prefix?: string): Promise<PoolSummary[]> {
    return this.#inner.pools(prefix);
  }

  ping(): Promise<void> {
    return this.#inner.ping();
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
