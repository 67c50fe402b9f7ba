/**
 * The cluster tier on the Kubernetes API (cluster-tier.ts): custom resources of group warren.dev
 * (deploy/crds/) for ranges, blocks and their published allocations, address requests and address
 * spaces, and coordination.k8s.io Leases in the agent's namespace for membership and chores.
 *
 * How each guarantee of ClusterTier is kept:
 * - one claim per block: a claim creates the WarrenBlock named `blockName(key)` (names.ts), so the
 *   API server lets one creation of it succeed and answers AlreadyExists to the others (one request);
 * - give back only what was claimed (ABA): `unclaim` deletes with the preconditions uid and
 *   resourceVersion; a block given back and claimed again is a new object with a new uid. The block
 *   object is the claim alone (spec; no status) and never changes once made;
 * - what a listing of claims reads does not grow with the addresses: a block's published allocations
 *   are another object, its WarrenBlockPublication (same name, same labels), so `claimsIn` and
 *   `claimsOf` read claims only (a few hundred bytes each) and `published` reads the publications;
 * - a range's block size is pinned by whoever creates its WarrenRange first: the stored one is read
 *   first (and created when absent), once per tier, since it never changes once made;
 * - listings page on the server (`limit`, `continue`) and select by label on the server
 *   (`warren.dev/node`, `warren.dev/range`): what `claimsOf(node)` reads is that node's blocks;
 * - `publish` writes the block's publication: one request each time (a PUT guarded by the uid and
 *   resourceVersion this tier last saw of it), two the first time (the claim read, then a create;
 *   three when one was left behind: read and replaced). The claim is read again whenever a write
 *   finds the publication gone or changed: it throws when the block's object is gone or another
 *   node's. A forgotten node's publications are deleted with its claims, so its writes stop at the
 *   next batch. A publication is kept within the object size limit (objects.ts);
 * - a publication goes with its claim: `unclaim` deletes it after the claim, guarded by its uid
 *   (known from publishing; else read first, and deleted only if it names the claim's node), so a
 *   give-back costs one request more than the claim's delete when the block was published by this
 *   tier, two (a read, a delete) when not, one (a read finding none) when never published;
 * - a request's update is a PUT guarded by the version it was read at (undefined on a conflict);
 *   open requests and each lender's requests carry labels (`warren.dev/open`,
 *   `lender.warren.dev/<node>`), so the server selects them.
 * Every failure to reach the API server is TRY_AGAIN naming it (api-client.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.ts';
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
} from '../cluster-tier.ts';
import { KubeApiClient } from './api-client.ts';
import { KubeSpaces } from './kube-spaces.ts';
import { LeaseMembership } from './lease-membership.ts';
import {
  NODE_LABEL,
  OPEN_LABEL,
  RANGE_LABEL,
  blockName,
  labelValue,
  lenderLabel,
  rangeName,
  requestName,
  selectorOf,
} from './names.ts';
import {
  blockObject,
  claimOfObject,
  metaOf,
  publicationObject,
  publishedOf,
  rangeObject,
  rangeOf,
  requestObject,
  requestOf,
} from './objects.ts';
import { FULL_LIST_PAGE, Resource, leaseKind, warrenKind } from './resources.ts';

/** Rounds of read-and-write against an object that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 5;

export interface KubeTierOptions {
  readonly kubeConfig: KubeConfig;
  /** Where the Leases live: the agent's namespace. */
  readonly namespace: string;
  readonly leaseSeconds: number;
  readonly clock: Clock;
  readonly notice?: (message: string) => void;
  /** Deadline of each request, milliseconds (api-client.ts). */
  readonly requestTimeoutMs?: number;
  /** Largest answer read, bytes (api-client.ts; tests). */
  readonly maxAnswerBytes?: number;
}

