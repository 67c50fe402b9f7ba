/**
 * Address spaces on etcd (`Store.spaces` of EtcdStore): where each agent's admission of a range
 * into its address space (network_name and family) is kept, so that every agent's commits see it.
 *
 * Layout under the store's key prefix:
 *   spaces/<address space>/<range pool>   the admission record of a range (percent-encoded parts)
 *
 * Guarantees:
 * - a reading is one read at one revision: the space's records and every pool document;
 * - `admit` is one transaction: it creates the range's record and deletes the records of the ranges
 *   it retires, and applies only if no record of the space changed, and no document of a retired
 *   range nor of any of its blocks (a range compare, so blocks created since count too) was
 *   written, after the reading. So of two agents admitting overlapping ranges at once, the second
 *   decides again on what the first did, and a range cannot be retired while an allocation it
 *   made since the reading stands unseen;
 * - the records are written at admission only, never by an ADD: an allocation commit guarded by
 *   its range's admission (EtcdStore.commit) only compares that the record exists, so the guard
 *   adds no hot key, and nodes stay apart in their blocks.
 */
import type { ICompare, KVClient } from 'etcd3';
import { blockKeyPrefix, rangePoolOfKey } from '../ipam/blocks.ts';
import type { AddressSpaces, AdmissionGuard, SpaceReading } from './store.ts';

const enc = encodeURIComponent;

/** Where the admission records of an address space live, under the store's prefix. */
function spacePrefix(space: string): string {
  return `spaces/${enc(space)}/`;
}

/** The admission record of a range pool in its address space, under the store's prefix. */
export function admissionKey(guard: AdmissionGuard): string {
  return `${spacePrefix(guard.space)}${enc(guard.rangePool)}`;
}

/** The end of etcd's key range holding every key that starts with `prefix`. */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all 0xff: every key from `prefix` on
}

export interface EtcdSpacesOptions {
  /** The client's key-value service: range compares are not in the namespaced builder. */
  readonly kv: KVClient;
  /** The store's key prefix, applied here by hand for the same reason. */
  readonly prefix: string;
  /** Runs one etcd call, turning transport failures into the store's TRY_AGAIN. */
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
  /** Throws when the store must not be written (it lost its data: etcd-continuity.ts). */
  readonly writable: () => void;
  /** Addresses (allocated and resting) held by the pool document `value` of `pool`. */
  readonly heldIn: (pool: string, value: Buffer) => number;
}

export class EtcdSpaces implements AddressSpaces {
  /** The client, prefix and document parser of the store these records belong to. */
  readonly #o: EtcdSpacesOptions;
  /** The prefix as bytes, for building and cutting keys. */
  readonly #prefix: Buffer;

  constructor(options: EtcdSpacesOptions) {
    this.#o = options;
    this.#prefix = Buffer.from(options.prefix);
  }

  #key(key: string): Buffer {
    return Buffer.concat([this.#prefix, Buffer.from(key)]);
  }

  async read(space: string): Promise<SpaceReading> {
    const range = (key: string) => ({ request_range: { key: this.#key(key), range_end: prefixEnd(this.#key(key)) } });
    const ranges = [range('units/'), range(spacePrefix(space))];
    const response = await this.#o.call(`read address space ${space}`, () =>
      this.#o.kv.txn({ compare: [], success: ranges, failure: [] }),
    );
    const [units, records] = response.responses.map((r) => r.response_range?.kvs ?? []);
    const held = new Map<string, number>();
    for (const kv of units ?? []) {
      const pool = kv.key.subarray(this.#prefix.length + 'units/'.length).toString('utf8');
      const rangePool = rangePoolOfKey(pool);
      held.set(rangePool, (held.get(rangePool) ?? 0) + this.#o.heldIn(pool, kv.value));
    }
    const recordsAt = this.#prefix.length + spacePrefix(space).length;
    const admitted = (records ?? []).map((kv) => decodeURIComponent(kv.key.subarray(recordsAt).toString('utf8')));
    return { space, revision: Number(response.header.revision), admitted, held };
  }

  async admit(
    reading: SpaceReading,
    rangePool: string,
    retire: readonly string[],
  ): Promise<AdmissionGuard | undefined> {
    const guard: AdmissionGuard = { space: reading.space, rangePool };
    this.#o.writable();
    // Already admitted and nothing it overlaps is: nothing to write. Its commits' guard still checks
    // that the record lives.
    if (reading.admitted.includes(rangePool) && !retire.some((r) => reading.admitted.includes(r))) return guard;
    const notSince = (key: string, wholePrefix: boolean): ICompare => ({
      key: this.#key(key),
      ...(wholePrefix ? { range_end: prefixEnd(this.#key(key)) } : {}),
      target: 'Mod',
      result: 'Less',
      mod_revision: reading.revision + 1,
    });
    const compare = [
      notSince(spacePrefix(reading.space), true),
      ...retire.flatMap((r) => [notSince(`units/${r}`, false), notSince(`units/${blockKeyPrefix(r)}`, true)]),
    ];
    const record = Buffer.from(JSON.stringify({ range: rangePool, at: Date.now() }));
    const success = [
      { request_put: { key: this.#key(admissionKey(guard)), value: record } },
      ...retire.map((r) => ({
        request_delete_range: { key: this.#key(admissionKey({ space: reading.space, rangePool: r })) },
      })),
    ];
    const response = await this.#o.call(`admit range ${rangePool}`, () =>
      this.#o.kv.txn({ compare, success, failure: [] }),
    );
    return response.succeeded ? guard : undefined;
  }
}
