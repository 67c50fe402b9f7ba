/**
 * A WarrenPool object (deploy/crds/warrenpools.yaml, cluster-scoped) read into what an ADD plans
 * with: its ranges — whereabouts' keys (range, range_start, range_end, exclude, gateway, enable_l3;
 * Warren's block_size)
 * read by the same parser as a network config's ipRanges entry — its routes, block size, node and
 * namespace selectors, and whether its addresses are sticky.
 *
 * Pool keys derive from the POOL, not from the network that names it: each range's network_name is
 * `warrenpool:<pool name>` (`poolNetworkName`), so every network naming a pool shares its addresses,
 * and no two networks naming it can hand out one address twice. A network config may not take such
 * a network_name itself (ipam-config.ts refuses the prefix).
 *
 * Guarantees: a pool that parses has at least one range, no two of its ranges share an address,
 * and every range's pool key is its own; every problem is an INVALID_CONFIG error naming the pool and
 * the path of the key (`WarrenPool gold: spec.ranges[0].range ...`). Pure: no I/O.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import { POOL_NETWORK_PREFIX } from '../../cni/pool-names.ts';
import { type Route, parseRoutes } from '../../cni/routes-and-dns.ts';
import { parseRange, refuseOverlaps } from '../../cni/ipam-range.ts';
import { type LabelSelector, parseLabelSelector } from './label-selector.ts';

export { POOL_NETWORK_PREFIX };

/** The network_name of a pool's ranges: what its pool keys are made of. */
export function poolNetworkName(pool: string): string {
  return `${POOL_NETWORK_PREFIX}${pool}`;
}

/**
 * The WarrenPool a range was planned from (its pool key's network_name is `warrenpool:<name>`), or
 * undefined for a config's inline range: what a later planner asks to learn whether it is sticky.
 */
export function warrenPoolOfRange(range: Pick<RangeSpec, 'pool'>): string | undefined {
  const at = range.pool.indexOf(`@${POOL_NETWORK_PREFIX}`);
  return at < 0 ? undefined : range.pool.slice(at + 1 + POOL_NETWORK_PREFIX.length);
}

export interface PoolSpec {
  readonly name: string;
  readonly uid: string;
  readonly ranges: readonly RangeSpec[];
  readonly routes: readonly Route[];
  /** Which nodes may hand out its addresses; undefined: every node. */
  readonly nodeSelector?: LabelSelector;
  /** Which namespaces' pods may use it; undefined: every namespace. */
  readonly namespaceSelector?: LabelSelector;
  /** A StatefulSet pod keeps its address across re-creation (helper "holdings" acts on it). */
  readonly sticky: boolean;
}

/** The allowed keys of one range of a pool: a network config's ipRanges entry's. */
const RANGE_KEYS: ReadonlySet<string> = new Set([
  'range',
  'range_start',
  'range_end',
  'exclude',
  'gateway',
  'enable_l3',
  'block_size',
]);

/** The pool an object describes; throws INVALID_CONFIG naming the pool and the key. */
export function parseWarrenPool(object: unknown): PoolSpec {
  const meta = isPlainObject(object) && isPlainObject(object.metadata) ? object.metadata : {};
  const name = typeof meta.name === 'string' && meta.name !== '' ? meta.name : undefined;
  if (name === undefined) throw new WarrenError('INVALID_CONFIG', 'a WarrenPool without metadata.name');
  const refuse = (message: string) => new WarrenError('INVALID_CONFIG', `WarrenPool ${name}: ${message}`);
  const spec = isPlainObject(object) && isPlainObject(object.spec) ? object.spec : undefined;
  if (spec === undefined) throw refuse('spec must be an object');
  try {
    const network = poolNetworkName(name);
    if (!Array.isArray(spec.ranges) || spec.ranges.length === 0)
      throw refuse('spec.ranges must list at least one range');
    const ranges: RangeSpec[] = [];
    const paths: string[] = [];
    spec.ranges.forEach((item, i) => {
      const at = `spec.ranges[${i}]`;
      if (!isPlainObject(item)) throw refuse(`${at} must be an object`);
      const unknown = Object.keys(item).filter((k) => !RANGE_KEYS.has(k));
      if (unknown.length > 0) throw refuse(`${at}: unknown keys ${unknown.join(', ')}`);
      const raw = {
        range: item.range,
        range_start: item.range_start,
        range_end: item.range_end,
        exclude: item.exclude,
        gateway: item.gateway,
        // The range's own, else the pool's (as ipRanges entries take the config's block_size).
        block_size: item.block_size ?? spec.blockSize,
      };
      ranges.push(parseRange(raw, at, { networkName: network, apart: false }, item.enable_l3 === true));
      paths.push(`${at}.range`);
    });
    refuseOverlaps(ranges, paths, false);
    const nodeSelector = selectorAt(spec.nodeSelector, 'spec.nodeSelector', refuse);
    const namespaceSelector = selectorAt(spec.namespaceSelector, 'spec.namespaceSelector', refuse);
    return {
      name,
      uid: typeof meta.uid === 'string' ? meta.uid : '',
      ranges,
      routes: parseRoutes(spec.routes, 'spec.routes'),
      ...defined({ nodeSelector, namespaceSelector }),
      sticky: spec.sticky === true,
    };
  } catch (error) {
    // The range parser names the key's path; say which pool it is in.
    if (error instanceof WarrenError && !error.message.startsWith(`WarrenPool ${name}:`)) throw refuse(error.message);
    throw error;
  }
}

function selectorAt(value: unknown, path: string, refuse: (message: string) => WarrenError): LabelSelector | undefined {
  if (value === undefined || value === null) return undefined;
  const selector = parseLabelSelector(value, path);
  if (typeof selector === 'string') throw refuse(selector);
  return selector;
}

/** Allocatable addresses of a pool: every address of its ranges outside exclusions and gateways. */
export function poolCapacity(ranges: readonly RangeSpec[]): bigint {
  let total = 0n;
  for (const r of ranges) {
    let count = r.last - r.first + 1n;
    // Exclusions may overlap each other and stick out of the span: count each excluded address once.
    const clipped = r.excluded
      .map(([a, b]) => [a < r.first ? r.first : a, b > r.last ? r.last : b] as const)
      .filter(([a, b]) => a <= b)
      .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
    let reach = r.first - 1n;
    for (const [a, b] of clipped) {
      const from = a > reach ? a : reach + 1n;
      if (b >= from) count -= b - from + 1n;
      if (b > reach) reach = b;
    }
    total += count;
  }
  return total;
}
