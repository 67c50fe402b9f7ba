/**
 * The soak's store seam: what a run needs to know of the store its agents run on, one backend per
 * store (`--store sqlite|kubernetes|etcd`). A backend says, per store:
 * - the plan's side (`StoreBackend.plan`): the store's own fault steps, drawn by a planner from the
 *   plan's one seeded generator, so the plan stays a pure function of the seed and the options; a
 *   store without faults of its own (SQLite) draws nothing, and its plans are what they were;
 * - the run's side (`StoreBackend.open`, a `SoakStore`): the store's own processes (started by
 *   `open`, stopped by `close`), each node's network name and range (a cluster store gives every
 *   node ONE network and ONE range, so an address handed out twice across nodes is a duplicate the
 *   auditor sees), the agents' store flags and environment, how to run the store's fault steps, and
 *   what the auditor reads besides each node's local file (a cluster store is tiered: allocations in
 *   each node's file, blocks and claims in the cluster).
 *
 * Guarantees a backend gives: `close()` stops every process `open()` started (by PID) and removes
 * its directories, also after a fault step threw; a fault step returns with the store whole or in
 * the state its step says (stopped), never half-way; the planner's `end()` leaves the store whole.
 */
import type { SeededRandom } from '../helpers/random.ts';
import type { GroundTruth } from './ground-truth.ts';

export const STORE_NAMES = ['sqlite', 'kubernetes', 'etcd'] as const;
export type StoreName = (typeof STORE_NAMES)[number];

/** One of the store's own steps, as its planner draws it and its backend runs it. */
export interface StoreStep {
  readonly kind: 'store';
  /** The backend's name of the step ('api-stop', 'member-kill', ...), its own to interpret. */
  readonly action: string;
  /** A fault (counted, marked in a failure's steps), or its recovery (the store started again). */
  readonly fault: boolean;
  /** The step's one number, when it has one (which member, how long after the step), drawn by the planner. */
  readonly arg?: number;
}

/**
 * Draws the store's fault steps for one plan. It keeps its own model of what it planned (the store
 * stopped, a snapshot taken), never of what happened, as plan.ts does for the nodes.
 */
export interface StoreFaultPlanner {
  /** The steps of one fault, drawn now; none when no fault of the store can be drawn now. */
  fault(random: SeededRandom): StoreStep[];
  /** After every workload operation: the steps due now (a store stopped a few steps ago started again). */
  due(random: SeededRandom): StoreStep[];
  /** The plan's last steps: the store whole again. */
  end(): StoreStep[];
}

export interface StorePlan {
  /** The share of the plan's faults that are the store's own (the rest are the nodes'). */
  readonly share: number;
  planner(): StoreFaultPlanner;
}

/** What a backend needs of a node: its number, its name, its state directory. */
export interface StoreNode {
  readonly index: number;
  readonly name: string;
  readonly stateDir: string;
}

/** The network config of a node's CNI calls (besides the socket and journal, which are the node's). */
export interface NodeNetwork {
  readonly name: string;
  readonly range: string;
  /** More fields of the network config's `ipam` (a cluster store's `block_size`). */
  readonly ipam?: Readonly<Record<string, unknown>>;
}

/**
 * The pods as the store's cluster keeps them, when it does (the kubernetes store: pod objects the
 * agents' pod source watches). The harness tells it what the workload does to a pod.
 */
export interface PodObjects {
  /**
   * Before the pod's first ADD: pod `pod-N` (namespace `soak`) of UID `uid` bound to `node`; again
   * under the same name with a new UID when it is re-created (a StatefulSet replica).
   */
  created(pod: number, node: string, uid: string): void;
  /** The pod deleted in the API (its sandbox torn down, or force-deleted). */
  deleted(pod: number): void;
}

