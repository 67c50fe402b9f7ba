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
 * - `view` (ClusterRecords.watchRequests) keeps one etcd watch of the requests' prefix while any
 *   view is open, none while none is; each view lists the requests once the watch is open and then
 *   applies its events, keeping those of its scope (etcd selects by key, not value: every agent's
 *   watch sees every request's change, which are few). The etcd client resumes a watch cut from the
 *   revision reached; a view is unsynced from the cut until it has listed again, so its readers
 *   list meanwhile (the only poll left on etcd: while a watch is down).
 */
import type { IKeyValue, Namespace, Watcher } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import {
  type AddressRequest,
  type Grant,
  type RecordView,
  type RequestChange,
  type RequestScope,
  inRequestScope,
} from '../cluster.ts';
import { type TierKv, requestRecord, requestsOf, revisionOf } from './kv.ts';

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

/** One view's copy (ClusterRecords.watchRequests): its requests by `pool \0 node`, with what it tells. */
interface EtcdView {
  readonly scope: RequestScope;
  readonly copy: Map<string, AddressRequest>;
  readonly listener: ((change: RequestChange) => void) | undefined;
  synced: boolean;
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
  /** The tier's namespace (its prefix), which watches are made in. */
  readonly #ns: Namespace | undefined;
  readonly #views = new Set<EtcdView>();
  /** The watch while any view is open (its creation under way, then the watcher). */
  #watcher: Promise<Watcher | undefined> | undefined;

  constructor(kv: TierKv, ns?: Namespace) {
    this.#kv = kv;
    this.#ns = ns;
  }

  /** See the header; the view answers from nothing until its listing is in. */
  view(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    const view: EtcdView = { scope, copy: new Map(), listener, synced: false };
    this.#views.add(view);
    if (this.#watcher === undefined && this.#ns !== undefined) this.#watcher = this.#startWatch(this.#ns);
    void this.#watcher?.then((w) => (w === undefined ? undefined : this.#list(view)));
    return {
      get synced() {
        return view.synced;
      },
      values: () => [...view.copy.values()],
      close: () => {
        view.synced = false;
        view.copy.clear();
        if (this.#views.delete(view) && this.#views.size === 0) this.stopWatching();
      },
    };
  }

  #startWatch(ns: Namespace): Promise<Watcher | undefined> {
    return ns
      .watch()
      .prefix(requestsOf())
      .create()
      .then(
        (watcher) => {
          watcher.on('put', (kv) => this.#put(kv as IKeyValue));
          watcher.on('delete', (kv) => this.#delete((kv as IKeyValue).key.toString('utf8')));
          // The client resumes the watch from the revision reached; the views list again on its return.
          watcher.on('disconnected', () => {
            for (const view of this.#views) view.synced = false;
          });
          watcher.on('connected', () => {
            for (const view of this.#views) if (!view.synced) void this.#list(view);
          });
          watcher.on('error', () => {});
          return watcher;
        },
        () => undefined,
      );
  }

  /** Lists the requests into `view` (the watch already open, so nothing after the listing is missed). */
  async #list(view: EtcdView): Promise<void> {
    let listed: AddressRequest[];
    try {
      listed = await this.#all();
    } catch {
      return; // unsynced: its readers list for themselves until the watch comes back
    }
    if (!this.#views.has(view)) return;
    const seen = new Set<string>();
    for (const request of listed) {
      const id = idOf(request.pool, request.node);
      seen.add(id);
      const held = view.copy.get(id);
      // An event applied meanwhile is newer than the listing.
      if (held !== undefined && Number(held.version) >= Number(request.version)) continue;
      this.#apply(view, id, request);
    }
    for (const [id, request] of [...view.copy])
      if (!seen.has(id)) {
        view.copy.delete(id);
        view.listener?.({ request, gone: true });
      }
    view.synced = true;
  }

  /** Ends the watch, if any (the tier closes, or no view is open). */
  stopWatching(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    void watcher?.then((w) => w?.cancel()).catch(() => {});
  }

  #put(kv: IKeyValue): void {
    let request: AddressRequest;
    try {
      request = requestOf(kv);
    } catch {
      return; // not a request's value: nothing to tell
    }
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
