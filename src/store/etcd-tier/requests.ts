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
 * - `watch` (ClusterTier.watchRequests, a hint) keeps one etcd watch of the requests' prefix while
 *   anyone listens (the etcd client re-establishes it after a disconnect), none while no one does.
 */
import type { IKeyValue, Namespace, Watcher } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import type { AddressRequest, Grant } from '../tiered/cluster-tier.ts';
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

export class EtcdTierRequests {
  readonly #kv: TierKv;
  /** The tier's namespace (its prefix), which watches are made in. */
  readonly #ns: Namespace | undefined;
  readonly #listeners = new Set<(request: AddressRequest) => void>();
  /** The watch while anyone listens (its creation under way, then the watcher). */
  #watcher: Promise<Watcher | undefined> | undefined;

  constructor(kv: TierKv, ns?: Namespace) {
    this.#kv = kv;
    this.#ns = ns;
  }

  /** See the header; the function returned stops telling `listener`. */
  watch(listener: (request: AddressRequest) => void): () => void {
    const own = (request: AddressRequest) => listener(request);
    this.#listeners.add(own);
    if (this.#watcher === undefined && this.#ns !== undefined) {
      this.#watcher = this.#ns
        .watch()
        .prefix(requestsOf())
        .create()
        .then(
          (watcher) => {
            watcher.on('put', (kv) => this.#tell(kv as IKeyValue));
            // Told, not thrown: the client reconnects, and a hint lost costs time only.
            watcher.on('error', () => {});
            return watcher;
          },
          () => undefined,
        );
    }
    return () => {
      this.#listeners.delete(own);
      if (this.#listeners.size === 0) this.stopWatching();
    };
  }

  /** Ends the watch, if any (the tier closes, or no one listens). */
  stopWatching(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    void watcher?.then((w) => w?.cancel()).catch(() => {});
  }

  #tell(kv: IKeyValue): void {
    let request: AddressRequest;
    try {
      request = requestOf(kv);
    } catch {
      return; // not a request's value: nothing to tell
    }
    for (const listener of [...this.#listeners]) {
      try {
        listener(request);
      } catch {
        // A listener's failure is its own: the others are still told.
      }
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
