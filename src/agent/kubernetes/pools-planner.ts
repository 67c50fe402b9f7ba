/**
 * Which WarrenPools serve an ADD (the first planner, add-plan.ts). For a network whose config names
 * pools (`ipam.pools`, possibly empty), the pools are, in this order of precedence:
 * 1. the pod's annotation `warren.dev/pools` (comma-separated pool names);
 * 2. its namespace's annotation `warren.dev/pools`;
 * 3. the config's `pools`.
 * Of the pools so named, those whose `nodeSelector` matches this node's labels serve it (a rack's
 * pool on the rack's nodes); every one must admit the pod's namespace (`namespaceSelector`). Per
 * family, the first serving pool that has ranges of it gives them (each of its ranges of that
 * family gives one address, as an ipRanges entry does).
 *
 * A config with inline ranges is left as it is (whereabouts configs keep working unchanged, and an
 * annotation never moves a network its config fixed).
 *
 * Refused with code 7 (INVALID_CONFIG), naming why: a pool that does not exist or whose spec is
 * invalid; a pool whose namespaceSelector does not match the pod's namespace; no named pool whose
 * nodeSelector matches this node (each one's selector named); an annotation naming no pool.
 * Answered with 11 (TRY_AGAIN) while the pools or this node's labels are not read yet.
 *
 * Reads only the agent's caches (the pod directory, the pool catalog, the node's labels): no API
 * request on an ADD whose pod the pod watch holds.
 */
import { WarrenError } from '../../core/errors.ts';
import type { NetConf } from '../../cni/netconf.ts';
import { isPoolName } from '../../cni/pool-names.ts';
import type { Route } from '../../cni/routes-and-dns.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import { formatSelector, selectorMatches } from '../../sources/kubernetes/label-selector.ts';
import type { PoolSpec } from '../../sources/kubernetes/warren-pool.ts';
import type { CatalogEntry } from '../../sources/kubernetes/pool-catalog.ts';
import type { AddPlan, AddPlanner, PodRef } from '../server/add-plan.ts';
import type { NamespaceView, PodView } from './pod-directory.ts';

/** The annotation, on a pod or a namespace, naming the pools its pods draw from. */
export const POOLS_ANNOTATION = 'warren.dev/pools';

export interface PoolsPlannerOptions {
  readonly directory: {
    pod(ref: PodRef): Promise<PodView | undefined>;
    namespace(name: string): Promise<NamespaceView | undefined>;
  };
  readonly catalog: { readonly listed: boolean; entry(name: string): CatalogEntry | undefined };
  /** This node's labels; undefined until read. */
  readonly nodeLabels: () => Readonly<Record<string, string>> | undefined;
  readonly node: string;
}

/** The pool names of an annotation's value; throws INVALID_CONFIG for a name no pool can have. */
export function poolNamesOf(value: string, where: string): string[] {
  const names = value
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  if (names.length === 0) throw new WarrenError('INVALID_CONFIG', `${where} names no WarrenPool`);
  for (const name of names)
    if (!isPoolName(name))
      throw new WarrenError('INVALID_CONFIG', `${where}: ${JSON.stringify(name)} is not a WarrenPool name`);
  return [...new Set(names)];
}