export async function openKubeTier(o: KubeTierOptions): Promise<KubeTier> {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(o.namespace))
    throw new WarrenError(
      'INVALID_CONFIG',
      `the Kubernetes namespace ${JSON.stringify(o.namespace)} is not a valid name`,
    );
  if (!(Number.isInteger(o.leaseSeconds) && o.leaseSeconds > 0))
    throw new WarrenError(
      'INVALID_CONFIG',
      `the lease time must be a whole number of seconds > 0, not ${o.leaseSeconds}`,
    );
  const api = await KubeApiClient.open({
    kubeConfig: o.kubeConfig,
    ...(o.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: o.requestTimeoutMs }),
    ...(o.maxAnswerBytes === undefined ? {} : { maxAnswerBytes: o.maxAnswerBytes }),
  });
  return new KubeTier(api, o);
}

export class KubeTier implements ClusterTier {
  readonly description: string;
  readonly membership: LeaseMembership;
  readonly spaces: KubeSpaces;
  readonly #api: KubeApiClient;
  readonly #notice: ((message: string) => void) | undefined;
  readonly #ranges: Resource;
  readonly #blocks: Resource;
  readonly #requests: Resource;
  readonly #publications: Resource;
  /** Range records read or made: a record never changes once made, so it is read once. */
  readonly #pinned = new Map<string, RangeRecord>();
  /**
   * The uid and resourceVersion this tier last saw of the publications it wrote, by block key: what
   * the next write is guarded by, so that one costs one request. Forgotten at give-back.
   */
  readonly #seen = new Map<string, { uid: string; version: string; node: string }>();

  constructor(api: KubeApiClient, o: KubeTierOptions) {
    this.#api = api;
    this.#notice = o.notice;
    this.#ranges = new Resource(api, warrenKind('warrenranges'));
    this.#blocks = new Resource(api, warrenKind('warrenblocks'));
    this.#requests = new Resource(api, warrenKind('warrenaddressrequests'));
    this.#publications = new Resource(api, warrenKind('warrenblockpublications'));
    this.spaces = new KubeSpaces({
      spaces: new Resource(api, warrenKind('warrenaddressspaces')),
      ranges: this.#ranges,
      blocks: this.#blocks,
    });
    this.membership = new LeaseMembership({
      leases: new Resource(api, leaseKind(o.namespace)),
      leaseSeconds: o.leaseSeconds,
      clock: o.clock,
      notice: o.notice,
    });
    this.description = `Kubernetes API ${api.server} (warren.dev custom resources; Leases in namespace ${o.namespace})`;
  }

  async pinRange(record: RangeRecord): Promise<RangeRecord> {
    const known = this.#pinned.get(record.pool);
    if (known !== undefined) return known;
    const name = rangeName(record.pool);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      // Read first: every node but the first finds the range recorded, in one request.
      const stored = rangeOf(await this.#ranges.get(`read range ${record.pool}`, name));
      if (stored !== undefined) {
        if (stored.pool !== record.pool)
          throw new WarrenError(
            'IO_FAILURE',
            `the WarrenRange ${name} records range ${stored.pool}, not ${record.pool}`,
          );
        return this.#pin(stored);
      }
      const created = await this.#ranges.create(`record range ${record.pool}`, rangeObject(name, record));
      if (created.kind === 'created') return this.#pin(rangeOf(created.object) ?? record);
    }
    throw new WarrenError('TRY_AGAIN', `the record of range ${record.pool} kept changing; try again`);
  }

