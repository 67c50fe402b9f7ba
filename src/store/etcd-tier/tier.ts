/**
 * The cluster tier of the two-tier store on etcd v3 (`EtcdTier implements ClusterTier`,
 * src/store/tiered/cluster-tier.ts): block claims, range records, publications, address requests and
 * address spaces as keys under the tier's own prefix (the layout is in etcd-tier/kv.ts), membership and
 * chores on etcd leases (etcd-tier/membership.ts). What `--store etcd` runs beside the node's SQLite file
 * (tiered.ts); it passes the same contract as the Kubernetes one (test/store/tiered/tier-conformance.ts).
 *
 * A store that lost its data (etcd-tier/continuity.ts: revision backwards, another cluster, the identity
 * record gone or replaced, this node's name taken) halts the tier: every write (claims, give-backs,
 * publications, requests, admissions) is refused with TRY_AGAIN naming why (etcd-tier/kv.ts `write`),
 * `ping` throws the same, and membership says it (`halted`), until an operator accepts the store.
 *
 * Guarantees (the contract's, and how):
 * - a block is claimed at most once: `claim` is a transaction creating blocks/<range>/<block> only
 *   if its create revision is 0, with the node's index key in the same transaction;
 * - a claim stands only if its range was admitted in its address space at the claim's revision (read
 *   in the same transaction; a space with no admission at all admits everything): so a claim and an
 *   admission retiring its range, racing, never both stand (see `claim`);
 * - `unclaim` is a transaction comparing the claim key's create revision (the uid) and mod revision
 *   (the version): it deletes the claim, its index key and its publication only if the claim is
 *   exactly the one named ('changed' otherwise, 'gone' when there is none). A block given back and
 *   claimed again has another create revision, so the old claim never removes the new one (ABA);
 * - a range record is created if absent, never rewritten: the first block size wins;
 * - a block's publication (etcd-tier/publications.ts) is its own key, deleted in `unclaim`'s transaction;
 * - every listing pages (at most `limit` records a response); `claimsOf(node)` reads that node's
 *   index keys and their claims, `claimHolders` the index keys only (skipping each node's others),
 *   so no call reads a whole range but `claimsIn`'s and `published`'s pages.
 */
import type { IKeyValue, KVClient, Namespace } from 'etcd3';
import type { Etcd3 } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type {
  AddressRequest,
  BlockClaim,
  ClusterTier,
  Grant,
  Page,
  PublishedBlock,
  RangeRecord,
  UnclaimResult,
} from '../tiered/cluster-tier.ts';
import { type EtcdClientOptions, openEtcdClient } from './client.ts';
import { EtcdContinuity } from './continuity.ts';
import { IDENTITY_KEY, verifyIdentity } from './identity.ts';
import { EtcdHistory } from './history.ts';
import { EtcdMembership } from './membership.ts';
import { EtcdRecovery } from './recovery.ts';
import type { AcceptReport, Store } from '../store.ts';
import { type LegacyReport, forgetLegacyNode, importLegacy, legacyLeft } from './legacy-import.ts';
import { EtcdTierPublications } from './publications.ts';
import { EtcdTierRequests } from './requests.ts';
import { EtcdTierSpaces } from './spaces.ts';
import {
  TierKv,
  blockRecord,
  claimValue,
  blocksOf,
  lastSegment,
  nodeIndex,
  nodeIndexOf,
  publishedRecord,
  prefixEnd,
  rangeKey,
  revisionOf,
  spacesOf,
} from './kv.ts';

export interface EtcdTierOptions extends EtcdClientOptions {
  /**
   * The tier's key prefix: --etcd-prefix, the one the old one-tier store used, so its identity,
   * announcements, chores and admissions carry over and its old documents are found to be moved.
   */
  readonly prefix: string;
  /** Lifetime of an announcement not renewed, seconds. */
  readonly leaseSeconds: number;
  readonly notice?: (message: string) => void;
  /**
   * The store's identity this agent recorded when it last ran (its state directory): a store found
   * without it, or with another, lost its data while the agent was away, and is not written.
   */
  readonly identity?: string | undefined;
  /** Least time between two readings of etcd's history and room (etcd-history.ts), ms. Default 60000. */
  readonly historyIntervalMs?: number;
}

function claimOfKv(kv: IKeyValue, key: string): BlockClaim | undefined {
  const node = (JSON.parse(kv.value.toString('utf8')) as { node?: unknown }).node;
  if (typeof node !== 'string') return undefined;
  return { key, node, uid: kv.create_revision, version: kv.mod_revision };
}

export async function openEtcdTier(o: EtcdTierOptions): Promise<EtcdTier> {
  const { client, timeout } = await openEtcdClient(o);
  return new EtcdTier(client, o, timeout);
}

