/**
 * Published allocations on the etcd cluster tier (`ClusterTier.publish`, `publicationOf`, `published`):
 * one key per published block, published/<range>/<block key> (etcd-tier/kv.ts), holding its owner's
 * allocations and counts, kept apart from the claim so that a listing of claims (placement) never reads
 * allocations.
 *
 * Guarantees:
 * - `publish` writes only while the block's claim holds the publishing node (a compare of the claim key's
 *   value, in the same transaction); otherwise it throws TRY_AGAIN and writes nothing;
 * - a publication is deleted in `unclaim`'s transaction (etcd-tier/claims.ts), so a claim key deleted by
 *   someone else (etcdctl del) leaves it for `publicationOf` to find;
 * - every listing pages; a node's publications are read through its index of claims, a page of the index
 *   at a time, and only those naming the node are answered;
 * - `withdraw` deletes a publication still naming the node at the revision read; with it the node's
 *   index key of the block, unless the block's claim (compared at the revision read) names the node.
 */
import type { IKeyValue } from 'etcd3';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Page, PublishedBlock } from '../tiered/cluster-tier.ts';
import { successionOf } from '../succession.ts';
import {
  type TierKv,
  blockRecord,
  claimOfValue,
  claimValue,
  lastSegment,
  nodeIndex,
  nodeIndexOf,
  publishedOf,
  publishedRecord,
} from './kv.ts';

/** Rounds of read-and-delete against a publication or claim that keeps changing, before TRY_AGAIN. */
const WITHDRAW_ROUNDS = 3;

function publicationOfKv(kv: IKeyValue, key: string): PublishedBlock {
  const v = JSON.parse(kv.value.toString('utf8')) as {
    node: string;
    counts: PublishedBlock['counts'];
    allocations: PublishedBlock['allocations'];
    at: number;
    revision?: number;
    lineage?: unknown;
    succession?: unknown;
    ahead?: string[];
  };
  const revision = v.revision === undefined ? {} : { revision: v.revision };
  const lineage = typeof v.lineage === 'string' ? { lineage: v.lineage } : {};
  const ahead = Array.isArray(v.ahead) && v.ahead.length > 0 ? { ahead: v.ahead } : {};
  const { counts, allocations } = v;
  const succession = successionOf(v.succession);
  const more = { ...revision, ...lineage, ...defined({ succession }), ...ahead };
  return { key, node: v.node, counts, allocations, publishedAt: v.at, ...more };
}

export class EtcdTierPublications {
  readonly #kv: TierKv;

  constructor(kv: TierKv) {
    this.#kv = kv;
  }

  async publish(block: PublishedBlock): Promise<void> {
    const record = this.#kv.key(blockRecord(block.key));
    const { node, counts, allocations, publishedAt: at, revision, lineage, succession } = block;
    const ahead = block.ahead === undefined || block.ahead.length === 0 ? {} : { ahead: block.ahead };
    const value = { node, counts, allocations, at, ...defined({ revision, lineage, succession }), ...ahead };
    const response = await this.#kv.write(`publish block ${block.key}`, {
      compare: [{ key: record, target: 'Value', result: 'Equal', value: claimValue(block.node) }],
      success: [
        { request_put: { key: this.#kv.key(publishedRecord(block.key)), value: Buffer.from(JSON.stringify(value)) } },
      ],
      failure: [],
    });
    if (!response.succeeded) throw new WarrenError('TRY_AGAIN', `block ${block.key} is not claimed by ${block.node}`);
  }

  async withdraw(key: string, node: string): Promise<void> {
    for (let round = 1; round <= WITHDRAW_ROUNDS; round++) {
      const published = await this.#kv.get(`read the publication of ${key}`, publishedRecord(key));
      if (published === undefined || publicationOfKv(published, key).node !== node) return;
      const claim = await this.#kv.get(`read the claim of ${key}`, blockRecord(key));
      const claimed = claim !== undefined && claimOfValue(key, claim.value, '', '')?.node === node;
      const response = await this.#kv.write(`withdraw the publication of ${key}`, {
        compare: [
          { key: published.key, target: 'Mod', result: 'Equal', mod_revision: published.mod_revision },
          claim === undefined
            ? { key: this.#kv.key(blockRecord(key)), target: 'Create', result: 'Equal', create_revision: 0 }
            : { key: claim.key, target: 'Mod', result: 'Equal', mod_revision: claim.mod_revision },
        ],
        success: [
          { request_delete_range: { key: published.key } },
          ...(claimed ? [] : [{ request_delete_range: { key: this.#kv.key(nodeIndex(node, key)) } }]),
        ],
        failure: [],
      });
      if (response.succeeded) return;
    }
    throw new WarrenError('TRY_AGAIN', `the publication of ${key} kept changing while it was withdrawn`);
  }

  async publicationOf(key: string): Promise<PublishedBlock | undefined> {
    const kv = await this.#kv.get(`read the publication of ${key}`, publishedRecord(key));
    return kv === undefined ? undefined : publicationOfKv(kv, key);
  }

  async published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    const parse = (kv: IKeyValue): PublishedBlock => publicationOfKv(kv, lastSegment(this.#kv.relative(kv)));
    if (filter.node === undefined) {
      const got = await this.#kv.page('list published blocks', publishedOf(filter.pool), page);
      const items = got.kvs.map(parse);
      return got.continue === undefined ? { items } : { items, continue: got.continue };
    }
    // A node's publications: a page of its index, then the publications of those blocks.
    const node = filter.node;
    const index = await this.#kv.page(`list the blocks of ${node}`, nodeIndexOf(node, filter.pool), page, {
      keysOnly: true,
    });
    const keys = index.kvs.map((kv) => publishedRecord(lastSegment(this.#kv.relative(kv))));
    const items = (await this.#kv.getMany(`read the publications of ${node}`, keys))
      .map(parse)
      .filter((b) => b.node === node);
    return index.continue === undefined ? { items } : { items, continue: index.continue };
  }
}
