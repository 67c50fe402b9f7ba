/**
 * The old one-tier etcd layout, read only to move it (etcd-tier/legacy-import.ts): the JSON the
 * old store kept per ledger (`units/<pool>`), and where an owner's record lived (`owners/...`).
 * A document that does not parse is IO_FAILURE naming the pool, never taken for an empty one.
 */
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { LedgerDescription } from '../store.ts';

export interface UnitDoc {
  affinity?: string;
  cursor?: string;
  description?: LedgerDescription;
  /**
   * The pool's cooldown attribute. Documents written before it existed have only the copy inside
   * `description`, which stands in for it until the pool's metadata is next written.
   */
  cooldownSeconds?: number;
  /** address → owner [network, containerID, ifname] */
  allocations: Record<string, [string, string, string]>;
  /** address → reusable at (ms since epoch) */
  resting: Record<string, number>;
  /**
   * address → [the `resting` value it belongs to, boot, monotonic ms]: the rest's end on the
   * releasing boot's monotonic clock. Apart from `resting`, whose numbers agents of older versions
   * read; used only while it belongs to the address's current `resting` value, so a stale one left
   * by an older agent's write is never taken for a newer rest's.
   */
  restStamps?: Record<string, [number, string, number]>;
}

const enc = encodeURIComponent;

/** Where an owner's record in a range pool lives in etcd: a key layout (identity is ipam's ownerKey). */
export function ownerRecordKey(network: string, containerID: string, ifname: string, pool: string): string {
  return `owners/${enc(network)}/${enc(containerID)}/${enc(ifname)}/${enc(rangePoolOfKey(pool))}`;
}

function emptyDoc(): UnitDoc {
  return { allocations: {}, resting: {} };
}

export function parseDoc(pool: string, value: Buffer | undefined): UnitDoc {
  if (value === undefined || value.length === 0) return emptyDoc();
  try {
    const doc = JSON.parse(value.toString('utf8')) as UnitDoc;
    if (!isPlainObject(doc) || typeof doc.allocations !== 'object' || typeof doc.resting !== 'object')
      throw new Error('not a pool document');
    return doc;
  } catch (error) {
    throw new WarrenError('IO_FAILURE', `etcd document of pool ${pool} is corrupt: ${messageOf(error)}`);
  }
}
