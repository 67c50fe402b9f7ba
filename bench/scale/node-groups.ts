/**
 * The scale harness's nodes in K child processes (`--node-processes K`): each a node group
 * (node-group-process.ts) holding the nodes dealt to it in turn, on its own ManualClock, driven
 * over its IPC channel. One process of nodes holds ~16 open files a node against a hard limit of
 * 20,000, so N nodes need about N / 800 groups; the fake API server (api-server.ts) is apart, and
 * each node reaches it through the kubeconfig the harness gives it, as in one process.
 *
 * Guarantees:
 * - lockstep: `stepped(ms)` steps every group's clock by the cluster's `ms` and returns when every
 *   group answered (its timers fired, its nodes quiet), so between steps every clock reads alike
 *   and a scenario's request counts are those of one process;
 * - no hang: every question to a group has a deadline (ASK_MS; OPEN_MS for an open, which may wait
 *   on the clock; CLOSE_MS for a close): past it the run fails, naming the group and the question;
 * - a group that dies fails the run: every question waiting on it, and every one after, is refused
 *   with its exit code and the tail of its stderr;
 * - stopped by PID: `close` asks each group to close its nodes, then kills by its PID any group not
 *   gone within CLOSE_MS; the groups are killed by PID if this process exits first.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { WarrenError } from '../../src/core/errors.ts';
import type { Allocation, Owner } from '../../src/ipam/allocation.ts';
import type { ApiRequestTotal } from '../../src/store/kubernetes/api-requests.ts';
import type {
  NodeGroupAnswer,
  NodeGroupOp,
  NodeGroupOps,
  NodeGroupRequest,
  NodeGroupSettings,
} from './node-group-process.ts';
import type { NodeForgetting, NodeHost, NodeProcess, ScaleNode } from './node-host.ts';
import { processUse } from './process-use.ts';

/** A question's deadline: long enough only to bound a hang (a step of 800 nodes takes well under it). */
const ASK_MS = 180_000;
/** An open may wait on the clock (a name still held): the harness steps it meanwhile. */
const OPEN_MS = 900_000;
/** A group closing its nodes (each withdraws its Lease) before it is killed by its PID. */
const CLOSE_MS = 120_000;
/** How much of a group's stderr a failure quotes. */
const STDERR_TAIL = 4_000;

/** Nodes a group holds at most by default (~16 open files each, against 20,000). */
export const NODES_PER_PROCESS = 800;

/** The node processes for `nodes` nodes by default: 1 (this process) up to NODES_PER_PROCESS. */
export const defaultNodeProcesses = (nodes: number): number =>
  nodes <= NODES_PER_PROCESS ? 1 : Math.ceil(nodes / NODES_PER_PROCESS);

/** One child process of nodes. */
class NodeGroup implements NodeProcess {
  readonly index: number;
  readonly pid: number;
  readonly baselineRssMiB: number;
  nodes = 0;
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, { reject: (e: Error) => void; settle: (m: NodeGroupAnswer) => void }>();
  #next = 0;
  #stderr = '';
  /** Why the group can answer nothing more (it exited); undefined while it runs. */
  #failure: Error | undefined;
  #closing = false;

  private constructor(index: number, child: ChildProcess) {
    this.index = index;
    this.#child = child;
    this.pid = child.pid ?? 0;
    this.baselineRssMiB = processUse(this.pid)?.rssMiB ?? 0;
    child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      this.#stderr = (this.#stderr + chunk.toString()).slice(-STDERR_TAIL);
    });
    child.on('message', (m: NodeGroupAnswer) => {
      const w = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      w?.settle(m);
    });
    child.on('exit', (code, signal) => {
      const how = signal === null ? `code ${String(code)}` : signal;
      const tail = this.#stderr.trim() === '' ? '(nothing on stderr)' : `its stderr ends:\n${this.#stderr}`;
      this.#failure = new Error(`node group ${index} (PID ${this.pid}) exited (${how}); ${tail}`);
      if (this.#closing && code === 0) this.#failure = new Error(`node group ${index} was closed`);
      for (const w of this.#waiting.values()) w.reject(this.#failure);
      this.#waiting.clear();
    });
  }

  static async start(index: number, settings: NodeGroupSettings): Promise<NodeGroup> {
    const entry = fileURLToPath(new URL('./node-group-process.ts', import.meta.url));
    const child = fork(entry, [JSON.stringify(settings)], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), ASK_MS);
    try {
      const [first] = (await Promise.race([
        once(child, 'message'),
        once(child, 'exit').then(([code]) => {
          throw new Error(`node group ${index} exited (${String(code)}) before it was ready: ${stderr}`);
        }),
      ])) as [unknown];
      if ((first as { ready?: boolean } | undefined)?.ready !== true) {
        throw new Error(`node group ${index} said ${JSON.stringify(first)} before it was ready`);
      }
    } catch (error) {
      if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL');
      throw error;
    } finally {
      clearTimeout(timer);
    }
    child.stderr?.removeAllListeners('data');
    return new NodeGroup(index, child);
  }

  /** Asks the group `op`, refused past `deadlineMs` of real time or when the group is gone. */
  ask<O extends NodeGroupOp>(
    op: O,
    args: NodeGroupOps[O]['args'],
    deadlineMs = ASK_MS,
  ): Promise<NodeGroupOps[O]['result']> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(id);
        reject(
          new Error(`node group ${this.index} (PID ${this.pid}) did not answer ${op} within ${deadlineMs / 1000} s`),
        );
      }, deadlineMs);
      const done = (): void => clearTimeout(timer);
      this.#waiting.set(id, {
        reject: (e) => {
          done();
          reject(e);
        },
        settle: (m) => {
          done();
          if (m.error === undefined) resolve(m.result as NodeGroupOps[O]['result']);
          else if (m.code !== undefined) reject(new WarrenError(m.code, m.error));
          else reject(new Error(`node group ${this.index}: ${m.error}`));
        },
      });
      this.#child.send({ id, op, args } satisfies NodeGroupRequest, (error) => {
        // A channel closed by a group that died: its exit refuses the question, with its stderr.
        if (error === null || !this.#waiting.has(id) || !this.#child.connected) return;
        this.#waiting.get(id)?.reject(error);
        this.#waiting.delete(id);
      });
    });
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Closes the group's nodes and lets it exit; kills it by its PID past CLOSE_MS. */
  async close(): Promise<void> {
    if (!this.running) return;
    this.#closing = true;
    const exited = once(this.#child, 'exit');
    const timer = setTimeout(() => this.kill(), CLOSE_MS);
    await this.ask('close', [], CLOSE_MS).catch(() => this.kill());
    await exited;
    clearTimeout(timer);
  }

  kill(): void {
    if (this.running) process.kill(this.pid, 'SIGKILL');
  }
}

