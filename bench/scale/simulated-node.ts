/**
 * One simulated node of the scale harness: what an agent on `--store kubernetes` runs for its
 * store, in this process and without a kubelet — the two-tier store (its own SQLite file beside
 * its own client of the API server), the allocator on it and the cluster's upkeep (announcement,
 * give-back, lending, holdings) — built by the agent's own builders (agent/base-wiring.ts's
 * `openBase`, agent/cluster/upkeep.ts's `startUpkeep`) from options read as the agent reads its
 * flags (settings/options.ts), so what it asks of the API server is what an agent asks.
 *
 * Guarantees: every request a node makes carries its own bearer token (the fake's
 * `clientKubeconfig(name)`), so the fake attributes each request and watch event to the node; every
 * timer runs on the clock it is given (the harness's one ManualClock), so an idle window is the
 * clock advanced, not real time waited; `close` stops the upkeep, then closes the store (withdrawing
 * the node's Lease, as an agent's clean stop does).
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
import type { Store } from '../../src/store/store.ts';
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
}

export class SimulatedNode {
  readonly name: string;
  readonly store: Store;
  readonly allocator: Allocator;
  /** What the upkeep's chores reported as failed (the agent's recent errors). */
  readonly errors: RecentErrors;
  readonly #upkeep: ClusterUpkeep;
  readonly #abort: AbortController;

  private constructor(name: string, base: OpenedBase, upkeep: ClusterUpkeep, abort: AbortController) {
    this.name = name;
    this.store = base.store;
    this.allocator = base.allocator;
    this.errors = base.errors;
    this.#upkeep = upkeep;
    this.#abort = abort;
  }

  /** Opens the node's store and starts its upkeep, as an agent's start steps 2 does (agent.ts). */
  static async open(o: SimulatedNodeOptions): Promise<SimulatedNode> {
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    const options = resolveAgentOptions(
      {
        nodeName: o.name,
        store: 'kubernetes',
        kubeconfig: o.kubeconfig,
        kubeNamespace: SCALE_NAMESPACE,
        stateDir: o.dir,
        database: join(o.dir, 'warren.db'),
        metricsAddress: '',
        kubernetes: 'off',
        ...o.flags,
      },
      {},
      process.getuid?.() ?? 0,
      o.dir,
    );
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
    });
    const abort = new AbortController();
    try {
      if (base.membership === undefined) throw new Error('the kubernetes store keeps a membership');
      const { allocator, errors, membership, record } = base;
      const deps = { allocator, clock, logger, errors, version: WARREN_VERSION, record, membership };
      const upkeep = await startUpkeep(options, deps, abort.signal);
      return new SimulatedNode(o.name, base, upkeep, abort);
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

  /** Stops the upkeep and closes the store: the node's Lease is withdrawn. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.store.close();
  }
}
