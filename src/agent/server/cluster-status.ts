/**
 * The cluster's part of the agent's status, on a store nodes share: the live nodes, how many
 * blocks this node owns, whether it is announced, why it must not allocate, and the check of the
 * cluster's file (the etcd tier's). Read on each status while the store answers.
 *
 * Guarantees:
 * - Status never fails for what only the cluster knows: when the live nodes cannot be read (the
 *   cluster store is away while the agent still serves its own blocks), the last ones read are shown
 *   with why they are not from now and when they were read.
 * - Blocks are counted from the store's pools given, so status shows one reading of the store.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { Membership, LedgerSummary, Store } from '../../store/store.ts';
import type { AgentStatus } from '../../api/status.ts';
import type { PeriodicTaskStatus } from '../../core/periodic-task.ts';

export interface ClusterStatusOptions {
  readonly membership: Membership;
  readonly store: Store;
  /** This node's name: its blocks are those whose affinity names it. */
  readonly node: string;
  readonly clock: Clock;
  /** Why this node must not allocate on the cluster store; undefined when it may. */
  readonly problem?: () => string | undefined;
  /** The cluster chores' runs. */
  readonly upkeep?: () => PeriodicTaskStatus;
}

export class ClusterStatus {
  readonly #o: ClusterStatusOptions;
  /** The live nodes as last read, and when: what status shows while the cluster store is away. */
  #liveNodes: { readonly nodes: readonly string[]; readonly at: number } | undefined;

  constructor(options: ClusterStatusOptions) {
    this.#o = options;
  }

  /** The cluster's status now, its blocks counted from `pools` (the store's pools). */
  async read(pools: readonly LedgerSummary[]): Promise<NonNullable<AgentStatus['cluster']>> {
    const live = await this.#liveNodesNow();
    const problem = this.#o.problem?.();
    const readAt = this.#liveNodes?.at;
    const fileCheck = await this.#o.store.cluster?.fileCheck();
    const upkeep = this.#o.upkeep?.();
    return {
      liveNodes: live.nodes,
      ownBlocks: pools.filter((p) => p.affinity === this.#o.node).length,
      thisNodeAnnounced: live.nodes.includes(this.#o.node),
      ...defined({ problem }),
      ...(live.unread === undefined
        ? {}
        : {
            unread: live.unread,
            ...(readAt === undefined ? {} : { liveNodesReadAt: new Date(readAt).toISOString() }),
          }),
      ...defined({ fileCheck, upkeep }),
    };
  }

  /**
   * The live nodes read now, or, when the cluster store cannot be read, the last ones read with why
   * they are not from now.
   */
  async #liveNodesNow(): Promise<{ nodes: readonly string[]; unread?: string }> {
    try {
      const nodes = (await this.#o.membership.liveNodes()).map((n) => n.node);
      this.#liveNodes = { nodes, at: this.#o.clock.now() };
      return { nodes };
    } catch (error) {
      return { nodes: this.#liveNodes?.nodes ?? [], unread: `the live nodes could not be read: ${messageOf(error)}` };
    }
  }
}
