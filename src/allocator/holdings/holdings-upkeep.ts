/**
 * The upkeep of holdings on one node (holdings.ts), run periodically (the agent's cluster upkeep):
 * - as owner: a placeholder whose record is gone (the holding ended, on any node; or a first ADD
 *   that died between placeholder and record) is released once it has been missing for the grace on
 *   the monotonic clock, never sooner, so a first ADD under way is not undone; a record owned here
 *   whose placeholder is missing (this node's store lost it) is held again when the address is free;
 *   a record whose placeholder this node's claim of a forgotten node's block wrote becomes this node's;
 * - as user: the uses this node's store records (use ledgers, ipam/holding-key.ts) are reported into
 *   their records' `uses`, and entries of this node no longer recorded here are taken out, so the
 *   records show which pods use each address within one run of any change.
 *
 * The records it reads every run (owned here, used here) come from watches' copies
 * (watched-holdings.ts): an idle node's upkeep makes no request; it writes only what changed.
 *
 * Guarantees: placeholders are read before records (a placeholder is written before its record,
 * so one read here whose record exists is seen with it); it never releases a pod's allocation,
 * only placeholders; a failure for one holding is reported and the others are still kept.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import { isUseKey, useLedgerOf } from '../../ipam/holding-key.ts';
import type { ClusterHoldings, HoldingRecord, HoldingUse } from '../../store/cluster-holdings.ts';
import type { Store } from '../../store/store.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { HELD_NETWORK, placeholderOwner } from './placeholders.ts';

export interface HoldingsUpkeepOptions {
  readonly store: Store;
  readonly records: ClusterHoldings;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  readonly locks: KeyedMutex;
  /** Releases this node's placeholder (holdings.ts), under the block's lock. */
  readonly releasePlaceholder: (key: string, block: string, address: string) => Promise<boolean>;
}

export interface HoldingsReport {
  /** Placeholders written again for records owned here (`address for key`). */
  readonly held: string[];
  /** Placeholders released because their record was gone. */
  readonly released: string[];
  /** Records whose uses were written. */
  readonly reported: number;
  readonly errors: string[];
}

export class HoldingsUpkeep {
  readonly #o: HoldingsUpkeepOptions;
  /** Placeholders seen without their record, and since when (monotonic ms), by `block address`. */
  readonly #missingSince = new Map<string, number>();
  /** Whether a run read the records owned here since the start. */
  #started = false;
  /** Whether the last run had uses to report (or none ran yet): the next reads the records used here. */
  #reporting = true;

  constructor(options: HoldingsUpkeepOptions) {
    this.#o = options;
  }

  async run(graceMs: number): Promise<HoldingsReport> {
    const errors: string[] = [];
    const { held, released } = await this.#keepPlaceholders(graceMs, errors);
    const reported = await this.#reportUses(errors);
    return { held, released, reported, errors };
  }

