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
import type { PlanningStatus, WarrenPoolReport } from '../../api/status.ts';
import { defined } from '../../core/defined.ts';
import { isPlainObject } from '../../core/validate.ts';
import { formatSelector } from '../../sources/kubernetes/label-selector.ts';
import type { KubeObjectMeta, ListWatch } from '../../sources/kubernetes/list-watch.ts';
import type { CatalogEntry } from '../../sources/kubernetes/pool-catalog.ts';
import { NodeLabels, PoolCatalog } from '../../sources/kubernetes/pool-catalog.ts';
import type { AddPlanner } from '../server/add-plan.ts';
import type { PodDirectory } from './pod-directory.ts';
import type { PoolStatusWriter } from './pool-status.ts';
import { poolsPlanner } from './pools-planner.ts';
import { stickyPlanner } from './sticky-planner.ts';
import type { StickyRelease } from './sticky-release.ts';

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
  /**
   * On a store that keeps holdings: the StatefulSets' list-watch and the chore ending the sticky
   * holdings of ordinals they no longer cover (sticky-release.ts).
   */
  readonly sticky?: { readonly statefulSets: ListWatch<KubeObjectMeta>; readonly release: StickyRelease };
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
    // Holdings last (add-plan.ts): it reads the pools the plan draws from. Without a store that
    // keeps holdings a sticky ADD is refused by the allocator (code 7), never served as not sticky.
    const sticky = stickyPlanner({ directory: options.directory, catalog: this.catalog });
    this.planners =
      options.pools === undefined
        ? [sticky]
        : [
            poolsPlanner({
              directory: options.directory,
              catalog: this.catalog,
              nodeLabels: () => this.nodeLabels.labels(),
              node: options.node,
            }),
            sticky,
          ];
  }

  status(): PlanningStatus {
    const { directory, namespaces, pools, sticky } = this.#o;
    const writer = this.statusWriter?.status();
    return {
      directory: directory.status(),
      namespaces: namespaces.status(),
      ...(pools === undefined
        ? {}
        : {
            pools: {
              ...pools.pools.status(),
              listed: this.catalog.listed,
              list: this.catalog.entries().map(poolReport),
              nodeLabelsRead: this.nodeLabels.labels() !== undefined,
              ...defined({ statusWriter: writer }),
            },
          }),
      ...(sticky === undefined ? {} : { stickyRelease: sticky.release.status() }),
    };
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
    const sticky = this.#o.sticky;
    if (sticky !== undefined)
      loops.push(
        (async () => {
          for await (const item of sticky.statefulSets.events(signal)) sticky.release.observe(item);
        })(),
        sticky.release.run(signal),
      );
    await Promise.all(loops);
  }
}

/** A pool as `warren pools` shows it: its spec as read, its status as the cluster keeps it. */
export function poolReport(entry: CatalogEntry): WarrenPoolReport {
  const status = isPlainObject(entry.object.status) ? entry.object.status : {};
  const spec = entry.spec instanceof Error ? undefined : entry.spec;
  const rawRanges =
    isPlainObject(entry.object.spec) && Array.isArray(entry.object.spec.ranges) ? entry.object.spec.ranges : [];
  return {
    name: entry.name,
    ranges:
      spec?.ranges.map((r) => r.subnet) ??
      rawRanges.map((r) => (isPlainObject(r) && typeof r.range === 'string' ? r.range : '?')),
    ...(typeof status.capacity === 'string' ? { capacity: status.capacity } : {}),
    ...(typeof status.used === 'number' ? { used: status.used } : {}),
    ...(typeof status.blocks === 'number' ? { blocks: status.blocks } : {}),
    ...(typeof status.nodes === 'number' ? { nodes: status.nodes } : {}),
    ...(spec?.nodeSelector === undefined ? {} : { nodeSelector: formatSelector(spec.nodeSelector) }),
    ...(spec?.namespaceSelector === undefined ? {} : { namespaceSelector: formatSelector(spec.namespaceSelector) }),
    sticky: spec?.sticky ?? false,
    ...(entry.spec instanceof Error ? { problem: entry.spec.message } : {}),
  };
}
