/**
 * The scale harness's cluster: an API server (api-server.ts: the fake in this process or in a child
 * process of its own, or any server a kubeconfig names), N simulated nodes on it
 * (simulated-node.ts) — in this process (`start`) or in K node groups, child processes of their own
 * (`startGrouped`, node-groups.ts), wherever a host (node-host.ts) runs them — one shared range and
 * one ManualClock for all of them (a group's clock stepped in lockstep with it), the Node
 * directory the nodes are told of (which Nodes Kubernetes has), and the auditor (auditor.ts).
 *
 * Guarantees:
 * - time moves only in `advance`: the server's clock is set (a fake's), then the nodes' clock is
 *   stepped (every timer due fires, in order; every group's, each answering once its nodes are
 *   quiet), and after each step the harness waits until the
 *   cluster is quiet — on a fake, every request answered and none new for a few polls; on a server
 *   that counts nothing for the harness, the nodes' own request counts unchanged for a few polls —
 *   so what a window of clock time costs does not depend on the machine's speed;
 * - `add` and `del` are an ADD and a DEL as the CNI service makes them of the allocator
 *   (allocate, release by owner), with the ADD's wall time measured where the node runs;
 * - a window (`beginWindow`, `endWindow`) is counted by the server where it counts per client (the
 *   fake, in either process) and by the nodes' own counters otherwise (client-counts.ts), or by the
 *   counters when `counts: 'client'` asks; both give the same table (window-counts.ts);
 * - `nodes` are the running nodes (the nodes themselves in this process, stand-ins that ask their
 *   group for what the auditor reads otherwise); `crash` takes one out as a killed agent goes, `deleteNode` tells
 *   every running node Kubernetes deleted a Node, `rejoin` starts a node of that name again with
 *   an empty file (its Node back);
 * - `audit` is independent of the allocator's own bookkeeping (auditor.ts).
 */
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { removeDir, tempDir } from '../../test/helpers/processes.ts';
import { type ApiChoice, type ScaleApiServer, startApiServer } from './api-server.ts';
import { type AuditReport, Auditor } from './auditor.ts';
import { ClientCountWindow, countedSoFar } from './client-counts.ts';
import { NodeGroups, type RemoteNode } from './node-groups.ts';
import { LocalNodes, type NodeForgetting, type NodeHost, type ScaleNode } from './node-host.ts';
import type { SimulatedNode } from './simulated-node.ts';
import { ownerOf, scaleRanges } from './shared-range.ts';
import { type WindowCounts, windowCounts } from './window-counts.ts';

export interface ScaleClusterOptions {
  readonly nodes: number;
  /** The one range every node shares (CIDR). */
  readonly range: string;
  /** The range's block size (prefix length); the store's adaptive size when absent. */
  readonly blockSize?: number;
  /** Nodes opened at once while the cluster starts. */
  readonly startConcurrency?: number;
  /** Agent flags every node gets (settings' keys, as text). */
  readonly flags?: Readonly<Record<string, string>>;
  /** Where the API server is (default: the fake, in this process). */
  readonly api?: ApiChoice;
  /** Who counts a window: the server where it can (default), or the nodes' own counters. */
  readonly counts?: 'server' | 'client';
  /** Each node's database in memory instead of a file. */
  readonly memory?: boolean;
  /** Each node's prompt-lending jitter, by node name (default: the agent's random one; tests seed it). */
  readonly lendJitter?: (node: string) => () => number;
}

/** How long the cluster must stay silent (real ms) after a clock step to count as quiet. */
const QUIET_MS = 10;
/** Quiet polls in a row that make the cluster settled. */
const QUIET_POLLS = 2;
/** The same where only the nodes' counters tell (a request in flight is not counted yet): longer. */
const CLIENT_QUIET_MS = 40;
const CLIENT_QUIET_POLLS = 3;
/** Clock between two starts of a node refused its name (a DaemonSet pod's restart). */
const RESTART_MS = 10_000;
/** How long a settle waits for requests still unanswered before it gives up on them. */
const SETTLE_DEADLINE_MS = 60_000;

export const nodeName = (i: number): string => `node-${String(i).padStart(4, '0')}`;

/** Where the cluster's nodes run, given its clock and ranges. */
type HostOf<N extends ScaleNode> = (clock: ManualClock, ranges: readonly RangeSpec[]) => Promise<NodeHost<N>>;

export class ScaleCluster<N extends ScaleNode = SimulatedNode> {
  readonly api: ScaleApiServer;
  readonly clock: ManualClock;
  /** The running nodes. */
  readonly nodes: N[] = [];
  readonly ranges: readonly RangeSpec[];
  /** Where the nodes run: this process, or node groups (child processes). */
  readonly host: NodeHost<N>;
  /** Requests left unanswered by a settle that reached its deadline (should stay 0). */
  unsettled = 0;
  readonly #o: ScaleClusterOptions;
  readonly #dir: string;
  readonly #auditor: Auditor;
  /** The nodes running when the window began, and their counters' readings then. */
  #window: { nodes: readonly N[]; client: ClientCountWindow } | undefined;