/** What a fault step may act on and report. */
export interface StoreFaultContext {
  /** The run's nodes, to stop, start or ask (`warren` CLI on their sockets). */
  readonly nodes: readonly StoreNode[];
  /** Counts something that happened in the step, in the report's faults table. */
  count(what: string): void;
  /**
   * The store lost what it kept outside the nodes' files (a cluster store restored from an older
   * snapshot): every live sandbox whose record was to come back from it (its node's file put back
   * from an older copy, not compared yet) and that `kept(node)` no longer lists is lost with both,
   * and its runtime tears it down, as on a node's old disk.
   */
  lostOutsideFiles(kept: (node: StoreNode) => ReadonlySet<string>): void;
  /**
   * The operator begins the store's recovery after it lost its data (docs/recovery.md): until now no
   * agent wrote into it, so a lost node's forget could free nothing. Every sandbox of a forgotten
   * node still owed its release is provable from now (found by the soak, kubernetes seed 3806: a
   * forget 1.3 s before an API restore was judged from the forget, 33 s before the operator acted).
   * With `awayFrom`, the store was away since then and is back now: only those whose forget came
   * less than the bound before it went away (kubernetes seed 3839, steps 4942-4954 and 6176-6182:
   * a Node deleted a few milliseconds before the API server went away was judged from its
   * deletion, 10 to 40 s before any agent could see it); one made earlier was owed its releases
   * before, and is still judged from its forget.
   */
  recovering(awayFrom?: number): void;
  log(line: string): void;
}

/**
 * A node lost for good, as a cluster store's operator handles it (plan.ts `node-lost`): forgotten,
 * and what the cluster still holds of it read, to judge its addresses released.
 */
export interface LostNodes {
  /**
   * The operator forgets `lost` (its agent killed, its machine gone), asking `from` when the store's
   * way asks an agent; returns the moment the forget was made (ms), from which its releases count.
   */
  forget(lost: StoreNode, from: StoreNode, context: StoreFaultContext): Promise<number>;
  /**
   * What the cluster still holds for `node`: the CIDRs of the blocks it claims and the containers its
   * publications list; undefined when the cluster cannot be read now.
   */
  held(
    node: StoreNode,
  ): Promise<{ readonly blocks: readonly string[]; readonly containers: ReadonlySet<string> } | undefined>;
  /**
   * Whether no agent can act on a forget now (kubernetes: the API server away): the cluster holds
   * what it held until a later step brings the store back, so a return waits for nothing.
   */
  away(): boolean;
  /**
   * The node back as a new machine of the same name, before its agent starts; true when no agent
   * could act on its forget since (kubernetes: the API server away): its blocks are its own again.
   */
  returned(node: StoreNode): boolean;
}

/** The store of one run, its processes running. */
export interface SoakStore {
  /** Every node on one network and range: duplicates are judged across nodes. */
  readonly sharedRange: boolean;
  network(node: number): NodeNetwork;
  /** The agent's store flags (`--store ...`), after the soak's own (node name, netns, release settings). */
  agentArgs(node: StoreNode): readonly string[];
  agentEnv(node: StoreNode): NodeJS.ProcessEnv;
  runStep(step: StoreStep, context: StoreFaultContext): Promise<void>;
  /**
   * The containers of `node` whose addresses the store keeps outside the node's file (a cluster
   * store's published allocations), read while its agent is stopped: a file put back from an older
   * copy gets them back at the agent's start (docs/recovery.md); SQLite: none.
   */
  heldOutsideFile(node: StoreNode): Promise<ReadonlySet<string>>;
  /**
   * The auditor's look at the cluster's objects against the ground truth: one line per violation,
   * keyed so it is reported once. SQLite: none. Called between steps, never during a store fault.
   */
  auditCluster(truth: GroundTruth): Promise<ReadonlyArray<{ readonly key: string; readonly what: string }>>;
  /** The pod objects, when the store keeps them; absent: pods exist only as the CNI calls' args. */
  readonly pods?: PodObjects;
  /**
   * The run's end, every agent started: the store's operator does what is left for it to do (a
   * kubernetes node's announced placeholders accepted), bounded; absent: nothing is left.
   */
  settle?(): Promise<void>;
  /** How a node lost for good is forgotten; absent: the store has no nodes to forget (SQLite). */
  readonly lostNodes?: LostNodes;
  /**
   * Which of the store's faults may have taken a release Event written within [from, to] (ms)
   * (event-losses.ts); absent: the store keeps no Events.
   */
  eventLostBy?(from: number, to: number): string | undefined;
  close(): Promise<void>;
}

export interface StoreBackend {
  readonly name: StoreName;
  /** The store's own faults; absent: none (the plan draws only the nodes' faults). */
  readonly plan?: StorePlan;
  /** Whether its runs may lose a node for good and forget it (its `SoakStore.lostNodes`). */
  readonly forgetsNodes?: boolean;
  /** Starts the store's processes for a run of `nodes` nodes. */
  open(nodes: number): Promise<SoakStore>;
}
