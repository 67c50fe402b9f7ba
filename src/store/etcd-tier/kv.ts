/**
 * The key layout of the etcd cluster tier (etcd-tier/tier.ts) and the one way its modules reach etcd:
 * every key under the tier's own prefix, every call through `call` (transport failures become
 * TRY_AGAIN naming etcd; each response's header is checked by etcd-tier/continuity.ts), and every
 * listing in pages.
 *
 * Layout under the prefix (every path segment percent-encoded, as the etcd store's keys are):
 *   identity                              the tier's identity record (etcd-tier/identity.ts)
 *   recovery                              the recovery marker after the store lost its data (etcd-tier/recovery.ts)
 *   nodes/<node>, tasks/<task>            announcements and chores (etcd-tier/membership.ts, on leases)
 *   ranges/<range>                        the RangeRecord (created if absent, never rewritten)
 *   blocks/<range>/<block key>            a claim {node}; uid = its create revision, version = its mod revision
 *   nodes-blocks/<node>/<range>/<block key>  the node's index of its claims, written and deleted in the
 *                                         claim's own transactions: `claimsOf(node)` reads only these
 *   published/<range>/<block key>         a block's publication (its owner's allocations and counts)
 *   requests/<range>/<node>               an address request (version = its mod revision)
 *   spaces/<address space>/<range>        a range's admission into its address space
 *   units/..., owners/...                 the old one-tier layout, read and removed by legacy-import.ts
 *
 * Guarantees:
 * - nothing is written to a store this process stopped trusting (etcd-tier/continuity.ts: it lost its
 *   data, or this node's name was taken): every write (`write`) is refused with TRY_AGAIN naming why
 *   while halted, and once the store's identity is known every write also compares it, so no claim
 *   or publication lands in a wiped or replaced etcd even before anything else noticed (a write that
 *   fails on it halts, unless the operator accepted the store while its identity was read: the
 *   identity known before is the old store's, and the check begun before the read drops the halt);
 * - a page answers at most `limit` records (default 500), and a `continue` (the last key answered)
 *   exactly when etcd said more remain; the next page starts after that key;
 * - keys are ASCII (percent-encoded), so the byte order etcd pages by is the string order.
 */
import type { IKeyValue, IRangeResponse, ITxnRequest, ITxnResponse, KVClient } from 'etcd3';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { BlockClaim, ClaimState } from '../cluster.ts';
import { type EtcdContinuity, STORE_LOST_RECOVERY } from './continuity.ts';
import { IDENTITY_KEY } from './identity.ts';

const enc = encodeURIComponent;
export const DEFAULT_LIMIT = 500;

export const rangeKey = (pool: string): string => `ranges/${enc(pool)}`;
export const blocksOf = (pool: string): string => `blocks/${enc(pool)}/`;
export const blockRecord = (key: string): string => `${blocksOf(rangePoolOfKey(key))}${enc(key)}`;
export const nodeIndexOf = (node: string, pool?: string): string =>
  `nodes-blocks/${enc(node)}/${pool === undefined ? '' : `${enc(pool)}/`}`;
export const nodeIndex = (node: string, key: string): string => `${nodeIndexOf(node, rangePoolOfKey(key))}${enc(key)}`;
export const publishedOf = (pool?: string): string => `published/${pool === undefined ? '' : `${enc(pool)}/`}`;
export const publishedRecord = (key: string): string => `${publishedOf(rangePoolOfKey(key))}${enc(key)}`;
export const requestsOf = (pool?: string): string => `requests/${pool === undefined ? '' : `${enc(pool)}/`}`;
export const requestRecord = (pool: string, node: string): string => `${requestsOf(pool)}${enc(node)}`;
export const spacesOf = (space: string): string => `spaces/${enc(space)}/`;
export const spaceRecord = (space: string, pool: string): string => `${spacesOf(space)}${enc(pool)}`;

/** The value of a claim key: compared byte for byte by `publish` and `unclaim`, so always written by this function. */
export function claimValue(node: string): Buffer {
  return Buffer.from(JSON.stringify({ node }));
}

