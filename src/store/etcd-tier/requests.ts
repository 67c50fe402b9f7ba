/**
 * Address requests on the etcd cluster tier: one key per (range, node), requests/<range>/<node>,
 * holding {wanted, grants}; its version is the key's mod revision.
 *
 * Guarantees:
 * - `updateRequest` is one transaction comparing the mod revision the request was read at: a
 *   request changed since (asked again, granted by another owner) is not overwritten;
 * - `ask` keeps the grants already made: it rewrites the request only at the revision it read (a
 *   grant written in between is read again, a few times, then TRY_AGAIN);
 * - requests are few (one per node that ran out of room, per range): the listings read them all,
 *   page by page;
 * - `view` (ClusterRecords.watchRequests) keeps one watch of the requests' prefix while any view
 *   is open, none while none is (tier-watches.ts, key-watch.ts: read once, then watched from that
 *   revision, resumed from the revision reached after a cut, read again only after etcd compacted
 *   it); each view keeps the requests of its scope from the watch's copy and changes (etcd selects
 *   by key, not value: every agent's watch sees every request's change, which are few), so a view
 *   opened while the watch runs costs no request. A view is synced while its watch is; meanwhile
 *   its readers list for themselves.
 */
import type { IKeyValue } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import {
  type AddressRequest,
  type Grant,
  type RecordView,
  type RequestChange,
  type RequestScope,
  inRequestScope,
} from '../cluster.ts';
import type { EtcdKeyWatch, KeyChange } from './key-watch.ts';
import { type TierKv, requestRecord, requestsOf, revisionOf } from './kv.ts';
import type { EtcdTierWatches } from './tier-watches.ts';

interface RequestValue {
  readonly pool: string;
  readonly node: string;
  readonly wanted: number;
  readonly grants: readonly Grant[];
}

function requestOf(kv: IKeyValue): AddressRequest {
  const value = JSON.parse(kv.value.toString('utf8')) as RequestValue;
  return { pool: value.pool, node: value.node, wanted: value.wanted, grants: value.grants, version: kv.mod_revision };
}

/** The request a watched key holds; undefined for a value that is not one. */
function decode(kv: IKeyValue): AddressRequest | undefined {
  try {
    return requestOf(kv);
  } catch {
    return undefined;
  }
}

/** One view's copy (ClusterRecords.watchRequests): its requests by `pool \0 node`, with what it tells. */
interface EtcdView {
  readonly scope: RequestScope;
  readonly copy: Map<string, AddressRequest>;
  readonly listener: ((change: RequestChange) => void) | undefined;
}

const idOf = (pool: string, node: string): string => `${pool}\0${node}`;

/** The range and node a request's key names (`…requests/<pool>/<node>`), or undefined for another key. */
function idOfKey(key: string): string | undefined {
  const m = /(?:^|\/)requests\/([^/]+)\/([^/]+)$/.exec(key);
  return m?.[1] === undefined || m[2] === undefined
    ? undefined
    : idOf(decodeURIComponent(m[1]), decodeURIComponent(m[2]));
}

export class EtcdTierRequests {
  readonly #kv: TierKv;
  /** The tier's watches, which the requests' watch is made by. */
  readonly #watches: EtcdTierWatches | undefined;
  readonly #views = new Set<EtcdView>();
  /** The watch while any view is open, and what stops telling its changes here. */
  #watch: { readonly watch: EtcdKeyWatch; readonly stop: () => void } | undefined;

  constructor(kv: TierKv, watches?: EtcdTierWatches) {
    this.#kv = kv;
    this.#watches = watches;
  }

