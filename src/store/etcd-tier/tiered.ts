/**
 * What `--store etcd` runs: the two-tier store (tiered/store.ts) over the node's own SQLite file and
 * the etcd tier (etcd-tier/tier.ts), the same design as on the Kubernetes API. Opening it:
 * 1. checks that etcd is the store this agent knew (its identity record against the one the agent
 *    recorded at its last run): a store that lost its data halts the tier before anything is
 *    written, and the store opens halted (membership says so; nothing is claimed or published);
 * 2. moves this node's blocks out of the old one-tier layout, if any is left (legacy-import.ts),
 *    before anything is served: an agent whose move fails does not start, since the addresses its
 *    containers hold would not be in its file yet.
 * While halted, the two-tier store says so at each ping (`clusterProblem`, told to `notice` once).
 * When the operator accepts the store as it is (`warren store accept`), this node claims again the
 * blocks its file holds (claim-again.ts): a block another node claimed meanwhile is reported as a
 * conflict, never taken.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { claimAgain } from '../tiered/claim-again.ts';
import type { Store, StoreHistory } from '../store.ts';
import { TieredStore, type TieredStoreOptions } from '../tiered/store.ts';
import { type EtcdTier, type EtcdTierOptions, openEtcdTier } from './tier.ts';
import { legacyFailure } from './legacy-import.ts';

export interface EtcdTieredOptions extends EtcdTierOptions {
  /** The node's own store (its SQLite file): closed by the store's close, not by a failed open. */
  readonly local: Store;
  readonly node: string;
  readonly clock: Clock;
  readonly publishIntervalMs?: number;
  readonly publishAhead?: number;
  readonly publishSettleMs?: number;
  readonly claimCheckMs?: number;
}

/**
 * The two-tier store on etcd: TieredStore, with etcd's history and what is left of the old layout
 * for `warren doctor`, and a node forgotten losing its old documents before its claims are freed
 * (they could claim its blocks again).
 */
export class EtcdTieredStore extends TieredStore {
  readonly history: StoreHistory;
  readonly etcd: EtcdTier;

  constructor(o: TieredStoreOptions & { readonly tier: EtcdTier }) {
    const tier = o.tier;
    super(o, (cluster) => ({
      ...cluster,
      owners: {
        ...cluster.owners,
        forgetNode: async (node) => {
          await tier.forgetLegacyNode(node);
          return cluster.owners.forgetNode(node);
        },
      },
      history: tier.history,
      legacyLeft: () => tier.legacyLeft(),
    }));
    this.etcd = tier;
    this.history = tier.history;
    o.tier.onAccept((node) => claimAgain(this, o.local, o.tier, node));
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
            'version (docs/etcd.md, "Upgrading from the one-tier etcd store")',
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
      ...defined({
        publishIntervalMs: o.publishIntervalMs,
        publishAhead: o.publishAhead,
        publishSettleMs: o.publishSettleMs,
        claimCheckMs: o.claimCheckMs,
      }),
    });
  } catch (error) {
    await tier.close().catch(() => undefined);
    throw error;
  }
}