/** The value of a claim key in a handover's state (ClusterTier.moveClaim): `claimValue` once settled. */
export function claimStateValue(state: ClaimState): Buffer {
  const { node, offeredTo, takenFrom } = state;
  return Buffer.from(JSON.stringify({ node, ...defined({ offeredTo, takenFrom }) }));
}

/** The claim a claim key's value names (its create and mod revisions: uid and version), or undefined. */
export function claimOfValue(key: string, value: Buffer, uid: string, version: string): BlockClaim | undefined {
  try {
    const v = JSON.parse(value.toString('utf8')) as { node?: unknown; offeredTo?: unknown; takenFrom?: unknown };
    if (typeof v.node !== 'string') return undefined;
    const offeredTo = typeof v.offeredTo === 'string' ? v.offeredTo : undefined;
    const takenFrom = typeof v.takenFrom === 'string' ? v.takenFrom : undefined;
    return { key, node: v.node, uid, version, ...defined({ offeredTo, takenFrom }) };
  } catch {
    return undefined;
  }
}

/** The last segment of a key, decoded (the block key, node or range it names). */
export function lastSegment(key: string): string {
  return decodeURIComponent(key.slice(key.lastIndexOf('/') + 1));
}

/** The end of etcd's key range holding every key that starts with `prefix`. */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** A numeric revision from a uid or version string; undefined for one etcd never made. */
export function revisionOf(text: string): number | undefined {
  return /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : undefined;
}

export interface KvPage {
  readonly kvs: readonly IKeyValue[];
  readonly continue?: string;
}

export class TierKv {
  readonly #kv: KVClient;
  readonly #prefix: Buffer;
  readonly #continuity: EtcdContinuity;

  constructor(kv: KVClient, prefix: string, continuity: EtcdContinuity) {
    this.#kv = kv;
    this.#prefix = Buffer.from(prefix);
    this.#continuity = continuity;
  }

