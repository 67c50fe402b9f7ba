/**
 * The holdings of a memory cluster tier (memory-tier.ts; the contract: src/store/cluster-holdings.ts):
 * one record per (key, pool), made once; removed only as read (uid); uses replaced per node only at
 * the version read. Versions come from the cluster's one counter.
 */
import {
  type ClusterHoldings,
  type HoldingFilter,
  type HoldingRecord,
  type HoldingUse,
  type NewHolding,
  type RemoveResult,
  inHoldingFilter,
} from '../../../src/store/cluster-holdings.ts';
import type { RecordView } from '../../../src/store/cluster.ts';

export interface HoldingsState {
  readonly holdings: Map<string, HoldingRecord>;
  next(): number;
}

const idOf = (key: string, pool: string) => `${key}\0${pool}`;

export class MemoryHoldings implements ClusterHoldings {
  readonly #s: HoldingsState;
  readonly #reach: (what: string) => void;
  readonly #now: () => number;

  constructor(state: HoldingsState, reach: (what: string) => void, now: () => number) {
    this.#s = state;
    this.#reach = reach;
    this.#now = now;
  }

  async create(h: NewHolding): Promise<HoldingRecord | undefined> {
    this.#reach('holdings.create');
    const id = idOf(h.key, h.pool);
    if (this.#s.holdings.has(id)) return undefined;
    const version = this.#s.next();
    const record: HoldingRecord = { ...h, uses: [], createdAt: this.#now(), uid: `h${version}`, version: `${version}` };
    this.#s.holdings.set(id, record);
    return record;
  }

  async get(key: string, pool: string): Promise<HoldingRecord | undefined> {
    this.#reach('holdings.get');
    return this.#s.holdings.get(idOf(key, pool));
  }

  async ofHolder(key: string): Promise<HoldingRecord[]> {
    this.#reach('holdings.ofHolder');
    return [...this.#s.holdings.values()].filter((h) => h.key === key);
  }

  async list(filter: HoldingFilter): Promise<HoldingRecord[]> {
    this.#reach('holdings.list');
    return [...this.#s.holdings.values()].filter((h) => inHoldingFilter(filter, h));
  }

  /** A view as a watch keeps it, synced from the start: the records of `filter` as they are now. */
  watch(filter: HoldingFilter): RecordView<HoldingRecord> {
    const holdings = this.#s.holdings;
    let open = true;
    return {
      get synced() {
        return open;
      },
      values: () => (open ? [...holdings.values()].filter((h) => inHoldingFilter(filter, h)) : []),
      close: () => {
        open = false;
      },
    };
  }

  async setOwner(record: HoldingRecord, node: string): Promise<HoldingRecord | undefined> {
    this.#reach('holdings.setOwner');
    const id = idOf(record.key, record.pool);
    const current = this.#s.holdings.get(id);
    if (current === undefined || current.version !== record.version) return undefined;
    const updated: HoldingRecord = { ...current, owner: node, version: `${this.#s.next()}` };
    this.#s.holdings.set(id, updated);
    return updated;
  }

  async setUses(record: HoldingRecord, node: string, uses: readonly HoldingUse[]): Promise<HoldingRecord | undefined> {
    this.#reach('holdings.setUses');
    const id = idOf(record.key, record.pool);
    const current = this.#s.holdings.get(id);
    if (current === undefined || current.version !== record.version) return undefined;
    const updated: HoldingRecord = {
      ...current,
      uses: [...current.uses.filter((u) => u.node !== node), ...uses.map((u) => ({ ...u, node }))],
      version: `${this.#s.next()}`,
    };
    this.#s.holdings.set(id, updated);
    return updated;
  }

  async remove(record: HoldingRecord): Promise<RemoveResult> {
    this.#reach('holdings.remove');
    const id = idOf(record.key, record.pool);
    const current = this.#s.holdings.get(id);
    if (current === undefined) return 'gone';
    if (current.uid !== record.uid) return 'changed';
    this.#s.holdings.delete(id);
    return 'removed';
  }
}
