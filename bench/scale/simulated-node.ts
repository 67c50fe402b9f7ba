/**
 * One simulated node of the scale harness: what an agent on `--store kubernetes` runs for its
 * store, in this process and without a kubelet — the two-tier store (its own SQLite file beside
 * its own client of the API server), the allocator on it and the cluster's upkeep (announcement,
 * give-back, lending, holdings) — built by the agent's own builders (agent/base-wiring.ts's
 * `openBase`, agent/cluster/upkeep.ts's `startUpkeep`) from options read as the agent reads its
 * flags (settings/options.ts), so what it asks of the API server is what an agent asks.
 *
 * Each node also runs the agent's handling of Nodes deleted from Kubernetes (agent/kubernetes/nodes.ts:
 * a node gone from Kubernetes whose announcement lapsed is forgotten by one agent, its blocks freed),
 * fed by the harness (`nodeGone`, `nodeBack`) instead of a watch of the Node objects: the simulated
 * nodes have no kubelet and so no Node objects, and the harness plays what the Node source would
 * deliver (the requests of that watch are therefore not counted).
 *
 * Guarantees: every request a node makes carries its own bearer token (the fake's
 * `clientKubeconfig(name)`), so the fake attributes each request and watch event to the node, and is
 * counted by the node's own counter (`kubeRequests`, as the agent's metrics count them); every
 * timer runs on the clock it is given (the harness's one ManualClock), so an idle window is the
 * clock advanced, not real time waited; `close` stops the upkeep, then closes the store (withdrawing
 * the node's Lease, as an agent's clean stop does); `crash` stops it as a killed agent stops: no
 * Lease withdrawn, nothing more sent (what the publisher had batched is sent first, which a kill
 * would lose; the cluster's copy is then newer than a killed node's, never older).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Allocator } from '../../src/allocator/allocator.ts';
import { type OpenedBase, openBase } from '../../src/agent/base-wiring.ts';
import { type ClusterUpkeep, startUpkeep } from '../../src/agent/cluster/upkeep.ts';
import type { RecentErrors } from '../../src/agent/metrics/recent-errors.ts';
import { NO_TELEMETRY } from '../../src/agent/metrics/telemetry.ts';
import { WARREN_VERSION } from '../../src/agent/server/version.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { storeFacts } from '../../src/agent/settings/store-kind.ts';
import type { Clock } from '../../src/core/clock.ts';
import { KubernetesNodes } from '../../src/agent/kubernetes/nodes.ts';
import type { ApiRequestCounter } from '../../src/store/kubernetes/api-requests.ts';
import { ForwardingStore } from '../../src/store/forwarding-store.ts';
import { TieredStore } from '../../src/store/tiered/store.ts';
import type { Store } from '../../src/store/store.ts';
import type { NodeItem } from '../../src/sources/kubernetes/node-source.ts';
import { silentLogger } from '../../test/helpers/logger.ts';

/** The namespace the simulated nodes keep their Leases in (the DaemonSet's). */
export const SCALE_NAMESPACE = 'warren';

export interface SimulatedNodeOptions {
  readonly name: string;
  /** The node's own kubeconfig (FakeKubeApi.clientKubeconfig), or any API server's. */
  readonly kubeconfig: string;
  /** The node's state directory: its SQLite file and cluster record. */
  readonly dir: string;
  readonly clock: Clock;
  /** Agent flags beyond the store's (e.g. `upkeepInterval`), as text, as the flags give them. */
  readonly flags?: Readonly<Record<string, string>>;
  /** Keep the node's database in memory instead of a file (3 open files fewer a node). */
  readonly memory?: boolean;
  /** Whether Kubernetes has the Node `name` now (the harness's Node directory). */
  readonly nodeExists: (name: string) => boolean;
  /** Prompt lending's random moment before an answer, ms (the agent's: random; a test seeds it). */
  readonly lendJitter?: () => number;
}

/** Node items pushed by the harness, read by the node's KubernetesNodes until its stop. */
class NodeFeed implements AsyncIterable<NodeItem> {
  readonly #items: NodeItem[] = [];
  #wake: (() => void) | undefined;
  #ended = false;

