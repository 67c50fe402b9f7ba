/**
 * Where the scale harness's simulated nodes run (cluster.ts asks one `NodeHost` for every node):
 * - `LocalNodes`: in the harness's own process, on the cluster's own ManualClock (the CI tests'
 *   place, and the bench's up to ~800 nodes: one process holds ~16 open files a node);
 * - `NodeGroups` (node-groups.ts): in K child processes, each a node group with a ManualClock of its
 *   own stepped in lockstep with the cluster's, so N nodes need N / K × ~16 open files a process.
 *
 * The cluster names nodes, never holds them, when it drives them (an ADD, a DEL, a crash, a Node
 * deleted), so one scenario drives both hosts alike; what it reads of a node (its name, its file's
 * allocations for the auditor, its request counter) is the `ScaleNode`, which a host gives for each
 * node it opens: the node itself here, a stand-in that asks its group (node-groups.ts) there.
 *
 * Guarantees of every host: `stepped` returns once the nodes' clock moved by the same `ms` as the
 * cluster's and their due timers fired; a node crashed or closed is told nothing more; `nodeGone`
 * and `nodeBack` reach every running node and decide what `nodeExists` says to nodes opened later;
 * `close` closes every running node (their Leases withdrawn).
 */
import type { Owner } from '../../src/ipam/allocation.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import type { Clock } from '../../src/core/clock.ts';
import type { AuditedNode } from './auditor.ts';
import type { CountingNode } from './client-counts.ts';
import { SimulatedNode } from './simulated-node.ts';

/** What the cluster and its scenarios read of a node, wherever it runs. */
export interface ScaleNode extends AuditedNode, CountingNode {}

/** What a node's handling of deleted Nodes did (agent/kubernetes/nodes.ts's status). */
export interface NodeForgetting {
  readonly node: string;
  /** The nodes it forgot. */
  readonly forgotten: readonly string[];
  readonly lastError?: string;
}

/** A process that holds nodes, apart from the harness's own (node-groups.ts). */
export interface NodeProcess {
  readonly pid: number;
  /** Nodes running in it now. */
  readonly nodes: number;
  /** Its resident memory before it opened any node, MiB. */
  readonly baselineRssMiB: number;
}

export interface NodeHost<N extends ScaleNode> {
  /** The processes the nodes run in other than this one (none: they run here). */
  readonly processes: readonly NodeProcess[];
  /** Opens node `name`, its state under `dir`, connecting with the kubeconfig file `kubeconfig`. */
  open(name: string, dir: string, kubeconfig: string): Promise<N>;
  /** The nodes' clock moved by `ms` (the cluster's moved already): their due timers fired. */
  stepped(ms: number): Promise<void>;
  /** An ADD on node `name` for `owner`: its wall time in ms (it throws as the allocator does). */
  add(name: string, owner: Owner): Promise<number>;
  del(name: string, owner: Owner): Promise<void>;
  /** Node `name` stops as a killed agent stops (simulated-node.ts `crash`). */
  crash(name: string): Promise<void>;
  /** Kubernetes deleted Node `name` (every running node is told), or has it again. */
  nodeGone(name: string): Promise<void>;
  nodeBack(name: string): Promise<void>;
  /** Every running node's handling of deleted Nodes. */
  forgetting(): Promise<NodeForgetting[]>;
  /** Brings every node's request counter up to date (a stand-in's is a copy). */
  readCounters(): Promise<void>;
  /** Closes every running node: their Leases withdrawn. */
  close(): Promise<void>;
}

export interface LocalNodesOptions {
  readonly clock: Clock;
  readonly ranges: readonly RangeSpec[];
  readonly flags?: Readonly<Record<string, string>>;
  readonly memory?: boolean;
  /** Each node's lending jitter, by name (tests seed it); this process only: a function crosses no IPC. */
  readonly lendJitter?: (node: string) => () => number;
}

/** The nodes in this process, on the cluster's clock. */
export class LocalNodes implements NodeHost<SimulatedNode> {
  readonly processes: readonly NodeProcess[] = [];
  readonly #o: LocalNodesOptions;
  /** The running nodes, by name. */
  readonly #running = new Map<string, SimulatedNode>();
  /** Nodes Kubernetes no longer has (the Node directory's deletions). */
  readonly #deleted = new Set<string>();

  constructor(o: LocalNodesOptions) {
    this.#o = o;
  }

  async open(name: string, dir: string, kubeconfig: string): Promise<SimulatedNode> {
    const node = await SimulatedNode.open({
      name,
      kubeconfig,
      dir,
      clock: this.#o.clock,
      nodeExists: (node) => !this.#deleted.has(node),
      ...(this.#o.flags === undefined ? {} : { flags: this.#o.flags }),
      ...(this.#o.memory === undefined ? {} : { memory: this.#o.memory }),
      ...(this.#o.lendJitter === undefined ? {} : { lendJitter: this.#o.lendJitter(name) }),
    });
    this.#running.set(name, node);
    return node;
  }

  /** The nodes share the cluster's clock: its step was theirs. */
  async stepped(): Promise<void> {}

  async add(name: string, owner: Owner): Promise<number> {
    return timedAdd(this.#node(name), owner, this.#o.ranges);
  }

  async del(name: string, owner: Owner): Promise<void> {
    await this.#node(name).allocator.release(owner);
  }

  async crash(name: string): Promise<void> {
    const node = this.#node(name);
    this.#running.delete(name);
    await node.crash();
  }

  async nodeGone(name: string): Promise<void> {
    this.#deleted.add(name);
    for (const node of this.#running.values()) node.nodeGone(name);
  }

  async nodeBack(name: string): Promise<void> {
    this.#deleted.delete(name);
    for (const node of this.#running.values()) node.nodeBack(name);
  }

  async forgetting(): Promise<NodeForgetting[]> {
    return forgettingOf(this.#running.values());
  }

  async readCounters(): Promise<void> {}

  async close(): Promise<void> {
    for (const node of this.#running.values()) await node.close().catch(() => undefined);
    this.#running.clear();
  }

  #node(name: string): SimulatedNode {
    const node = this.#running.get(name);
    if (node === undefined) throw new Error(`no running node ${name}`);
    return node;
  }
}

/** An ADD on `node` as the CNI service makes it of the allocator: its wall time in ms. */
export async function timedAdd(node: SimulatedNode, owner: Owner, ranges: readonly RangeSpec[]): Promise<number> {
  const started = performance.now();
  await node.allocator.allocate({ owner, ranges });
  return performance.now() - started;
}

/** The running nodes' handling of deleted Nodes, each as its status says. */
export function forgettingOf(nodes: Iterable<SimulatedNode>): NodeForgetting[] {
  return [...nodes].map((node) => {
    const { forgotten, lastError } = node.nodes.status();
    return { node: node.name, forgotten, ...(lastError === undefined ? {} : { lastError }) };
  });
}
