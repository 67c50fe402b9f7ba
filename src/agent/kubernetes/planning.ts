/**
 * What the ADD planners read from Kubernetes, kept current by watches the agent runs beside its pod
 * source: the namespaces (labels and annotations: the pod directory), and — on the kubernetes store,
 * where Warren's custom resources are installed — the WarrenPools (the pool catalog), this node's
 * labels (a watch of its own Node object) and the pools' status, written by one agent at a time.
 *
 * Guarantees: each watch is a list-watch that retries forever (list-watch.ts); `run` ends only when
 * the signal aborts, and a watch that ends before is reported by the caller as a failure of the
 * agent (release-wiring.ts supervises it). The planners read only these caches (and the pod
 * directory's, fed by the pod source): an ADD whose pod is cached costs no API request.
 */
import type { KubeObjectMeta, ListWatch } from '../../sources/kubernetes/list-watch.ts';
import { NodeLabels, PoolCatalog } from '../../sources/kubernetes/pool-catalog.ts';
import type { AddPlanner } from '../server/add-plan.ts';
import type { PodDirectory } from './pod-directory.ts';
import type { PoolStatusWriter } from './pool-status.ts';
import { poolsPlanner } from './pools-planner.ts';

export interface PlanningOptions {
  readonly node: string;
  readonly directory: PodDirectory;
  /** The namespaces' list-watch. */
  readonly namespaces: ListWatch<KubeObjectMeta>;
  /** On the kubernetes store: the WarrenPools' list-watch and this node's (metadata.name=<node>). */
  readonly pools?: {
    readonly pools: ListWatch<KubeObjectMeta>;
    readonly self: ListWatch<KubeObjectMeta>;
    /** Writes the pools' status; made with the catalog it reads. */
    readonly status: (catalog: PoolCatalog) => PoolStatusWriter | undefined;
  };
}

export class KubernetesPlanning {
  readonly #o: PlanningOptions;
  readonly catalog = new PoolCatalog();
  readonly nodeLabels = new NodeLabels();
  readonly statusWriter: PoolStatusWriter | undefined;
  /** The planners, in order: pools first (add-plan.ts). */
  readonly planners: readonly AddPlanner[];

  constructor(options: PlanningOptions) {
    this.#o = options;
    this.statusWriter = options.pools?.status(this.catalog);
    this.planners =
      options.pools === undefined
        ? []
        : [
            poolsPlanner({
              directory: options.directory,
              catalog: this.catalog,
              nodeLabels: () => this.nodeLabels.labels(),
              node: options.node,
            }),
          ];
  }

  /** Every watch (and the status writer) until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { directory, namespaces, pools } = this.#o;
    const loops: Array<Promise<void>> = [
      (async () => {
        for await (const item of namespaces.events(signal)) directory.observeNamespaces(item);
      })(),
    ];
    if (pools !== undefined) {
      loops.push(
        (async () => {
          for await (const item of pools.pools.events(signal)) this.catalog.observe(item);
        })(),
        (async () => {
          for await (const item of pools.self.events(signal)) this.nodeLabels.observe(item);
        })(),
      );
      if (this.statusWriter !== undefined) loops.push(this.statusWriter.run(signal));
    }
    await Promise.all(loops);
  }
}