  private constructor(
    api: ScaleApiServer,
    clock: ManualClock,
    parts: { o: ScaleClusterOptions; ranges: readonly RangeSpec[]; host: NodeHost<N> },
    dir: string,
    auditor: Auditor,
  ) {
    this.api = api;
    this.clock = clock;
    this.#o = parts.o;
    this.ranges = parts.ranges;
    this.host = parts.host;
    this.#dir = dir;
    this.#auditor = auditor;
  }

  /** The cluster with its nodes in this process, on its own clock. */
  static start(o: ScaleClusterOptions): Promise<ScaleCluster<SimulatedNode>> {
    const jitter = o.lendJitter === undefined ? {} : { lendJitter: o.lendJitter };
    return ScaleCluster.#start(
      o,
      async (clock, ranges) => new LocalNodes({ clock, ranges, ...nodeOptions(o), ...jitter }),
    );
  }

  /** The cluster with its nodes dealt in turn to `processes` node groups (node-groups.ts). */
  static startGrouped(o: ScaleClusterOptions, processes: number): Promise<ScaleCluster<RemoteNode>> {
    const settings = { range: o.range, ...(o.blockSize === undefined ? {} : { blockSize: o.blockSize }) };
    return ScaleCluster.#start(o, (clock) =>
      NodeGroups.start({ processes, nowMs: clock.now(), ...settings, ...nodeOptions(o) }),
    );
  }

  static async #start<N extends ScaleNode>(o: ScaleClusterOptions, hostOf: HostOf<N>): Promise<ScaleCluster<N>> {
    // A whole second: the Leases' MicroTimes and the objects' timestamps read alike.
    const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    const ranges = scaleRanges(o.range, o.blockSize);
    const api = await startApiServer(o.api ?? { place: 'in-process' }, clock.now());
    let cluster: ScaleCluster<N> | undefined;
    let host: NodeHost<N> | undefined;
    try {
      const auditor = await Auditor.open(api.adminKubeconfig);
      host = await hostOf(clock, ranges);
      cluster = new ScaleCluster(api, clock, { o, ranges, host }, tempDir('warren-scale-'), auditor);
      const started = cluster;
      const batch = o.startConcurrency ?? 25 * Math.max(1, host.processes.length);
      for (let first = 0; first < o.nodes; first += batch) {
        const names = Array.from({ length: Math.min(batch, o.nodes - first) }, (_, k) => nodeName(first + k));
        const opened = await Promise.all(names.map((name) => started.#open(name, name)));
        cluster.nodes.push(...opened);
      }
      await cluster.settle();
      return cluster;
    } catch (error) {
      if (cluster !== undefined) await cluster.stop();
      else {
        await host?.close();
        await api.stop();
      }
      throw error;
    }
  }

  async #open(name: string, dir: string): Promise<N> {
    return this.host.open(name, join(this.#dir, dir), await this.api.kubeconfigFor(name));
  }

  /** The pool of the shared range. */
  get pool(): string {
    return this.ranges[0]?.pool ?? '';
  }

  /** Whether the window is counted by the server (else by the nodes' own counters). */
  get serverCounts(): boolean {
    return this.api.place !== 'kubeconfig' && this.#o.counts !== 'client';
  }

  /**
   * Waits until the cluster is quiet: every request made so far answered and none new for a few
   * polls (an open watch counts as answered once its 200 went out); where the server counts nothing
   * for the harness, until the nodes' counts stop moving.
   */
  async settle(): Promise<void> {
    const client = this.api.place === 'kubeconfig';
    const [pollMs, polls] = client ? [CLIENT_QUIET_MS, CLIENT_QUIET_POLLS] : [QUIET_MS, QUIET_POLLS];
    const deadline = Date.now() + SETTLE_DEADLINE_MS;
    let quiet = 0;
    let seen = client ? await this.#countedSoFar() : ((await this.api.progress())?.records ?? 0);
    while (quiet < polls) {
      await delay(pollMs);
      const progress = client ? undefined : await this.api.progress();
      const made = progress?.records ?? (await this.#countedSoFar());
      const unanswered = progress?.unanswered ?? 0;
      const busy = unanswered > 0 || made !== seen;
      seen = made;
      quiet = busy ? 0 : quiet + 1;
      if (busy && Date.now() > deadline) {
        this.unsettled += unanswered;
        return;
      }
    }
  }

  /** Every request the nodes counted so far, their counters read afresh. */
  async #countedSoFar(): Promise<number> {
    await this.host.readCounters();
    return countedSoFar(this.nodes);
  }

  /** Advances the clock by `ms` in steps of `stepMs`, settling after each; `each` runs before a step. */
  async advance(ms: number, stepMs: number, each?: (elapsedMs: number) => Promise<void>): Promise<void> {
    for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
      if (each !== undefined) await each(elapsed);
      const step = Math.min(stepMs, ms - elapsed);
      await this.api.setNow(this.clock.now() + step);
      this.clock.advance(step);
      await this.host.stepped(step);
      await this.settle();
    }
  }

  /** A window begins: the server's counts cleared, the nodes' counters read. */
  async beginWindow(): Promise<void> {
    await this.api.clearCounts();
    await this.host.readCounters();
    this.#window = { nodes: [...this.nodes], client: new ClientCountWindow(this.nodes) };
  }

  /** What the window since `beginWindow` cost, per node running in it. */
  async endWindow(seconds: number): Promise<WindowCounts> {
    const window = this.#window;
    if (window === undefined) throw new Error('no window begun');
    // The nodes running at its start, and those started in it (a node re-joined).
    const names = [...new Set([...window.nodes, ...this.nodes].map((n) => n.name))];
    const server = this.serverCounts ? await this.api.counts() : undefined;
    if (server !== undefined) return windowCounts(server.records, server.events, names, seconds);
    await this.host.readCounters();
    return windowCounts(window.client.requests(this.nodes), undefined, names, seconds);
  }

  /** An ADD on node `i` for container `id`: its wall time in ms (it throws as the allocator does). */
  add(i: number, id: string): Promise<number> {
    return this.host.add(this.#node(i).name, ownerOf(id));
  }

  /** A DEL on node `i` for container `id`. */
  async del(i: number, id: string): Promise<void> {
    await this.host.del(this.#node(i).name, ownerOf(id));
  }

  #node(i: number): N {
    const node = this.nodes[i];
    if (node === undefined) throw new Error(`no node ${i}`);
    return node;
  }

  /** Node `name` stopped as a killed agent stops, taken out of `nodes`. */
  async crash(name: string): Promise<void> {
    const i = this.nodes.findIndex((n) => n.name === name);
    if (i < 0) throw new Error(`no running node ${name}`);
    this.nodes.splice(i, 1);
    await this.host.crash(name);
  }

  /** Kubernetes deleted Node `name`: every running node is told. */
  deleteNode(name: string): Promise<void> {
    return this.host.nodeGone(name);
  }

  /** Every running node's handling of deleted Nodes: what it forgot, its last error. */
  forgetting(): Promise<NodeForgetting[]> {
    return this.host.forgetting();
  }

  /**
   * Node `name` started again with an empty file (a new state directory), its Node back in
   * Kubernetes (every running node told), the clock driven meanwhile in steps of `stepMs`: a start
   * refused because the node's name is still held (ALREADY_RUNNING: its killed predecessor's Lease
   * has not lapsed) is tried again after RESTART_MS of clock, as a DaemonSet restarts its pod.
   * Gives the node's index in `nodes` and the starts it took; throws past `maxMs` of clock.
   */
  async rejoin(name: string, maxMs: number, stepMs = 1000): Promise<{ index: number; starts: number }> {
    await this.host.nodeBack(name);
    const began = this.clock.now();
    const within = (): boolean => this.clock.now() - began <= maxMs;
    for (let starts = 1; within(); starts++) {
      let outcome: { node: N } | { error: unknown } | undefined;
      void this.#open(name, `${name}-rejoined-${starts}`).then(
        (node) => {
          outcome = { node };
        },
        (error: unknown) => {
          outcome = { error };
        },
      );
      await this.settle();
      while (outcome === undefined && within()) await this.advance(stepMs, stepMs);
      if (outcome === undefined) break;
      if ('node' in outcome) {
        this.nodes.push(outcome.node);
        return { index: this.nodes.length - 1, starts };
      }
      if (!isWarrenError(outcome.error, 'ALREADY_RUNNING')) throw outcome.error;
      await this.advance(RESTART_MS, stepMs);
    }
    throw new Error(`node ${name} did not start again within ${maxMs / 1000} s of clock`);
  }

  /** The blocks the cluster says node `name` holds (keys). */
  async blocksOf(name: string): Promise<string[]> {
    return [...(await this.#auditor.claims())].filter(([, node]) => node === name).map(([key]) => key);
  }

  /** The independent audit of the running nodes' files and the cluster's objects (auditor.ts). */
  audit(): Promise<AuditReport> {
    return this.#auditor.audit(this.nodes, this.pool);
  }

  /** Closes every running node (their Leases withdrawn), then the server, and removes the nodes' files. */
  async stop(): Promise<void> {
    await this.host.close().catch(() => undefined);
    this.#auditor.close();
    await this.api.stop();
    removeDir(this.#dir);
  }
}

/** What every node of `o` gets beyond its name: agent flags, a database in memory. */
function nodeOptions(o: ScaleClusterOptions): { flags?: Readonly<Record<string, string>>; memory?: boolean } {
  return {
    ...(o.flags === undefined ? {} : { flags: o.flags }),
    ...(o.memory === undefined ? {} : { memory: o.memory }),
  };
}
