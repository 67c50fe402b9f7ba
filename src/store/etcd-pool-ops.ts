/**
 * What a commit's ops do to a pool's document in etcd (etcd-documents.ts), worked out before the
 * transaction that writes it: the new document, and the owner records to create, rewrite and
 * delete beside it; or the conflict that refuses the whole commit. Pure: the document given is not
 * changed (the edit is on a copy), so a refused commit leaves the cached document as it was.
 *
 * The checks are those of the SQLite store's constraints: an address is allocated once per pool,
 * an owner holds one address per range pool (its record key is per range pool), and a relocation
 * names the address's current owner.
 */
import type { Allocation } from '../ipam/allocation.ts';
import { type UnitDoc, ownerRecordKey } from './etcd-documents.ts';
import type { PoolOp } from './store.ts';

export type PoolEdit =
  | {
      readonly kind: 'edited';
      readonly doc: UnitDoc;
      /** Owner records to create, by key: each must not exist yet (the transaction compares it). */
      readonly creates: ReadonlyMap<string, Allocation>;
      /** Owner records of released addresses. */
      readonly deletes: ReadonlySet<string>;
      /** Owner records rewritten in place (a new netns). */
      readonly relocations: ReadonlyMap<string, Allocation>;
    }
  | { readonly kind: 'conflict'; readonly reason: string };

const conflict = (reason: string): PoolEdit => ({ kind: 'conflict', reason });

/** `ops` applied in order to a copy of `base`, the document of `pool`. */
export function applyOps(pool: string, base: UnitDoc, ops: readonly PoolOp[]): PoolEdit {
  const doc: UnitDoc = structuredClone(base);
  const creates = new Map<string, Allocation>();
  const deletes = new Set<string>();
  const relocations = new Map<string, Allocation>();
  for (const op of ops) {
    switch (op.op) {
      case 'allocate': {
        const a = op.allocation;
        if (a.pool !== pool) return conflict(`allocation for pool ${a.pool} committed to ${pool}`);
        if (doc.allocations[a.address] !== undefined) return conflict(`${a.address} is already allocated in ${pool}`);
        const key = ownerRecordKey(a.network, a.containerID, a.ifname, pool);
        if (creates.has(key)) {
          return conflict(`container ${a.containerID} (${a.ifname}) already holds an address in ${pool}`);
        }
        doc.allocations[a.address] = [a.network, a.containerID, a.ifname];
        delete doc.resting[a.address];
        if (doc.restStamps !== undefined) delete doc.restStamps[a.address];
        creates.set(key, a);
        deletes.delete(key);
        break;
      }
      case 'release': {
        const owner = doc.allocations[op.address];
        if (owner !== undefined) {
          delete doc.allocations[op.address];
          const key = ownerRecordKey(owner[0], owner[1], owner[2], pool);
          if (creates.delete(key) === false) deletes.add(key);
        }
        if (op.reusableAt !== undefined) doc.resting[op.address] = op.reusableAt;
        if (op.reusableAt !== undefined && op.reusableStamp !== undefined) {
          doc.restStamps ??= {};
          doc.restStamps[op.address] = [op.reusableAt, op.reusableStamp.boot, op.reusableStamp.at];
        } else if (doc.restStamps !== undefined) delete doc.restStamps[op.address];
        break;
      }
      case 'relocate': {
        const a = op.allocation;
        const owner = doc.allocations[a.address];
        const held =
          owner !== undefined && owner[0] === a.network && owner[1] === a.containerID && owner[2] === a.ifname;
        if (a.pool !== pool || !held) {
          return conflict(`${a.address} is not held by container ${a.containerID} (${a.ifname}) in ${pool}`);
        }
        // The owner record exists while the document names the owner (both are written together),
        // so rewriting it under the document's revision check cannot resurrect a released one.
        relocations.set(ownerRecordKey(a.network, a.containerID, a.ifname, pool), a);
        break;
      }
      case 'unrest':
        delete doc.resting[op.address];
        if (doc.restStamps !== undefined) delete doc.restStamps[op.address];
        break;
      case 'cursor':
        doc.cursor = op.address;
        break;
      case 'describe':
        doc.description = op.description;
        break;
      case 'cooldown':
        doc.cooldownSeconds = op.seconds;
        break;
      case 'claim':
        doc.affinity = op.node;
        break;
      case 'unclaim':
        delete doc.affinity;
        break;
      default: {
        const never: never = op;
        throw new Error(`unknown pool op ${JSON.stringify(never)}`);
      }
    }
  }
  return { kind: 'edited', doc, creates, deletes, relocations };
}
