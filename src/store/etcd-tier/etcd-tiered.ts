/**
 * What `--store etcd` runs: the two-tier store (tiered-store.ts) over the node's own SQLite file and
 * the etcd tier (etcd-tier.ts), the same design as on the Kubernetes API. Opening it:
 * 1. checks that etcd is the store this agent knew (its identity record against the one the agent
 *    recorded at its last run): a store that lost its data halts the tier before anything is
 *    written, and the store opens halted (membership says so; nothing is claimed or published);
 * 2. moves this node's blocks out of the old one-tier layout, if any is left (legacy-import.ts),
 *    before anything is served: an agent whose move fails does not start, since the addresses its
 *    containers hold would not be in its file yet.
 * While halted, the two-tier store says so at each ping (`clusterProblem`, told to `notice` once).
 * When the operator accepts the store as it is (`warren store accept`), this node claims again the
 * blocks its file holds (through the store, so the claims are recorded and the blocks published
 * again): a block another node claimed meanwhile is reported as a conflict, never taken.
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import type { AcceptReport, Store, StoreHistory } from '../store.ts';
import { spaceOfPool } from '../tiered-ranges.ts';
import { TieredStore, type TieredStoreOptions } from '../tiered-store.ts';
import { type EtcdTier, type EtcdTierOptions, openEtcdTier } from './etcd-tier.ts';
import { legacyFailure } from './legacy-import.ts';

export interface EtcdTieredOptions extends EtcdTierOptions {
  /** The node's own store (its SQLite file): closed by the store's close, not by a failed open. */
  readonly local: Store;
  readonly node: string;
  readonly clock: Clock;
  readonly publishIntervalMs?: number;
  readonly claimCheckMs?: number;
}

/** The two-tier store on etcd: TieredStore, and etcd's history for `warren doctor`. */
export class EtcdTieredStore extends TieredStore {
  readonly history: StoreHistory;
  readonly etcd: EtcdTier;

  constructor(o: TieredStoreOptions & { readonly tier: EtcdTier }) {
    super(o);
    this.etcd = o.tier;
    this.history = o.tier.history;
    o.tier.onAccept((node) => this.#claimAgain(o.local, node));
  }

  async #claimAgain(local: Store, node: string): Promise<AcceptReport> {
    let addresses = 0;
    let blocks = 0;
    const conflicts: string[] = [];
    const pools = await local.pools();
    const ranges = new Map(pools.filter((p) => !isBlockKey(p.pool)).map((p) => [p.pool, p.description]));
    const pinned = new Set<string>();
    for (const p of pools) {
      if (!isBlockKey(p.pool) || p.affinity !== node) continue;
      const rangePool = rangePoolOfKey(p.pool);
      const d = ranges.get(rangePool);
      const blockPrefix = d?.blockPrefix;
      if (blockPrefix !== undefined && isLoanKey(p.pool, blockPrefix)) continue; // a loan is no block of its own
      if (d !== undefined && blockPrefix !== undefined && !pinned.has(rangePool)) {
        // The range's block size first, as this node split it: another node must split it alike.
        const { subnet, first, last } = d;
        await this.etcd.pinRange({ pool: rangePool, space: spaceOfPool(rangePool), subnet, first, last, blockPrefix });
        pinned.add(rangePool);
      }
      const result = await this.commit(p.pool, p.revision, [{ op: 'claim', node }]).catch((error: unknown) => ({
        kind: 'conflict' as const,
        reason: messageOf(error),
      }));
      if (result.kind === 'committed') {
        blocks += 1;
        addresses += p.allocated;
      } else conflicts.push(`block ${p.pool} was not claimed again: ${result.reason}`);
    }
    return { addresses, blocks, conflicts };
  }
}

/** Opens the tier, checks the store, moves the old layout, and answers the store (not started). */
export async function openEtcdTiered(o: EtcdTieredOptions): Promise<EtcdTieredStore> {
  const notice = o.notice ?? (() => undefined);
  const tier = await openEtcdTier(o);
  try {
    await tier.verifyStore();
    const halted = tier.membership.halted();
    if (halted === undefined) {
      const report = await tier.importLegacy(o.local, o.node).catch((error: unknown) => {
        throw legacyFailure(error);
      });
      if (report.imported + report.removed + report.claimed > 0)
        notice(
          `moved node ${o.node}'s blocks from the old etcd layout: ${report.imported} blocks with ` +
            `${report.allocations} allocations imported into its SQLite file, ${report.removed} old documents ` +
            `removed, ${report.claimed} old blocks (of every node) claimed in the tier`,
        );
      for (const problem of report.problems) notice(problem);
      // An announced node with old blocks runs the old version (a new one moves them before it
      // announces): side by side, neither sees the other's blocks.
      const announced = report.others.length === 0 ? [] : await tier.membership.liveNodes().catch(() => []);
      const live = new Set(announced.map((n) => n.node));
      const old = report.others.filter((n) => live.has(n));
      if (old.length > 0)
        notice(
          `node${old.length === 1 ? '' : 's'} ${old.join(', ')} ${old.length === 1 ? 'is' : 'are'} announced but ` +
            `still hold${old.length === 1 ? 's' : ''} blocks in the old etcd layout: an agent of the old ` +
            "version runs there, and it and this one do not see each other's blocks. Stop it and start this " +
            'version (README, "Upgrading from the one-tier etcd store")',
        );
    } else {
      notice(`${halted}; the old etcd layout, if any is left, is not moved while so`);
    }
    return new EtcdTieredStore({
      local: o.local,
      tier,
      node: o.node,
      clock: o.clock,
      notice,
      ...(o.publishIntervalMs === undefined ? {} : { publishIntervalMs: o.publishIntervalMs }),
      ...(o.claimCheckMs === undefined ? {} : { claimCheckMs: o.claimCheckMs }),
    });
  } catch (error) {
    await tier.close().catch(() => undefined);
    throw error;
  }
}