  push(item: NodeItem): void {
    this.#items.push(item);
    this.#wake?.();
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<NodeItem> {
    while (!this.#ended) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}

export class SimulatedNode {
  readonly name: string;
  readonly store: Store;
  readonly allocator: Allocator;
  /** What the upkeep's chores reported as failed (the agent's recent errors). */
  readonly errors: RecentErrors;
  /** Every API request this node sent, by verb, resource and outcome. */
  readonly kubeRequests: ApiRequestCounter;
  /** The agent's handling of Nodes deleted from Kubernetes: what it forgot. */
  readonly nodes: KubernetesNodes;
  readonly #upkeep: ClusterUpkeep;
  readonly #abort: AbortController;
  readonly #feed: NodeFeed;

  private constructor(
    name: string,
    base: OpenedBase,
    parts: { upkeep: ClusterUpkeep; nodes: KubernetesNodes; feed: NodeFeed },
    abort: AbortController,
  ) {
    this.name = name;
    this.store = base.store;
    this.allocator = base.allocator;
    this.errors = base.errors;
    this.kubeRequests = base.kubeRequests;
    this.nodes = parts.nodes;
    this.#upkeep = parts.upkeep;
    this.#feed = parts.feed;
    this.#abort = abort;
  }

  /** Opens the node's store and starts its upkeep, as an agent's start steps 2 does (agent.ts). */
  static async open(o: SimulatedNodeOptions): Promise<SimulatedNode> {
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    const resolved = resolveAgentOptions(
      {
        nodeName: o.name,
        store: 'kubernetes',
        kubeconfig: o.kubeconfig,
        kubeNamespace: SCALE_NAMESPACE,
        stateDir: o.dir,
        database: o.memory === true ? ':memory:' : join(o.dir, 'warren.db'),
        metricsAddress: '',
        kubernetes: 'off',
        ...o.flags,
      },
      {},
      process.getuid?.() ?? 0,
      o.dir,
    );
    // The agent resolves --database against its directory; SQLite's ':memory:' must reach it as is.
    const options = o.memory === true ? { ...resolved, database: ':memory:' } : resolved;
    const facts = storeFacts(options);
    const clock = o.clock;
    const logger = silentLogger;
    const base = await openBase(options, facts, {
      clock,
      logger,
      stated: undefined,
      blocks: true,
      sides: () => {
        throw new Error('a simulated node serves no metrics');
      },
      released: NO_TELEMETRY,
      ...(o.lendJitter === undefined ? {} : { lendJitter: o.lendJitter }),
    });
    const abort = new AbortController();
    try {
      if (base.membership === undefined) throw new Error('the kubernetes store keeps a membership');
      const { allocator, errors, membership, record } = base;
      const deps = { allocator, clock, logger, errors, version: WARREN_VERSION, record, membership };
      const upkeep = await startUpkeep(options, deps, abort.signal);
      const nodes = new KubernetesNodes({
        store: base.store,
        membership,
        allocator,
        clock,
        logger,
        node: o.name,
        recheckMs: options.nodeLeaseSeconds * 1000,
        nodeExists: async (name) => o.nodeExists(name),
      });
      const feed = new NodeFeed();
      abort.signal.addEventListener('abort', () => feed.end(), { once: true });
      void nodes.run(feed, abort.signal).catch(() => undefined);
      return new SimulatedNode(o.name, base, { upkeep, nodes, feed }, abort);
    } catch (error) {
      abort.abort();
      await base.store.close();
      throw error;
    }
  }

  /** Why the node must not allocate now (not announced, halted); undefined when it may. */
  problem(): string | undefined {
    return this.#upkeep.problem();
  }

  /** Kubernetes deleted Node `name` (as the Node source tells it). */
  nodeGone(name: string): void {
    this.#feed.push({ kind: 'node-deleted', name });
  }

  /** Kubernetes has Node `name` again. */
  nodeBack(name: string): void {
    this.#feed.push({ kind: 'node-added', name });
  }

  /** Stops the upkeep and closes the store: the node's Lease is withdrawn. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.store.close();
  }

  /** Stops as a killed agent does: the Lease is left to lapse (the agent's close, less its withdrawal). */
  async crash(): Promise<void> {
    this.#abort.abort();
    // The agent's store is the two-tier store inside its wrappers (commit health, metrics): its
    // TieredStore's own close is the agent's close less the Lease's withdrawal (store-kind.ts).
    let store: unknown = this.store;
    while (!(store instanceof TieredStore) && store instanceof ForwardingStore)
      store = (store as unknown as { readonly inner: Store }).inner;
    if (!(store instanceof TieredStore)) throw new Error('a simulated node keeps a two-tier store');
    await TieredStore.prototype.close.call(store);
  }
}