  /** A range's record never changes once made: it is read once per tier. */
  #pin(record: RangeRecord): RangeRecord {
    this.#pinned.set(record.pool, record);
    return record;
  }

  async claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined> {
    if (rangePoolOfKey(key) !== range.pool)
      throw new WarrenError('IO_FAILURE', `block ${key} is not a block of range ${range.pool}`);
    const created = await this.#blocks.create(`claim block ${key}`, blockObject(blockName(key), key, node));
    if (created.kind === 'exists') return undefined;
    const claim = claimOfObject(created.object);
    if (claim === undefined)
      throw new WarrenError('IO_FAILURE', `the API server answered the claim of block ${key} with no object`);
    return claim;
  }

  async claimOf(key: string): Promise<BlockClaim | undefined> {
    const claim = claimOfObject(await this.#blocks.get(`read block ${key}`, blockName(key)));
    return claim === undefined || claim.key !== key ? undefined : claim;
  }

  async claimsOf(node: string, pool?: string): Promise<BlockClaim[]> {
    const labels = {
      [NODE_LABEL]: labelValue(node),
      ...(pool === undefined ? {} : { [RANGE_LABEL]: labelValue(pool) }),
    };
    const items = await this.#blocks.listAll(`list the blocks of node ${node}`, selectorOf(labels));
    return items
      .map(claimOfObject)
      .filter(
        (c): c is BlockClaim =>
          c !== undefined && c.node === node && (pool === undefined || rangePoolOfKey(c.key) === pool),
      );
  }

  async claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>> {
    const got = await this.#blocks.list(
      `list the blocks of range ${pool}`,
      selectorOf({ [RANGE_LABEL]: labelValue(pool) }),
      page?.limit ?? FULL_LIST_PAGE,
      page?.continue,
    );
    const items = got.items
      .map(claimOfObject)
      .filter((c): c is BlockClaim => c !== undefined && rangePoolOfKey(c.key) === pool);
    return { items, ...(got.continue === undefined ? {} : { continue: got.continue }) };
  }

  async unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    const name = blockName(claim.key);
    const done = await this.#blocks.remove(`give back block ${claim.key}`, name, {
      uid: claim.uid,
      resourceVersion: claim.version,
    });
    if (done !== 'deleted') return done === 'conflict' ? 'changed' : 'gone';
    await this.#unpublish(claim);
    return 'released';
  }

  /**
   * Deletes the publication of a claim just removed: the one this tier wrote (by its uid), else the
   * one found if it names the claim's node. One claimed again since by another node is theirs: kept.
   * A failure here leaves the publication behind (the claim is gone already): its reader sees no
   * claim of that node, and the next owner's first write replaces it.
   */
  async #unpublish(claim: BlockClaim): Promise<void> {
    const name = blockName(claim.key);
    const seen = this.#seen.get(claim.key);
    this.#seen.delete(claim.key);
    let uid = seen?.node === claim.node ? seen.uid : undefined;
    if (uid === undefined) {
      const found = await this.#publications.get(`read the allocations of block ${claim.key}`, name);
      const published = publishedOf(found);
      if (published === undefined || published.key !== claim.key || published.node !== claim.node) return;
      uid = metaOf(found)?.uid;
      if (uid === undefined) return;
    }
    await this.#publications.remove(`remove the allocations of block ${claim.key}`, name, { uid });
  }

  async publish(block: PublishedBlock): Promise<void> {
    const name = blockName(block.key);
    const what = `publish block ${block.key}`;
    let checked = false;
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const seen = this.#seen.get(block.key);
      const last = seen?.node === block.node ? seen : undefined;
      // No publication of it on record (the first, a restart, a conflict): the block must be this node's.
      if (last === undefined && !checked) {
        await this.#mustHold(block);
        checked = true;
      }
      const { object, truncated } = publicationObject(
        name,
        block,
        last === undefined ? undefined : { uid: last.uid, resourceVersion: last.version },
      );
      if (truncated)
        this.#notice?.(
          `block ${block.key} holds more allocations than its object can publish (${block.allocations.length}): ` +
            `published ${(object.spec as { allocations: unknown[] }).allocations.length}, without network namespaces`,
        );
      const written =
        last === undefined
          ? await this.#publications.create(what, object)
          : await this.#publications.replace(what, object);
      this.#seen.delete(block.key);
      if (written.kind === 'created' || written.kind === 'replaced') {
        const meta = metaOf(written.object);
        if (meta !== undefined)
          this.#seen.set(block.key, { uid: meta.uid, version: meta.resourceVersion, node: block.node });
        return;
      }
      if (written.kind === 'exists') {
        // One left behind (this node's before a restart, or a former owner's): replace it, the claim checked.
        if (!checked) await this.#mustHold(block);
        checked = true;
        const found = metaOf(await this.#publications.get(`read the allocations of block ${block.key}`, name));
        if (found !== undefined)
          this.#seen.set(block.key, { uid: found.uid, version: found.resourceVersion, node: block.node });
        continue;
      }
      // Gone or changed under this tier (its claim forgotten?): read the claim again.
      checked = false;
    }
    throw new WarrenError('TRY_AGAIN', `block ${block.key} kept changing while its allocations were published`);
  }

  /** Throws unless the block is claimed by the publishing node. */
  async #mustHold(block: PublishedBlock): Promise<void> {
    const claim = claimOfObject(await this.#blocks.get(`read block ${block.key}`, blockName(block.key)));
    if (claim === undefined || claim.key !== block.key || claim.node !== block.node)
      throw new WarrenError(
        'IO_FAILURE',
        `block ${block.key} is not claimed by node ${block.node} (${
          claim === undefined || claim.key !== block.key ? 'its object is gone' : `node ${claim.node} holds it`
        }): its allocations were not published`,
      );
  }

  async published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    const labels = {
      ...(filter.pool === undefined ? {} : { [RANGE_LABEL]: labelValue(filter.pool) }),
      ...(filter.node === undefined ? {} : { [NODE_LABEL]: labelValue(filter.node) }),
    };
    const got = await this.#publications.list(
      'list published blocks',
      selectorOf(labels),
      page?.limit ?? FULL_LIST_PAGE,
      page?.continue,
    );
    const items = got.items
      .map(publishedOf)
      .filter(
        (b): b is PublishedBlock =>
          b !== undefined &&
          (filter.pool === undefined || rangePoolOfKey(b.key) === filter.pool) &&
          (filter.node === undefined || b.node === filter.node),
      );
    return { items, ...(got.continue === undefined ? {} : { continue: got.continue }) };
  }

  async ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    const name = requestName(pool, node);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const created = await this.#requests.create(
        `ask for addresses of range ${pool}`,
        requestObject(name, { pool, node, wanted, grants: [] }),
      );
      if (created.kind === 'created') return this.#requestOrFail(created.object, pool, node);
      const current = await this.requestOf(pool, node);
      if (current === undefined) continue;
      if (current.wanted === wanted) return current;
      const updated = await this.updateRequest(current, current.grants, wanted);
      if (updated !== undefined) return updated;
    }
    throw new WarrenError('TRY_AGAIN', `the request of node ${node} for range ${pool} kept changing; try again`);
  }

  #requestOrFail(object: unknown, pool: string, node: string): AddressRequest {
    const request = requestOf(object);
    if (request === undefined)
      throw new WarrenError('IO_FAILURE', `the API server answered the request of ${node} for ${pool} with no object`);
    return request;
  }

  async requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    const request = requestOf(
      await this.#requests.get(`read the request of ${node} for ${pool}`, requestName(pool, node)),
    );
    return request !== undefined && request.pool === pool && request.node === node ? request : undefined;
  }

  async openRequests(pool?: string): Promise<AddressRequest[]> {
    const labels = { [OPEN_LABEL]: 'true', ...(pool === undefined ? {} : { [RANGE_LABEL]: labelValue(pool) }) };
    const items = await this.#requests.listAll('list open address requests', selectorOf(labels));
    return items
      .map(requestOf)
      .filter((r): r is AddressRequest => r !== undefined && r.wanted > 0 && (pool === undefined || r.pool === pool));
  }

  async requestsLentBy(lender: string): Promise<AddressRequest[]> {
    const items = await this.#requests.listAll(`list requests lent to by ${lender}`, `${lenderLabel(lender)}=true`);
    return items.map(requestOf).filter((r): r is AddressRequest => r?.grants.some((g) => g.lender === lender) === true);
  }

  async updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    const { pool, node } = request;
    const body = requestObject(requestName(pool, node), { pool, node, wanted, grants }, request.version);
    const written = await this.#requests.replace(`update the request of ${node} for ${pool}`, body);
    return written.kind === 'replaced' ? this.#requestOrFail(written.object, pool, node) : undefined;
  }

  async ping(): Promise<void> {
    await this.#ranges.list('reach the API server', '', 1);
  }

  async close(): Promise<void> {
    this.#api.close();
  }
}