export class EtcdTier implements ClusterTier {
  readonly description: string;
  readonly membership: EtcdMembership;
  readonly spaces: EtcdTierSpaces;
  /** etcd's history and room, for `warren doctor` (Store.cluster.history of the store on this tier). */
  readonly history: EtcdHistory;
  // No `holdings` (nor `publishLoan`): etcd keeps none yet; StatefulSet ordinals and IPAMClaims need Kubernetes.
  readonly #client: Etcd3;
  readonly #kv: TierKv;
  readonly #ns: Namespace;
  readonly #requests: EtcdTierRequests;
  readonly #publications: EtcdTierPublications;
  /** The identity recorded at the agent's last run; compared at the first verification only. */
  #expectedIdentity: string | undefined;
  readonly #verifyIdentity: () => Promise<void>;
  /** What the operator's accept writes back (onAccept); nothing until the store on this tier says. */
  #republish: (node: string) => Promise<AcceptReport> = async () => ({ addresses: 0, blocks: 0, conflicts: [] });

  constructor(client: Etcd3, o: EtcdTierOptions, timeout = 2000) {
    this.description = `etcd tier ${o.endpoints.join(',')} prefix ${o.prefix}`;
    this.#client = client;
    const continuity = new EtcdContinuity();
    this.#expectedIdentity = o.identity;
    const kvClient: KVClient = client.kv;
    this.#kv = new TierKv(kvClient, o.prefix, continuity);
    this.#verifyIdentity = async () => {
      const expected = this.#expectedIdentity;
      const key = `${o.prefix}${IDENTITY_KEY}`;
      await verifyIdentity({ ns: this.#ns, call, continuity, where: this.description, key, expected });
      // Compared once: from now on what this process verified counts, or the operator's accept.
      this.#expectedIdentity = undefined;
    };
    this.#ns = client.namespace(o.prefix);
    const call = <T>(what: string, body: () => Promise<T>) => this.#kv.call(what, body);
    this.membership = new EtcdMembership({
      ns: this.#ns,
      leaseSeconds: o.leaseSeconds,
      call,
      continuity,
      verifyIdentity: () => this.#verifyIdentity(),
      // The node's own SQLite keeps its addresses: what is written back is its claims (onAccept).
      republish: (node) => this.#republish(node),
      recovery: new EtcdRecovery({ ns: this.#ns, call }),
      holders: () => this.claimHolders(),
      notice: o.notice,
    });
    this.spaces = new EtcdTierSpaces(this.#kv);
    this.#requests = new EtcdTierRequests(this.#kv, this.#ns);
    this.#publications = new EtcdTierPublications(this.#kv);
    this.history = new EtcdHistory(client, this.#ns, { ...o, timeout }, call);
  }

  async pinRange(record: RangeRecord): Promise<RangeRecord> {
    const key = this.#kv.key(rangeKey(record.pool));
    const response = await this.#kv.write(`pin range ${record.pool}`, {
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [{ request_put: { key, value: Buffer.from(JSON.stringify(record)) } }],
      failure: [{ request_range: { key } }],
    });
    if (response.succeeded) return record;
    const held = response.responses[0]?.response_range?.kvs[0];
    if (held === undefined) throw new WarrenError('TRY_AGAIN', `range ${record.pool} was pinned and removed at once`);
    return JSON.parse(held.value.toString('utf8')) as RangeRecord;
  }

  async claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined> {
    if (rangePoolOfKey(key) !== range.pool) throw new Error(`block ${key} is not in range ${range.pool}`);
    const record = this.#kv.key(blockRecord(key));
    const space = this.#kv.key(spacesOf(range.space));
    // Read in the claim's own transaction: whether the range is still admitted in its address space.
    const response = await this.#kv.write(`claim block ${key}`, {
      compare: [{ key: record, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [
        { request_put: { key: record, value: claimValue(node) } },
        { request_put: { key: this.#kv.key(nodeIndex(node, key)), value: Buffer.alloc(0) } },
        { request_range: { key: space, range_end: prefixEnd(space), keys_only: true } },
      ],
      failure: [],
    });
    if (!response.succeeded) return undefined;
    const revision = response.header.revision;
    const claim = { key, node, uid: revision, version: revision };
    const admitted = (response.responses[2]?.response_range?.kvs ?? []).map((kv) => lastSegment(this.#kv.relative(kv)));
    if (admitted.length > 0 && !admitted.includes(range.pool)) {
      // Another range of the space was admitted, retiring this one, before the claim: an admission
      // retiring a range compares that none of its blocks was claimed since its reading, so of the
      // two, the later one always sees the other. The claim does not stand: given back, and
      // answered as not made (the two-tier store then finds the admission lost, and admits again).
      await this.unclaim(claim);
      return undefined;
    }
    return claim;
  }

  async claimOf(key: string): Promise<BlockClaim | undefined> {
    const kv = await this.#kv.get(`read the claim of ${key}`, blockRecord(key));
    return kv === undefined ? undefined : claimOfKv(kv, key);
  }

  async claimsOf(node: string, pool?: string): Promise<BlockClaim[]> {
    const index = await this.#kv.all(`list the claims of ${node}`, nodeIndexOf(node, pool), { keysOnly: true });
    const keys = index.map((kv) => lastSegment(this.#kv.relative(kv)));
    const records = await this.#kv.getMany(
      `read the claims of ${node}`,
      keys.map((k) => blockRecord(k)),
    );
    const out: BlockClaim[] = [];
    for (const kv of records) {
      const claim = claimOfKv(kv, lastSegment(this.#kv.relative(kv)));
      if (claim?.node === node) out.push(claim);
    }
    return out;
  }

  async claimHolders(): Promise<string[]> {
    // Keys only, and one key per node: after a node's first index key, the next read starts past
    // all of that node's keys.
    const holders: string[] = [];
    let from: string | undefined;
    for (;;) {
      const page = await this.#kv.page(
        'list the nodes holding claims',
        'nodes-blocks/',
        { limit: 1 },
        {
          keysOnly: true,
          ...(from === undefined ? {} : { startAt: from }),
        },
      );
      const kv = page.kvs[0];
      if (kv === undefined) break;
      const segment = this.#kv.relative(kv).split('/')[1] ?? '';
      holders.push(decodeURIComponent(segment));
      if (page.continue === undefined) break;
      // Past every key of this node: its segment followed by the byte after '/'.
      from = `nodes-blocks/${segment}0`;
    }
    return holders.sort();
  }

  async claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>> {
    const got = await this.#kv.page(`list the claims of range ${pool}`, blocksOf(pool), page);
    const items: BlockClaim[] = [];
    for (const kv of got.kvs) {
      const claim = claimOfKv(kv, lastSegment(this.#kv.relative(kv)));
      if (claim !== undefined) items.push(claim);
    }
    return got.continue === undefined ? { items } : { items, continue: got.continue };
  }

  async unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    const record = this.#kv.key(blockRecord(claim.key));
    const uid = revisionOf(claim.uid);
    const version = revisionOf(claim.version);
    if (uid !== undefined && version !== undefined) {
      const response = await this.#kv.write(`give back block ${claim.key}`, {
        compare: [
          { key: record, target: 'Create', result: 'Equal', create_revision: uid },
          { key: record, target: 'Mod', result: 'Equal', mod_revision: version },
          { key: record, target: 'Value', result: 'Equal', value: claimValue(claim.node) },
        ],
        success: [
          { request_delete_range: { key: record } },
          { request_delete_range: { key: this.#kv.key(nodeIndex(claim.node, claim.key)) } },
          { request_delete_range: { key: this.#kv.key(publishedRecord(claim.key)) } },
        ],
        failure: [{ request_range: { key: record, count_only: true } }],
      });
      if (response.succeeded) return 'released';
      return Number(response.responses[0]?.response_range?.count ?? 0) > 0 ? 'changed' : 'gone';
    }
    // A uid or version etcd never made names no claim: only whether one is there is left to say.
    return (await this.claimOf(claim.key)) === undefined ? 'gone' : 'changed';
  }

  publish(block: PublishedBlock): Promise<void> {
    return this.#publications.publish(block);
  }

  publicationOf(key: string): Promise<PublishedBlock | undefined> {
    return this.#publications.publicationOf(key);
  }

  published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    return this.#publications.published(filter, page);
  }

  ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    return this.#requests.ask(pool, node, wanted);
  }

  requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    return this.#requests.requestOf(pool, node);
  }

  openRequests(pool?: string): Promise<AddressRequest[]> {
    return this.#requests.openRequests(pool);
  }

  requestsLentBy(lender: string): Promise<AddressRequest[]> {
    return this.#requests.requestsLentBy(lender);
  }

  updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    return this.#requests.updateRequest(request, grants, wanted);
  }

  /**
   * Checks at start that the store is the one this agent knew (its identity record: creating it in a
   * store that never had one); a store that lost its data halts the tier here, before anything is
   * written. Nothing is thrown for a halt: `membership.halted()` says it.
   */
  async verifyStore(): Promise<void> {
    await this.#verifyIdentity();
  }

  /** Sets what an accept of a store that lost its data writes back: the node's claims (tiered.ts). */
  onAccept(republish: (node: string) => Promise<AcceptReport>): void {
    this.#republish = republish;
  }

  /** Moves this node's blocks from the old one-tier layout into `local` (legacy-import.ts). */
  importLegacy(local: Store, node: string): Promise<LegacyReport> {
    return importLegacy({ kv: this.#kv, tier: this, local, node });
  }

  /** What is left of the old one-tier layout (legacy-import.ts), for `warren doctor`. */
  legacyLeft(): ReturnType<typeof legacyLeft> {
    return legacyLeft(this.#kv);
  }

  /** Removes the old documents of `node`, gone for good (legacy-import.ts): before its claims are freed. */
  async forgetLegacyNode(node: string): Promise<void> {
    await forgetLegacyNode(this.#kv, node);
  }

  async ping(): Promise<void> {
    // Refused while halted; halts on a response gone backwards or an identity record gone.
    this.#kv.refuseWhileHalted();
    await this.#kv.checkIdentity('ping');
  }

  watchRequests(listener: (request: AddressRequest) => void): () => void {
    return this.#requests.watch(listener);
  }

  async close(): Promise<void> {
    this.#requests.stopWatching();
    await this.membership.withdraw();
    this.#client.close();
  }
}