/** A node in a group, as the harness reads it: its file's allocations asked of the group. */
export class RemoteNode implements ScaleNode {
  readonly name: string;
  readonly store: { list(filter: { rangePool: string }): Promise<Allocation[]> };
  /** The node's counter as last read (`NodeGroups.readCounters`). */
  readonly kubeRequests: { totals(): ApiRequestTotal[] };
  #totals: ApiRequestTotal[] = [];

  constructor(name: string, group: NodeGroup) {
    this.name = name;
    this.store = { list: (filter) => group.ask('list', [name, filter.rangePool]) };
    this.kubeRequests = { totals: () => this.#totals };
  }

  /** The counter's totals, as its group read them. */
  set totals(totals: ApiRequestTotal[]) {
    this.#totals = totals;
  }
}

export interface NodeGroupsOptions extends NodeGroupSettings {
  readonly processes: number;
}

export class NodeGroups implements NodeHost<RemoteNode> {
  readonly #groups: readonly NodeGroup[];
  /** Each node's group, by name (a node opened again stays in its group). */
  readonly #groupOf = new Map<string, NodeGroup>();
  readonly #nodes = new Map<string, RemoteNode>();
  /** Nodes dealt so far: the next new node goes to group `#dealt % K`. */
  #dealt = 0;

  private constructor(groups: readonly NodeGroup[]) {
    this.#groups = groups;
  }

  /** Starts `o.processes` groups; none is left running if one fails to start. */
  static async start(o: NodeGroupsOptions): Promise<NodeGroups> {
    const { processes, ...settings } = o;
    const started = await Promise.allSettled(Array.from({ length: processes }, (_, i) => NodeGroup.start(i, settings)));
    const groups = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s) => s.status === 'rejected');
    if (failed !== undefined) {
      for (const group of groups) group.kill();
      throw failed.reason;
    }
    const host = new NodeGroups(groups);
    process.once('exit', () => {
      for (const group of groups) group.kill();
    });
    return host;
  }

  get processes(): readonly NodeProcess[] {
    return this.#groups;
  }

  #group(name: string): NodeGroup {
    const group = this.#groupOf.get(name);
    if (group === undefined) throw new Error(`no node ${name} in any group`);
    return group;
  }

  async open(name: string, dir: string, kubeconfig: string): Promise<RemoteNode> {
    let group = this.#groupOf.get(name);
    if (group === undefined) {
      group = this.#groups[this.#dealt++ % this.#groups.length] as NodeGroup;
      this.#groupOf.set(name, group);
    }
    await group.ask('open', [name, dir, kubeconfig], OPEN_MS);
    group.nodes++;
    const node = new RemoteNode(name, group);
    this.#nodes.set(name, node);
    return node;
  }

  async stepped(ms: number): Promise<void> {
    await Promise.all(this.#groups.map((g) => g.ask('step', [ms])));
  }

  add(name: string, owner: Owner): Promise<number> {
    return this.#group(name).ask('add', [name, owner.containerID]);
  }

  async del(name: string, owner: Owner): Promise<void> {
    await this.#group(name).ask('del', [name, owner.containerID]);
  }

  async crash(name: string): Promise<void> {
    const group = this.#group(name);
    this.#nodes.delete(name);
    group.nodes--;
    await group.ask('crash', [name]);
  }

  async nodeGone(name: string): Promise<void> {
    await Promise.all(this.#groups.map((g) => g.ask('nodeGone', [name])));
  }

  async nodeBack(name: string): Promise<void> {
    await Promise.all(this.#groups.map((g) => g.ask('nodeBack', [name])));
  }

  async forgetting(): Promise<NodeForgetting[]> {
    return (await Promise.all(this.#groups.map((g) => g.ask('forgetting', [])))).flat();
  }

  async readCounters(): Promise<void> {
    for (const counters of await Promise.all(this.#groups.map((g) => g.ask('counters', []))))
      for (const [name, totals] of counters) {
        const node = this.#nodes.get(name);
        if (node !== undefined) node.totals = totals;
      }
  }

  /** Closes every group (its nodes first), each killed by its PID if it does not go. */
  async close(): Promise<void> {
    await Promise.all(this.#groups.map((g) => g.close()));
    this.#nodes.clear();
  }
}