  /** See the header; the view answers from nothing until its watch has read. */
  view(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    const view: EtcdView = { scope, copy: new Map(), listener };
    this.#views.add(view);
    if (this.#watch === undefined && this.#watches !== undefined) {
      const watch = this.#watches.watch('the address requests', requestsOf(), true);
      this.#watch = { watch, stop: watch.listen((change) => this.#changed(change)) };
    }
    const watch = this.#watch?.watch;
    // What the watch holds already; what it reads or is told later comes through #changed.
    for (const kv of watch?.values() ?? []) {
      const request = decode(kv);
      if (request !== undefined) this.#apply(view, idOf(request.pool, request.node), request);
    }
    return {
      get synced() {
        return watch?.synced === true;
      },
      values: () => [...view.copy.values()],
      close: () => {
        view.copy.clear();
        if (this.#views.delete(view) && this.#views.size === 0) this.stopWatching();
      },
    };
  }

  /** Ends the watch, if any (the tier closes, or no view is open). */
  stopWatching(): void {
    const held = this.#watch;
    this.#watch = undefined;
    held?.stop();
    if (held !== undefined) this.#watches?.end(held.watch);
  }

  #changed(change: KeyChange): void {
    if (change.type === 'delete') {
      this.#delete(change.key);
      return;
    }
    const request = decode(change.kv);
    if (request === undefined) return; // not a request's value: nothing to tell
    for (const view of [...this.#views]) this.#apply(view, idOf(request.pool, request.node), request);
  }

  #delete(key: string): void {
    const id = idOfKey(key);
    if (id === undefined) return;
    for (const view of [...this.#views]) {
      const held = view.copy.get(id);
      if (held === undefined) continue;
      view.copy.delete(id);
      tell(view, { request: held, gone: true });
    }
  }

  #apply(view: EtcdView, id: string, request: AddressRequest): void {
    const held = view.copy.get(id);
    if (inRequestScope(view.scope, request)) {
      view.copy.set(id, request);
      tell(view, { request, gone: false });
    } else if (held !== undefined) {
      view.copy.delete(id);
      tell(view, { request: held, gone: true });
    }
  }

  /** Writes the request if its key is still at `modRevision` (0: absent); its new version, or undefined. */
  async #write(value: RequestValue, modRevision: number): Promise<AddressRequest | undefined> {
    const key = this.#kv.key(requestRecord(value.pool, value.node));
    const response = await this.#kv.write(`write the address request of ${value.node} in ${value.pool}`, {
      compare: [{ key, target: 'Mod', result: 'Equal', mod_revision: modRevision }],
      success: [{ request_put: { key, value: Buffer.from(JSON.stringify(value)) } }],
      failure: [],
    });
    return response.succeeded ? { ...value, version: response.header.revision } : undefined;
  }

  async ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    for (let round = 0; round < 5; round++) {
      const held = await this.#kv.get('read an address request', requestRecord(pool, node));
      const grants = held === undefined ? [] : requestOf(held).grants;
      const written = await this.#write({ pool, node, wanted, grants }, Number(held?.mod_revision ?? 0));
      if (written !== undefined) return written;
    }
    throw new WarrenError('TRY_AGAIN', `the address request of ${node} in ${pool} kept changing; try again`);
  }

  async requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    const held = await this.#kv.get('read an address request', requestRecord(pool, node));
    return held === undefined ? undefined : requestOf(held);
  }

  async #all(pool?: string): Promise<AddressRequest[]> {
    return (await this.#kv.all('list address requests', requestsOf(pool))).map(requestOf);
  }

  async openRequests(pool?: string): Promise<AddressRequest[]> {
    return (await this.#all(pool)).filter((r) => r.wanted > 0);
  }

  async requestsLentBy(lender: string): Promise<AddressRequest[]> {
    return (await this.#all()).filter((r) => r.grants.some((g) => g.lender === lender));
  }

  async updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    const at = revisionOf(request.version);
    if (at === undefined) return undefined;
    return this.#write({ pool: request.pool, node: request.node, wanted, grants: [...grants] }, at);
  }
}

/** Tells a view's listener; its failure is its own. */
function tell(view: EtcdView, change: RequestChange): void {
  try {
    view.listener?.(change);
  } catch {
    // A listener's failure is its own: the others are still told.
  }
}