  async #keepPlaceholders(graceMs: number, errors: string[]): Promise<{ held: string[]; released: string[] }> {
    const { store, records, node, clock } = this.#o;
    const placeholders = await store.list({ network: HELD_NETWORK });
    // The records owned here are read while this node keeps placeholders, and once after a start (a
    // store that lost them): an idle node costs the cluster no request for them.
    const owned = placeholders.length > 0 || !this.#started ? await records.list({ owner: node }) : [];
    this.#started = true;
    const recorded = new Set(owned.map((r) => placeholderId(r.block, r.address, r.key)));
    const now = clock.monotonic();
    const released: string[] = [];
    const seen = new Set<string>();
    for (const p of placeholders) {
      const id = placeholderId(p.pool, p.address, p.containerID);
      seen.add(id);
      if (recorded.has(id) || (await this.#adopted(p))) {
        this.#missingSince.delete(id);
        continue;
      }
      const since = this.#missingSince.get(id);
      if (since === undefined) this.#missingSince.set(id, now);
      if ((since ?? now) + graceMs > now) continue;
      try {
        if (await this.#o.releasePlaceholder(p.containerID, p.pool, p.address))
          released.push(`${p.address} (held for ${p.containerID})`);
        this.#missingSince.delete(id);
      } catch (error) {
        errors.push(`releasing the placeholder of ${p.address} for ${p.containerID}: ${messageOf(error)}`);
      }
    }
    for (const id of this.#missingSince.keys()) if (!seen.has(id)) this.#missingSince.delete(id);
    const have = new Set(placeholders.map((p) => placeholderId(p.pool, p.address, p.containerID)));
    const held: string[] = [];
    for (const record of owned) {
      if (have.has(placeholderId(record.block, record.address, record.key))) continue;
      try {
        if (await this.#holdAgain(record)) held.push(`${record.address} for ${record.key}`);
        else errors.push(`${record.address}, held for ${record.key}, is taken in ${record.block} on node ${node}`);
      } catch (error) {
        errors.push(`holding ${record.address} for ${record.key} again: ${messageOf(error)}`);
      }
    }
    return { held, released };
  }

  /**
   * Whether placeholder `p`, owned by no record of this node, is a record's whose block this node
   * took over (its owner forgotten; the claim held it: holdings.ts claimOps): it is made this node's.
   */
  async #adopted(p: Allocation): Promise<boolean> {
    const { records, node } = this.#o;
    const record = await records.get(p.containerID, rangePoolOfKey(p.pool));
    if (record === undefined || record.block !== p.pool || record.address !== p.address) return false;
    return record.owner === node || (await records.setOwner(record, node)) !== undefined;
  }

  /** Writes the placeholder of `record` in its block again, if the address is free there. */
  async #holdAgain(record: HoldingRecord): Promise<boolean> {
    const { store, ledgers, locks, node, clock } = this.#o;
    return locks.run(record.block, async () => {
      ledgers.forget(record.block);
      const read = await store.readLedger(record.block);
      if (read.kind !== 'snapshot' || read.allocations.includes(record.address)) return false;
      const now = momentOf(clock);
      const placeholder: Allocation = {
        pool: record.block,
        address: record.address,
        ...placeholderOwner(record.key),
        node,
        createdAt: now.wall,
        ...defined({ createdStamp: now.stamp }),
      };
      const result = await store.commit(record.block, read.revision, [{ op: 'allocate', allocation: placeholder }]);
      ledgers.forget(record.block);
      return result.kind === 'committed';
    });
  }

  /** Writes this node's uses into the records that differ: how many were written. */
  async #reportUses(errors: string[]): Promise<number> {
    const { store, records, node } = this.#o;
    // What this node's store records: uses by holding (`holder \0 range pool`).
    const local = new Map<string, { holder: string; rangePool: string; uses: HoldingUse[] }>();
    for (const summary of await store.ledgers()) {
      const use = useLedgerOf(summary.ledger);
      if (use === undefined || !isUseKey(summary.ledger) || summary.allocated === 0) continue;
      const id = `${use.holder}\0${use.rangePool}`;
      const entry = local.get(id) ?? { holder: use.holder, rangePool: use.rangePool, uses: [] };
      for (const a of await store.list({ ledger: summary.ledger }))
        if (a.address === use.address) entry.uses.push(useOf(a, node));
      local.set(id, entry);
    }
    // Read while this node has uses to report or reported some last time, and once after a start.
    const listed = local.size > 0 || this.#reporting ? await records.list({ user: node }) : [];
    this.#reporting = local.size > 0;
    const byId = new Map<string, HoldingRecord>(listed.map((r) => [`${r.key}\0${r.pool}`, r]));
    let written = 0;
    for (const id of new Set([...byId.keys(), ...local.keys()])) {
      const want = local.get(id)?.uses ?? [];
      try {
        let record = byId.get(id);
        const l = local.get(id);
        if (record === undefined && l !== undefined) record = await records.get(l.holder, l.rangePool);
        if (
          record === undefined ||
          sameUses(
            record.uses.filter((u) => u.node === node),
            want,
          )
        )
          continue;
        if ((await records.setUses(record, node, want)) !== undefined) written += 1;
      } catch (error) {
        errors.push(`reporting the uses of ${id.split('\0')[0]} on node ${node}: ${messageOf(error)}`);
      }
    }
    return written;
  }
}

function placeholderId(block: string, address: string, key: string): string {
  return `${block}\0${address}\0${key}`;
}

function useOf(a: Allocation, node: string): HoldingUse {
  return {
    node,
    network: a.network,
    containerID: a.containerID,
    ifname: a.ifname,
    ...defined({ podNamespace: a.podNamespace, podName: a.podName, podUID: a.podUID }),
    since: a.createdAt,
  };
}

/** Whether two lists of one node's uses name the same attachments. */
function sameUses(a: readonly HoldingUse[], b: readonly HoldingUse[]): boolean {
  const ids = (l: readonly HoldingUse[]) =>
    l
      .map((u) => JSON.stringify([u.network, u.containerID, u.ifname, u.podUID ?? '']))
      .sort()
      .join('\n');
  return ids(a) === ids(b);
}
