/**
 * Nodes that left the cluster, on a store shared by nodes (etcd or the Kubernetes API): when
 * Kubernetes no longer has a Node and that node's agent is gone, exactly one agent — the one that
 * claims the chore `forget-node/<name>` — forgets it: its allocations are released and its blocks
 * freed for other nodes; an Event on the Node records it. A node that comes back announces itself
 * again (which gives the chore up) and claims blocks anew.
 *
 * Only one agent of the cluster runs this at a time: the holder of the chore `nodes`, the one that
 * watches the Nodes (node-watch.ts opens the source and `run`s this while it holds the chore, and
 * stops both when it loses it); every other agent neither watches Nodes nor asks for the per-node
 * chores. A deletion thus costs one chore request and one ping, not one per agent.
 *
 * Whether the agent is gone is asked of the membership only by the chore's winner, after the Node
 * was read gone (`Membership.alive`, told the node is gone: on etcd its lease; on the Kubernetes
 * store a ping its agent answers within the ping time, its Lease running or not — a renewal tells
 * of the past, kubernetes/lease-ping.ts), and read gone again after that answer's wait. The
 * kubelet's Lease (kube-node-lease/<name>) is not asked: it is deleted with its Node, and it tells
 * of the kubelet, not of Warren's agent.
 *
 * Guarantees:
 * - a node Kubernetes still lists (or lists again by the end of the ping), this node, or a node
 *   whose agent is alive (answers) is never forgotten;
 * - a node seen gone whose agent is alive is looked at again every `recheckMs` by the chore's
 *   winner until its agent is gone or the node is listed again;
 * - deletions missed while no agent watched (the `nodes` chore between holders, or this agent away)
 *   are found after each listing — a new holder's first listing among them: nodes that hold
 *   allocations or blocks in the store, or are announced (liveNodes: on Kubernetes a Lease held,
 *   lapsed or not), but are not listed. The announcement counts because a node may hold nothing
 *   the store lists and still have published addresses (its block's claim deleted or moved by hand
 *   just before it died: the kubernetes soak, seed 3817), which only its forget withdraws;
 * - while the store is halted (it lost its data, or this agent's announcement was taken) no chore
 *   can be asked for: a gone node is kept and looked at again at the next recheck, not dropped;
 * - a node whose `forget-node` chore another agent holds (a former holder of `nodes` that stopped
 *   or died before it finished) is left to it, and asked for again at each recheck (a refusal is
 *   answered from memory until the holder's claim can have lapsed), so the node is forgotten once
 *   that claim lapses even though its holder no longer watches;
 * - a failure (the store away) is logged and retried at the next recheck; nothing is judged from a
 *   listing that did not come. A forget that fails after this agent won the chore is retried by
 *   this agent: asking again for a chore it holds wins it again (claimTask), while the others,
 *   refused, leave the node to it.
 */
import type { Logger } from 'pino';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import type { NodeItem } from '../../sources/kubernetes/node-source.ts';
import type { Membership, Store } from '../../store/store.ts';
import { type ClusterEvents, nodeInvolved } from './events.ts';
import type { Telemetry } from '../metrics/telemetry.ts';

export const REASON_NODE_FORGOTTEN = 'NodeAddressesForgotten';

export interface KubernetesNodesOptions {
  readonly store: Store;
  readonly membership: Membership;
  readonly allocator: Pick<Allocator, 'forgetNode'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly node: string;
  /** How often a node seen gone but still announced is looked at again. */
  readonly recheckMs: number;
  readonly events?: ClusterEvents;
  /** Asks the API server whether the Node exists now; a node is forgotten only when it does not. */
  readonly nodeExists?: (name: string) => Promise<boolean>;
  /** Told what forgetting a node released (metrics, the last-releases list). */
  readonly telemetry?: Telemetry;
}

export interface KubernetesNodesStatus {
  /** Nodes seen gone from Kubernetes and not forgotten yet (their agent still alive, or not asked yet). */
  readonly gone: readonly string[];
  /** Nodes this agent forgot since it started. */
  readonly forgotten: readonly string[];
  readonly lastError?: string;
}

export class KubernetesNodes {
  readonly #o: KubernetesNodesOptions;
  readonly #gone = new Set<string>();
  /** Gone nodes a listing found still holding allocations or blocks in the store. */
  readonly #foundInStore = new Set<string>();
  /**
   * Of those, the ones whose `forget-node` chore another agent held when last asked (a former
   * watcher): asked again at each recheck, since no other agent watches to find them again should
   * that one have stopped before it finished.
   */
  readonly #othersChore = new Set<string>();
  readonly #forgotten: string[] = [];
  #lastError: string | undefined;
  /** One look at a time: a listing and a recheck never forget side by side. */
  #looking: Promise<void> = Promise.resolve();

  constructor(options: KubernetesNodesOptions) {
    this.#o = options;
  }

