/**
 * Block claims and range records on the etcd cluster tier (`ClusterTier.pinRange`, `claim`,
 * `claimOf`, `claimsOf`, `claimHolders`, `claimsIn`, `unclaim`, `moveClaim`): one key per claimed block,
 * blocks/<range>/<block key>, holding its node, with the node's index key beside it,
 * nodes-blocks/<node>/<range>/<block key>, and one key per range record, ranges/<range> (the layout
 * is in etcd-tier/kv.ts). etcd-tier/tier.ts wires it into the tier beside publications, requests and
 * spaces.
 *
 * Guarantees (the contract's, src/store/tiered/cluster-tier.ts, and how):
 * - a block is claimed at most once: `claim` is a transaction creating blocks/<range>/<block> only
 *   if its create revision is 0, with the node's index key in the same transaction; in a range whose
 *   blocks grow, the same transaction compares that no block sharing an address with it exists
 *   (ipam/blocks.ts overlappingBlockKeys: at most 2^(smallest - its prefix + 1) keys, 34 for a /27
 *   in a /24), so of two overlapping claims only one commits;
 * - a claim stands only if its range was admitted in its address space at the claim's revision (read
 *   in the same transaction; a space with no admission at all admits everything): so a claim and an
 *   admission retiring its range, racing, never both stand (see `claim`);
 * - `unclaim` is a transaction comparing the claim key's create revision (the uid) and mod revision
 *   (the version): it deletes the claim, its index key and its publication (etcd-tier/publications.ts;
 *   not another node's: read first) only if the claim is exactly the one named ('changed' otherwise,
 *   'gone' when there is none). A block given back and claimed again has another create revision, so
 *   the old claim never removes the new one (ABA);
 * - `moveClaim` (a handover) is a transaction comparing the same two revisions: it rewrites the
 *   claim key's value (its node, `offeredTo`, `takenFrom`) and moves the node's index key with it;
 * - a range record is created if absent, never rewritten: the first block size wins;
 * - every listing pages (at most `limit` records a response); `claimsOf(node)` reads that node's
 *   index keys and their claims, `claimHolders` the index keys only (skipping each node's others),
 *   so no call reads a whole range but `claimsIn`'s pages.
 */
import type { IKeyValue } from 'etcd3';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { overlappingBlockKeys, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { BlockClaim, ClaimState, Page, RangeRecord, UnclaimResult } from '../tiered/cluster-tier.ts';
import {
  type TierKv,
  blockRecord,
  blocksOf,
  claimOfValue,
  claimStateValue,
  claimValue,
  lastSegment,
  nodeIndex,
  nodeIndexOf,
  prefixEnd,
  publishedRecord,
  rangeKey,
  revisionOf,
  spacesOf,
} from './kv.ts';

function claimOfKv(kv: IKeyValue, key: string): BlockClaim | undefined {
  return claimOfValue(key, kv.value, kv.create_revision, kv.mod_revision);
}

export class EtcdTierClaims {
  readonly #kv: TierKv;

  constructor(kv: TierKv) {
    this.#kv = kv;
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
    // Blocks that grow: none of the blocks sharing an address with this one may exist either.
    const overlapping =
      range.largestBlockPrefix === undefined
        ? []
        : overlappingBlockKeys(key, range.largestBlockPrefix, range.blockPrefix).map((k) =>
            this.#kv.key(blockRecord(k)),
          );
    const response = await this.#kv.write(`claim block ${key}`, {
      compare: [record, ...overlapping].map((k) => ({
        key: k,
        target: 'Create' as const,
        result: 'Equal' as const,
        create_revision: 0,
      })),
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
          ...defined({ startAt: from }),
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

  async moveClaim(claim: BlockClaim, state: ClaimState): Promise<BlockClaim | undefined> {
    const record = this.#kv.key(blockRecord(claim.key));
    const [uid, version] = [revisionOf(claim.uid), revisionOf(claim.version)];
    if (uid === undefined || version === undefined) return undefined;
    const index = (node: string) => this.#kv.key(nodeIndex(node, claim.key));
    // A claim that changes node moves its index key in the same transaction (claimsOf, the watches).
    const moved =
      state.node === claim.node
        ? []
        : [
            { request_delete_range: { key: index(claim.node) } },
            { request_put: { key: index(state.node), value: Buffer.alloc(0) } },
          ];
    const response = await this.#kv.write(`hand block ${claim.key} over`, {
      compare: [
        { key: record, target: 'Create', result: 'Equal', create_revision: uid },
        { key: record, target: 'Mod', result: 'Equal', mod_revision: version },
      ],
      success: [{ request_put: { key: record, value: claimStateValue(state) } }, ...moved],
      failure: [],
    });
    if (!response.succeeded) return undefined;
    return { key: claim.key, uid: claim.uid, version: response.header.revision, ...state };
  }

  async unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    const record = this.#kv.key(blockRecord(claim.key));
    const uid = revisionOf(claim.uid);
    const version = revisionOf(claim.version);
    if (uid !== undefined && version !== undefined) {
      // Another node's publication stays (a claim written for this node by hand: tiered/stray-claims.ts);
      // only the claim's node publishes while it holds the claim, so it cannot change before the write.
      const published = await this.#kv.get(`read the publication of ${claim.key}`, publishedRecord(claim.key));
      const theirs = published !== undefined && publishedNode(published.value.toString('utf8')) !== claim.node;
      const response = await this.#kv.write(`give back block ${claim.key}`, {
        compare: [
          { key: record, target: 'Create', result: 'Equal', create_revision: uid },
          { key: record, target: 'Mod', result: 'Equal', mod_revision: version },
          { key: record, target: 'Value', result: 'Equal', value: claimValue(claim.node) },
        ],
        success: [
          { request_delete_range: { key: record } },
          { request_delete_range: { key: this.#kv.key(nodeIndex(claim.node, claim.key)) } },
          ...(theirs ? [] : [{ request_delete_range: { key: this.#kv.key(publishedRecord(claim.key)) } }]),
        ],
        failure: [{ request_range: { key: record, count_only: true } }],
      });
      if (response.succeeded) return 'released';
      return Number(response.responses[0]?.response_range?.count ?? 0) > 0 ? 'changed' : 'gone';
    }
    // A uid or version etcd never made names no claim: only whether one is there is left to say.
    return (await this.claimOf(claim.key)) === undefined ? 'gone' : 'changed';
  }
}

/** The node a publication's value names; undefined when it is not one Warren writes. */
function publishedNode(text: string): string | undefined {
  try {
    const value = JSON.parse(text) as { node?: unknown };
    return typeof value.node === 'string' ? value.node : undefined;
  } catch {
    return undefined;
  }
}
