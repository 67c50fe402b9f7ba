/**
 * Address spaces on the etcd cluster tier (`ClusterTier.spaces`): a range's admission into its
 * address space is the key spaces/<space>/<range> (etcd-tier/kv.ts has the layout).
 *
 * What a reading says a range holds (`held`) is the number of its claimed blocks, counted by etcd
 * (a count-only read, no records): a claimed block counts 1 whatever it publishes, since it may hold
 * addresses not yet published. So `held` never says 0 of a range that holds an address in a claimed
 * block, and a reading costs one read of the range records (a handful) and one count per range of
 * the space.
 *
 * Guarantees:
 * - `admit` is one transaction: it creates the range's admission and deletes those of the ranges
 *   it retires, and applies only if no admission of the space changed and no block of a retired
 *   range was claimed after the reading (range compares on the mod revision). So of two agents
 *   admitting at once from one reading, exactly one applies; the other decides again;
 * - a range is retired only while it holds no claimed block that the reading did not see.
 */
import type { ICompare } from 'etcd3';
import type { RangeRecord } from '../tiered/cluster-tier.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from '../store.ts';
import { type TierKv, blocksOf, lastSegment, prefixEnd, spaceRecord, spacesOf } from './kv.ts';

export class EtcdTierSpaces implements AddressSpaces {
  readonly #kv: TierKv;

  constructor(kv: TierKv) {
    this.#kv = kv;
  }

  async read(space: string): Promise<SpaceReading> {
    const kv = this.#kv;
    const prefixRange = (p: string) => ({ request_range: { key: kv.key(p), range_end: prefixEnd(kv.key(p)) } });
    const first = await kv.txn(`read address space ${space}`, {
      compare: [],
      success: [prefixRange('ranges/'), prefixRange(spacesOf(space))],
      failure: [],
    });
    const [ranges, records] = first.responses.map((r) => r.response_range?.kvs ?? []);
    const admitted = (records ?? []).map((r) => lastSegment(kv.relative(r)));
    const pools: string[] = [];
    for (const r of ranges ?? []) {
      const record = JSON.parse(r.value.toString('utf8')) as RangeRecord;
      if (record.space === space) pools.push(record.pool);
    }
    const held = new Map<string, number>();
    for (let i = 0; i < pools.length; i += 100) {
      const chunk = pools.slice(i, i + 100);
      const counts = await kv.txn(`count the claims of address space ${space}`, {
        compare: [],
        success: chunk.map((pool) => ({
          request_range: {
            key: kv.key(blocksOf(pool)),
            range_end: prefixEnd(kv.key(blocksOf(pool))),
            count_only: true,
          },
        })),
        failure: [],
      });
      chunk.forEach((pool, j) => {
        const count = Number(counts.responses[j]?.response_range?.count ?? 0);
        if (count > 0) held.set(pool, count);
      });
    }
    return { space, revision: Number(first.header.revision), admitted, held };
  }

  async admit(
    reading: SpaceReading,
    rangePool: string,
    retire: readonly string[],
  ): Promise<AdmissionGuard | undefined> {
    const kv = this.#kv;
    const guard: AdmissionGuard = { space: reading.space, rangePool };
    if (reading.admitted.includes(rangePool) && !retire.some((r) => reading.admitted.includes(r))) return guard;
    const notSince = (prefix: string): ICompare => ({
      key: kv.key(prefix),
      range_end: prefixEnd(kv.key(prefix)),
      target: 'Mod',
      result: 'Less',
      mod_revision: reading.revision + 1,
    });
    const compare = [notSince(spacesOf(reading.space)), ...retire.map((r) => notSince(blocksOf(r)))];
    const record = Buffer.from(JSON.stringify({ range: rangePool, at: Date.now() }));
    const success = [
      { request_put: { key: kv.key(spaceRecord(reading.space, rangePool)), value: record } },
      ...retire.map((r) => ({ request_delete_range: { key: kv.key(spaceRecord(reading.space, r)) } })),
    ];
    const response = await kv.write(`admit range ${rangePool}`, { compare, success, failure: [] });
    return response.succeeded ? guard : undefined;
  }
}
