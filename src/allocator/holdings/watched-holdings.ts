/**
 * The cluster's holding records (store/cluster-holdings.ts) as this node's holdings read them, the
 * listings its upkeep makes every run served from watches instead (issue 36: an idle agent makes
 * no periodic LIST): the records this node owns (`owner`: this node), the records this node uses
 * (`user`: this node) and the orphaned ones (`owner`: ORPHANED), each kept in a view
 * (ClusterHoldings.watch) opened by the first listing of it and kept while the tier is open.
 * Everything else (another node's records, a holder's, the writes) passes to the records unchanged.
 *
 * Guarantees: a listing is served from its view only once the view is synced (its first listing
 * in), the tier's listing answering until then, so what a listing answers is never less than what
 * the cluster held when the view was last told; a view is opened once per filter, only for the
 * three filters above (what grows with this node, not with the cluster).
 */
import type {
  ClusterHoldings,
  HoldingFilter,
  HoldingRecord,
  HoldingUse,
  NewHolding,
  RemoveResult,
} from '../../store/cluster-holdings.ts';
import type { RecordView } from '../../store/cluster.ts';
import { ORPHANED } from './placeholders.ts';

export class WatchedHoldings implements ClusterHoldings {
  readonly #records: ClusterHoldings;
  readonly #node: string;
  /** The views open, by the filter they keep (`owner <node>`, `user <node>`). */
  readonly #views = new Map<string, RecordView<HoldingRecord>>();

  constructor(records: ClusterHoldings, node: string) {
    this.#records = records;
    this.#node = node;
  }

  /** The view key of `filter` when it is one kept in a view (see the header), else undefined. */
  #watched(filter: HoldingFilter): string | undefined {
    const { owner, user, kind, block } = filter;
    if (kind !== undefined || block !== undefined || (owner === undefined) === (user === undefined)) return undefined;
    if (owner === this.#node || owner === ORPHANED) return `owner ${owner}`;
    return user === this.#node ? `user ${user}` : undefined;
  }

  async list(filter: HoldingFilter): Promise<HoldingRecord[]> {
    const key = this.#watched(filter);
    if (key === undefined) return this.#records.list(filter);
    let view = this.#views.get(key);
    if (view === undefined) {
      view = this.#records.watch(filter);
      this.#views.set(key, view);
    }
    return view.synced ? view.values() : this.#records.list(filter);
  }

  watch(filter: HoldingFilter): RecordView<HoldingRecord> {
    return this.#records.watch(filter);
  }

  create(holding: NewHolding): Promise<HoldingRecord | undefined> {
    return this.#records.create(holding);
  }

  get(key: string, pool: string): Promise<HoldingRecord | undefined> {
    return this.#records.get(key, pool);
  }

  ofHolder(key: string): Promise<HoldingRecord[]> {
    return this.#records.ofHolder(key);
  }

  setOwner(record: HoldingRecord, node: string): Promise<HoldingRecord | undefined> {
    return this.#records.setOwner(record, node);
  }

  setUses(record: HoldingRecord, node: string, uses: readonly HoldingUse[]): Promise<HoldingRecord | undefined> {
    return this.#records.setUses(record, node, uses);
  }

  remove(record: HoldingRecord): Promise<RemoveResult> {
    return this.#records.remove(record);
  }
}
