/**
 * Holdings on the Kubernetes API (store/cluster-holdings.ts): WarrenAddressHolding objects, one per
 * (holder, range pool), in the holder's namespace (so a namespace's deletion ends its holdings),
 * named from the holder and pool (names.ts holdingName).
 *
 * How the contract is kept:
 * - one record per (key, pool): `create` is a POST of the one name; AlreadyExists answers undefined;
 * - `remove` deletes with the uid precondition: a record made again since is another uid (409);
 * - `setUses` is a PUT at the resourceVersion read (409: undefined), the user labels rewritten with
 *   the uses, so `list({ user })` selects on the server.
 * Listings across namespaces read the cluster-wide collection, by label, a page at a time; `watch`
 * keeps one such selection in a KubeCollectionWatch (collection-watch.ts), so an upkeep reads it
 * with no request. The tier's continuity (`revisions`, unguarded: holdings are written while the
 * store is halted, as before) judges what they answer and tells the watch when the operator
 * accepts a store that lost its data, so it lists again rather than wait on the old store's version.
 */
import { WarrenError } from '../../core/errors.ts';
import type { Clock } from '../../core/clock.ts';
import {
  type ClusterHoldings,
  type HoldingFilter,
  type HoldingRecord,
  type HoldingUse,
  type NewHolding,
  type RemoveResult,
  inHoldingFilter,
} from '../cluster-holdings.ts';
import type { RecordView } from '../cluster.ts';
import { KubeCollectionWatch } from './collection-watch.ts';
import { holdingNamespace, holdingObject, holdingOf } from './holding-objects.ts';
import type { KubeApiClient } from './api-client.ts';
import {
  BLOCK_LABEL,
  HOLDER_KIND_LABEL,
  HOLDER_LABEL,
  NODE_LABEL,
  holdingName,
  labelValue,
  selectorOf,
  userLabel,
} from './names.ts';
import { type RevisionObserver, Resource, warrenKind } from './resources.ts';

const PLURAL = 'warrenaddressholdings';

export class KubeHoldings implements ClusterHoldings {
  readonly #api: KubeApiClient;
  readonly #revisions: RevisionObserver | undefined;
  /** Every namespace's holdings: the cluster-wide collection, for listings. */
  readonly #holdings: Resource;

  readonly #clock: Clock;
  /** The watches open (`watch`), ended with the tier. */
  readonly #watches = new Set<KubeCollectionWatch<HoldingRecord>>();

  constructor(api: KubeApiClient, clock: Clock, revisions?: RevisionObserver) {
    this.#api = api;
    this.#clock = clock;
    this.#revisions = revisions;
    this.#holdings = new Resource(api, warrenKind('warrenaddressholdings'), revisions);
  }

  /** The holdings of the holder's namespace. */
  #of(key: string): Resource {
    const namespace = holdingNamespace(key);
    if (namespace === undefined) throw new WarrenError('INVALID_CONFIG', `${JSON.stringify(key)} is no holding key`);
    return new Resource(this.#api, { ...warrenKind(PLURAL), namespace }, this.#revisions);
  }

  async create(h: NewHolding): Promise<HoldingRecord | undefined> {
    const holdings = this.#of(h.key);
    const created = await holdings.create(`hold ${h.address} for ${h.key}`, holdingObject(h, []));
    if (created.kind === 'exists') return undefined;
    const record = holdingOf(created.object);
    if (record === undefined)
      throw new WarrenError('IO_FAILURE', `the API server answered the holding of ${h.key} with no object`);
    return record;
  }

  async get(key: string, pool: string): Promise<HoldingRecord | undefined> {
    const holdings = this.#of(key);
    const record = holdingOf(await holdings.get(`read the holding of ${key}`, holdingName(key, pool)));
    return record?.key === key && record.pool === pool ? record : undefined;
  }

  async ofHolder(key: string): Promise<HoldingRecord[]> {
    const holdings = this.#of(key);
    const items = await holdings.listAll(
      `list the holdings of ${key}`,
      selectorOf({ [HOLDER_LABEL]: labelValue(key) }),
    );
    return items.map(holdingOf).filter((r): r is HoldingRecord => r?.key === key);
  }

  async list(filter: HoldingFilter): Promise<HoldingRecord[]> {
    const items = await this.#holdings.listAll('list address holdings', selectorOf(labelsOf(filter)));
    return items.map(holdingOf).filter((r): r is HoldingRecord => r !== undefined && inHoldingFilter(filter, r));
  }

  watch(filter: HoldingFilter): RecordView<HoldingRecord> {
    const watch = new KubeCollectionWatch<HoldingRecord>({
      resource: this.#holdings,
      what: `address holdings (${selectorOf(labelsOf(filter)) || 'all'})`,
      selectors: { labelSelector: selectorOf(labelsOf(filter)) },
      decode: (object) => {
        const record = holdingOf(object);
        return record !== undefined && inHoldingFilter(filter, record) ? record : undefined;
      },
      clock: this.#clock,
    });
    this.#watches.add(watch);
    watch.start();
    return {
      get synced() {
        return watch.isSynced && watch.status().state !== 'closed';
      },
      values: () => watch.values(),
      close: () => {
        this.#watches.delete(watch);
        watch.close();
      },
    };
  }

  /** Ends every watch (the tier closes). */
  close(): void {
    for (const watch of this.#watches) watch.close();
    this.#watches.clear();
  }

  async setOwner(record: HoldingRecord, node: string): Promise<HoldingRecord | undefined> {
    const holdings = this.#of(record.key);
    const written = await holdings.replace(
      `make node ${node} the owner of the holding of ${record.key}`,
      holdingObject({ ...record, owner: node }, record.uses, record.version),
    );
    return written.kind === 'replaced' ? holdingOf(written.object) : undefined;
  }

  async setUses(record: HoldingRecord, node: string, uses: readonly HoldingUse[]): Promise<HoldingRecord | undefined> {
    const holdings = this.#of(record.key);
    const all = [...record.uses.filter((u) => u.node !== node), ...uses.map((u) => ({ ...u, node }))];
    const written = await holdings.replace(
      `record the uses of the holding of ${record.key} on node ${node}`,
      holdingObject(record, all, record.version),
    );
    return written.kind === 'replaced' ? holdingOf(written.object) : undefined;
  }

  async remove(record: HoldingRecord): Promise<RemoveResult> {
    const holdings = this.#of(record.key);
    const done = await holdings.remove(`end the holding of ${record.key}`, holdingName(record.key, record.pool), {
      uid: record.uid,
    });
    return done === 'deleted' ? 'removed' : done === 'conflict' ? 'changed' : 'gone';
  }
}

/** The labels `filter` selects by on the server (holding-objects.ts writes them). */
function labelsOf(filter: HoldingFilter): Record<string, string> {
  return {
    ...(filter.owner === undefined ? {} : { [NODE_LABEL]: labelValue(filter.owner) }),
    ...(filter.user === undefined ? {} : { [userLabel(filter.user)]: 'true' }),
    ...(filter.kind === undefined ? {} : { [HOLDER_KIND_LABEL]: labelValue(filter.kind) }),
    ...(filter.block === undefined ? {} : { [BLOCK_LABEL]: labelValue(filter.block) }),
  };
}