  async run(items: AsyncIterable<NodeItem>, signal: AbortSignal): Promise<void> {
    const recheck = new PeriodicTask({ clock: this.#o.clock, intervalMs: this.#o.recheckMs, run: () => this.#look() });
    recheck.start(signal);
    for await (const item of items) {
      switch (item.kind) {
        case 'listed':
          await this.#listed(item.names);
          break;
        case 'node-deleted':
          if (item.name !== this.#o.node) this.#gone.add(item.name);
          await this.#look();
          break;
        case 'node-added':
          this.#gone.delete(item.name);
          this.#othersChore.delete(item.name);
          break;
        default: {
          const never: never = item;
          throw new Error(`unhandled node item ${JSON.stringify(never)}`);
        }
      }
    }
  }

  status(): KubernetesNodesStatus {
    return {
      gone: [...this.#gone].sort(),
      forgotten: [...this.#forgotten],
      ...defined({ lastError: this.#lastError }),
    };
  }

  async #listed(names: ReadonlySet<string>): Promise<void> {
    for (const name of [...this.#gone, ...this.#othersChore]) if (names.has(name)) this.#settled(name);
    try {
      const known = new Set<string>();
      for (const a of await this.#o.store.list()) known.add(a.node);
      for (const p of await this.#o.store.ledgers()) if (p.affinity !== undefined) known.add(p.affinity);
      // On a two-tier store the node's own store knows only its blocks: the cluster's claims name the rest.
      for (const holder of (await this.#o.store.cluster?.owners.holders()) ?? []) known.add(holder);
      for (const announced of await this.#o.membership.liveNodes()) known.add(announced.node);
      for (const name of known)
        if (!names.has(name) && name !== this.#o.node) {
          this.#gone.add(name);
          this.#foundInStore.add(name);
        }
    } catch (error) {
      this.#failed(error);
      return;
    }
    await this.#look();
  }

  #look(): Promise<void> {
    this.#looking = this.#looking.then(() => this.#forgetExpired());
    return this.#looking;
  }

  async #forgetExpired(): Promise<void> {
    if (this.#gone.size + this.#othersChore.size === 0) return;
    try {
      for (const name of new Set([...this.#gone, ...this.#othersChore])) {
        if (this.#o.nodeExists !== undefined && (await this.#o.nodeExists(name))) {
          this.#settled(name); // back in the cluster (the listing was older than it)
          continue;
        }
        // Halted, no chore is granted: kept for the next recheck (claimTask's refusal would drop it).
        if (this.#o.membership.halted() !== undefined) continue;
        if (!(await this.#o.membership.claimTask(`forget-node/${name}`))) {
          // Another agent holds the chore (or this one is not announced yet): it is theirs to
          // finish. Should it stop first, its claim lapses and the next recheck here takes it up.
          this.#gone.delete(name);
          if (this.#foundInStore.has(name)) this.#othersChore.add(name);
          continue;
        }
        // Won: this agent's to finish, shown as gone until it is forgotten.
        const afterRefusal = this.#othersChore.delete(name);
        this.#gone.add(name);
        if (await this.#o.membership.alive(name, { toldGone: true })) continue; // its agent runs: look again later
        if (this.#o.nodeExists !== undefined && (await this.#o.nodeExists(name))) {
          this.#settled(name); // registered again while its agent was asked (a ping waits up to --node-ping)
          continue;
        }
        const { released, blocks } = await this.#o.allocator.forgetNode(name);
        // Its blocks are given up: a recovery no longer waits for it to accept (as `warren node forget`).
        if (this.#o.membership.recovery() !== undefined) await this.#o.membership.leaveRecovery(name);
        if (afterRefusal && released.length + blocks.length === 0) {
          this.#settled(name); // the agent that held its chore had forgotten it: not said twice
          continue;
        }
        this.#o.telemetry?.released('node-forget', released, `node ${name} was deleted from Kubernetes`);
        this.#settled(name);
        this.#forgotten.push(name);
        this.#o.logger.info(
          { source: 'kubernetes', node: name, released: released.map((a) => a.address), blocks },
          'forgot a node deleted from Kubernetes',
        );
        await this.#o.events?.record(
          nodeInvolved(name),
          'Normal',
          REASON_NODE_FORGOTTEN,
          `node ${name} left the cluster: released ${released.length} addresses and freed ${blocks.length} ` +
            `blocks (by ${this.#o.node})`,
        );
      }
      this.#lastError = undefined;
    } catch (error) {
      this.#failed(error);
    }
  }

  /** Nothing left to do about `name`: listed again, or forgotten. */
  #settled(name: string): void {
    this.#gone.delete(name);
    this.#foundInStore.delete(name);
    this.#othersChore.delete(name);
  }

  #failed(error: unknown): void {
    this.#lastError = messageOf(error);
    this.#o.logger.warn({ source: 'kubernetes', err: this.#lastError }, 'could not forget gone nodes yet; will retry');
  }
}