  /** The full key of `key` under the prefix. */
  key(key: string): Buffer {
    return Buffer.concat([this.#prefix, Buffer.from(key)]);
  }

  /** The key of `kv` without the prefix. */
  relative(kv: IKeyValue): string {
    return kv.key.subarray(this.#prefix.length).toString('utf8');
  }

  /** Runs one etcd call: TRY_AGAIN on failure, its header checked against what was seen before it left. */
  async call<T>(what: string, body: () => Promise<T>): Promise<T> {
    return this.#continuity.call('etcd tier', what, body);
  }

  async get(what: string, key: string): Promise<IKeyValue | undefined> {
    const response = await this.call(what, () => this.#kv.range({ key: this.key(key) }));
    return response.kvs[0];
  }

  /** A transaction that only reads (a write goes through `write`). */
  async txn(what: string, request: ITxnRequest): Promise<ITxnResponse> {
    return this.call(what, () => this.#kv.txn(request));
  }

  /** Throws TRY_AGAIN naming why while the store is not trusted. */
  refuseWhileHalted(): void {
    const halt = this.#continuity.halted();
    if (halt !== undefined) throw new WarrenError('TRY_AGAIN', halt.message);
  }

  /**
   * A transaction that writes: refused while halted; comparing the store's identity once it is
   * known. A failed comparison is the caller's (`succeeded` false), unless the identity is what
   * changed: then the store is halted and the write refused.
   */
  async write(what: string, request: ITxnRequest): Promise<ITxnResponse> {
    this.refuseWhileHalted();
    const identity = this.#continuity.identity;
    const compare =
      identity === undefined
        ? request.compare
        : [
            ...(request.compare ?? []),
            {
              key: this.key(IDENTITY_KEY),
              target: 'Value' as const,
              result: 'Equal' as const,
              value: Buffer.from(identity),
            },
          ];
    const response = await this.call(what, () => this.#kv.txn({ ...request, ...defined({ compare }) }));
    if (!response.succeeded && identity !== undefined) await this.checkIdentity('read the store identity');
    return response;
  }

  /**
   * Reads the identity record (a linearizable read: a member with a quorum behind it answers) and
   * halts when it is not the one known; throws TRY_AGAIN naming why while halted.
   */
  async checkIdentity(what: string): Promise<void> {
    const check = this.#continuity.begin();
    const identity = this.#continuity.identity;
    const now = (await this.get(what, IDENTITY_KEY))?.value.toString('utf8');
    // Accepted while the read was out, the check drops the halt: the identity known before says
    // nothing of the store accepted.
    if (identity !== undefined && now !== identity)
      check.halt(
        'store-lost',
        `etcd at prefix ${this.#prefix.toString('utf8')} lost its data: its identity record is ` +
          `${now === undefined ? 'gone' : `${now}, not ${identity}`}. ${STORE_LOST_RECOVERY}`,
      );
    this.refuseWhileHalted();
  }

  /** One page of the keys under `prefix`, after the `continue` key (or from `startAt`) when given. */
  async page(
    what: string,
    prefix: string,
    page?: { limit: number; continue?: string },
    o: { keysOnly?: boolean; startAt?: string } = {},
  ): Promise<KvPage> {
    const limit = Math.max(1, page?.limit ?? DEFAULT_LIMIT);
    const after = page?.continue;
    // The next key after `after` is `after` with a zero byte appended.
    const start =
      o.startAt !== undefined
        ? this.key(o.startAt)
        : after === undefined
          ? this.key(prefix)
          : Buffer.concat([this.key(after), Buffer.from([0])]);
    if (after !== undefined && !after.startsWith(prefix))
      throw new WarrenError('INVALID_CONFIG', `continue token ${after} is not one of this listing`);
    const response: IRangeResponse = await this.call(what, () =>
      this.#kv.range({
        key: start,
        range_end: prefixEnd(this.key(prefix)),
        limit,
        ...(o.keysOnly === true ? { keys_only: true } : {}),
      }),
    );
    const last = response.kvs.at(-1);
    return response.more && last !== undefined
      ? { kvs: response.kvs, continue: this.relative(last) }
      : { kvs: response.kvs };
  }

  /** Every key under `prefix`, page by page. */
  async all(what: string, prefix: string, o: { keysOnly?: boolean } = {}): Promise<IKeyValue[]> {
    const out: IKeyValue[] = [];
    let from: string | undefined;
    do {
      const page = await this.page(
        what,
        prefix,
        from === undefined ? undefined : { limit: DEFAULT_LIMIT, continue: from },
        o,
      );
      out.push(...page.kvs);
      from = page.continue;
    } while (from !== undefined);
    return out;
  }

  /**
   * Every key under `prefix` (or the one key `key`, when `prefix` is false) at one revision, page by
   * page (the first page's revision is the one every later page is read at): what a watch starts
   * from (etcd-tier/key-watch.ts), the revision its events follow.
   */
  async snapshot(what: string, key: string, prefix: boolean): Promise<{ kvs: IKeyValue[]; revision: number }> {
    const end = prefix ? { range_end: prefixEnd(this.key(key)) } : {};
    const out: IKeyValue[] = [];
    let start = this.key(key);
    let revision: number | undefined;
    for (;;) {
      const at = revision === undefined ? {} : { revision };
      const response = await this.call(what, () =>
        this.#kv.range({ key: start, ...end, ...(prefix ? { limit: DEFAULT_LIMIT } : {}), ...at }),
      );
      revision ??= Number(response.header.revision);
      out.push(...response.kvs);
      const last = response.kvs.at(-1);
      if (!response.more || last === undefined) return { kvs: out, revision };
      start = Buffer.concat([last.key, Buffer.from([0])]);
    }
  }

  /**
   * The values of `keys` (absent ones left out), read in transactions of at most 100 reads; at
   * `revision` when given (a snapshot's).
   */
  async getMany(what: string, keys: readonly string[], revision?: number): Promise<IKeyValue[]> {
    const out: IKeyValue[] = [];
    for (let i = 0; i < keys.length; i += 100) {
      const chunk = keys.slice(i, i + 100);
      const response = await this.txn(what, {
        compare: [],
        success: chunk.map((k) => ({ request_range: { key: this.key(k), ...defined({ revision }) } })),
        failure: [],
      });
      for (const r of response.responses) out.push(...(r.response_range?.kvs ?? []));
    }
    return out;
  }
}
