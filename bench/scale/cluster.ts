/**
 * The scale harness's cluster: the fake API server (test/helpers/fake-kube-api.ts, Warren's CRDs
 * served), N simulated nodes on it (simulated-node.ts), one shared range and one ManualClock for
 * all of them, and the auditor.
 *
 * Guarantees:
 * - time moves only in `advance`: the clock is stepped (every timer due fires, in order) and after
 *   each step the harness waits until the cluster is quiet — every request answered and none new
 *   for a few polls — so what a window of clock time costs does not depend on the machine's speed;
 * - `add` and `del` are an ADD and a DEL as the CNI service makes them of the allocator
 *   (allocate, release by owner), with the ADD's wall time measured;
 * - `audit` is independent of the allocator's own bookkeeping: it lists every node's SQLite file
 *   (through each node's store) and finds every address held by two owners (a lender's placeholder
 *   for an address it lent out is the lender's record of the loan, not a holder, and is left out).
 */
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { LENT_NETWORK } from '../../src/allocator/lending/loans.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { Owner } from '../../src/ipam/allocation.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/helpers/fake-kube-api.ts';
import { removeDir, tempDir } from '../../test/helpers/processes.ts';
import { SimulatedNode } from './simulated-node.ts';

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
}

/** How long the cluster must stay silent (real ms) after a clock step to count as quiet. */
const QUIET_MS = 10;
/** Quiet polls in a row that make the cluster settled. */
const QUIET_POLLS = 2;
/** How long a settle waits for requests still unanswered before it gives up on them. */
const SETTLE_DEADLINE_MS = 60_000;

export const nodeName = (i: number): string => `node-${String(i).padStart(4, '0')}`;

export class ScaleCluster {
  readonly api: FakeKubeApi;
  readonly clock: ManualClock;
  readonly nodes: SimulatedNode[] = [];
  readonly ranges: readonly RangeSpec[];
  /** Requests left unanswered by a settle that reached its deadline (should stay 0). */
  unsettled = 0;
  readonly #dir: string;
  /** Records before this index are answered; those after it are looked at by the next settle. */
  #answered = 0;

  private constructor(api: FakeKubeApi, clock: ManualClock, ranges: readonly RangeSpec[], dir: string) {
    this.api = api;
    this.clock = clock;
    this.ranges = ranges;
    this.#dir = dir;
  }

  static async start(o: ScaleClusterOptions): Promise<ScaleCluster> {
    // A whole second: the Leases' MicroTimes and the objects' timestamps read alike.
    const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    const api = await startFakeKubeApi({ crds: 'deploy', now: () => new Date(clock.now()) });
    const ipam = { type: 'warren', range: o.range, ...(o.blockSize === undefined ? {} : { block_size: o.blockSize }) };
    const cluster = new ScaleCluster(api, clock, parseIpamConfig(ipam).ranges, tempDir('warren-scale-'));
    try {
      const batch = o.startConcurrency ?? 25;
      for (let first = 0; first < o.nodes; first += batch) {
        const names = Array.from({ length: Math.min(batch, o.nodes - first) }, (_, k) => nodeName(first + k));
        const opened = await Promise.all(names.map((name) => cluster.#open(name, o.flags)));
        cluster.nodes.push(...opened);
      }
      await cluster.settle();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  #open(name: string, flags: Readonly<Record<string, string>> | undefined): Promise<SimulatedNode> {
    const kubeconfig = this.api.clientKubeconfig(name);
    return SimulatedNode.open({
      name,
      kubeconfig,
      dir: join(this.#dir, name),
      clock: this.clock,
      ...(flags === undefined ? {} : { flags }),
    });
  }

  /** The pool of the shared range. */
  get pool(): string {
    return this.ranges[0]?.pool ?? '';
  }

  /**
   * Waits until every request made so far is answered and none came for QUIET_POLLS polls of
   * QUIET_MS (an open watch counts as answered once its 200 went out).
   */
  async settle(): Promise<void> {
    const records = this.api.requests;
    const deadline = Date.now() + SETTLE_DEADLINE_MS;
    let quiet = 0;
    let seen = records.length;
    while (quiet < QUIET_POLLS) {
      await delay(QUIET_MS);
      if (this.#answered > records.length) this.#answered = 0; // the records were cleared
      while (this.#answered < records.length && records[this.#answered]?.status !== 0) this.#answered++;
      const busy = this.#answered < records.length || records.length !== seen;
      seen = records.length;
      quiet = busy ? 0 : quiet + 1;
      if (busy && Date.now() > deadline) {
        this.unsettled += records.length - this.#answered;
        this.#answered = records.length;
        return;
      }
    }
  }

  /** Advances the clock by `ms` in steps of `stepMs`, settling after each; `each` runs before a step. */
  async advance(ms: number, stepMs: number, each?: (elapsedMs: number) => Promise<void>): Promise<void> {
    for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
      if (each !== undefined) await each(elapsed);
      this.clock.advance(Math.min(stepMs, ms - elapsed));
      await this.settle();
    }
  }

  /** An ADD on node `i` for container `id`: its wall time in ms (it throws as the allocator does). */
  async add(i: number, id: string): Promise<number> {
    const node = this.#node(i);
    const started = performance.now();
    await node.allocator.allocate({ owner: ownerOf(id), ranges: this.ranges });
    return performance.now() - started;
  }

  /** A DEL on node `i` for container `id`. */
  async del(i: number, id: string): Promise<void> {
    await this.#node(i).allocator.release(ownerOf(id));
  }

  #node(i: number): SimulatedNode {
    const node = this.nodes[i];
    if (node === undefined) throw new Error(`no node ${i}`);
    return node;
  }

  /**
   * Addresses held twice across every node's file ("address: node/container, node/container"),
   * and how many addresses the nodes hold in all.
   */
  async audit(): Promise<{ readonly held: number; readonly duplicates: readonly string[] }> {
    const owners = new Map<string, string[]>();
    let held = 0;
    for (const node of this.nodes) {
      for (const a of await node.store.list({ rangePool: this.pool })) {
        if (a.network === LENT_NETWORK) continue;
        held++;
        owners.set(a.address, [...(owners.get(a.address) ?? []), `${node.name}/${a.containerID}`]);
      }
    }
    const duplicates = [...owners].filter(([, o]) => o.length > 1).map(([address, o]) => `${address}: ${o.join(', ')}`);
    return { held, duplicates };
  }

  /** Closes every node (their Leases withdrawn), then the fake, and removes the nodes' files. */
  async stop(): Promise<void> {
    for (const node of this.nodes) await node.close().catch(() => undefined);
    await this.api.stop();
    removeDir(this.#dir);
  }
}

/** The owner of container `id`'s address, as a CNI ADD names it. */
export const ownerOf = (id: string): Owner => ({ network: 'scale', containerID: id, ifname: 'eth0' });