export function poolsPlanner(o: PoolsPlannerOptions): AddPlanner {
  return async (conf: NetConf, pod: PodRef | undefined, plan: AddPlan): Promise<AddPlan> => {
    const configured = conf.ipam.pools;
    if (configured === undefined) return plan;
    let names: readonly string[] = configured;
    let source = `network ${conf.name}'s ipam.pools`;
    let namespace: NamespaceView | undefined;
    if (pod !== undefined) {
      const view = await o.directory.pod(pod);
      const own = view?.annotations[POOLS_ANNOTATION];
      if (own !== undefined) {
        source = `pod ${pod.namespace}/${pod.name}'s annotation ${POOLS_ANNOTATION}`;
        names = poolNamesOf(own, source);
      } else {
        namespace = await o.directory.namespace(pod.namespace);
        const inherited = namespace?.annotations[POOLS_ANNOTATION];
        if (inherited !== undefined) {
          source = `namespace ${pod.namespace}'s annotation ${POOLS_ANNOTATION}`;
          names = poolNamesOf(inherited, source);
        }
      }
    }
    if (names.length === 0)
      throw new WarrenError(
        'INVALID_CONFIG',
        `network ${conf.name} names no WarrenPool (ipam.pools is empty) and ` +
          (pod === undefined
            ? 'the ADD names no pod'
            : `neither pod ${pod.namespace}/${pod.name} nor its namespace has the annotation ${POOLS_ANNOTATION}`),
      );
    if (!o.catalog.listed)
      throw new WarrenError('TRY_AGAIN', 'the WarrenPools are not read yet (the agent is starting its watch of them)');
    const pools = names.map((name) => specOf(o.catalog.entry(name), name, source));
    for (const pool of pools) {
      if (pool.namespaceSelector === undefined) continue;
      if (pod === undefined)
        throw new WarrenError(
          'INVALID_CONFIG',
          `WarrenPool ${pool.name} (from ${source}) admits pods of some namespaces only (namespaceSelector), ` +
            'and the ADD names no pod',
        );
      namespace ??= await o.directory.namespace(pod.namespace);
      if (!selectorMatches(pool.namespaceSelector, namespace?.labels ?? {}))
        throw new WarrenError(
          'INVALID_CONFIG',
          `WarrenPool ${pool.name} (from ${source}) is not for namespace ${pod.namespace}: its namespaceSelector ` +
            `(${formatSelector(pool.namespaceSelector)}) does not match the namespace's labels`,
        );
    }
    const serving = pools.filter((pool) => pool.nodeSelector === undefined || nodeMatches(o, pool));
    if (serving.length === 0)
      throw new WarrenError(
        'INVALID_CONFIG',
        `no WarrenPool named by ${source} may be used on node ${o.node}: ` +
          pools
            .map((p) => `${p.name}'s nodeSelector (${formatSelector(p.nodeSelector ?? { requirements: [] })})`)
            .join(', ') +
          ` does not match the node's labels`,
      );
    const used = firstPerFamily(serving);
    return { ...plan, ranges: used.flatMap((u) => u.ranges), routes: routesOf(used.map((u) => u.pool)) };
  };
}

function specOf(entry: CatalogEntry | undefined, name: string, source: string): PoolSpec {
  if (entry === undefined)
    throw new WarrenError('INVALID_CONFIG', `there is no WarrenPool named ${name} (named by ${source})`);
  if (entry.spec instanceof WarrenError)
    throw new WarrenError('INVALID_CONFIG', `${entry.spec.message} (the pool is named by ${source})`);
  return entry.spec;
}

function nodeMatches(o: PoolsPlannerOptions, pool: PoolSpec): boolean {
  const labels = o.nodeLabels();
  if (labels === undefined)
    throw new WarrenError(
      'TRY_AGAIN',
      `node ${o.node}'s labels are not read yet (WarrenPool ${pool.name} selects nodes)`,
    );
  return selectorMatches(pool.nodeSelector ?? { requirements: [] }, labels);
}

/** Per family, the first serving pool that has ranges of it, with those ranges. */
function firstPerFamily(pools: readonly PoolSpec[]): Array<{ pool: PoolSpec; ranges: RangeSpec[] }> {
  const out: Array<{ pool: PoolSpec; ranges: RangeSpec[] }> = [];
  for (const family of [4, 6] as const) {
    const first = pools.find((p) => p.ranges.some((r) => r.family === family));
    if (first !== undefined) out.push({ pool: first, ranges: first.ranges.filter((r) => r.family === family) });
  }
  return out;
}

function routesOf(pools: readonly PoolSpec[]): Route[] {
  const seen = new Set<string>();
  const out: Route[] = [];
  for (const route of pools.flatMap((p) => p.routes)) {
    const key = `${route.dst} ${route.gw ?? ''}`;
    if (!seen.has(key)) out.push(route);
    seen.add(key);
  }
  return out;
}
