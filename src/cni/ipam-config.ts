/**
 * The IPAM section of a CNI network config. Whereabouts configs move over unchanged: every key
 * whereabouts has a JSON field for is accepted. Keys about addresses (`range`, `range_start`,
 * `range_end`, `exclude`, `gateway`, `routes`, `dns`, `ipRanges`, `network_name`, `enable_l3`,
 * ...) keep whereabouts' meaning, including its leniency: host bits in `range`, `exclude` and
 * route destinations are masked off, and a gateway may lie outside the ranges. Keys that configure
 * whereabouts itself (its datastore, leader election, flat file, reconciler, logging) are checked
 * for type, then ignored and listed in `ignoredKeys`, so the agent can say once that they do
 * nothing here. Warren's own keys sit beside them.
 *
 * Guarantees: every problem is an INVALID_CONFIG error whose message starts with the path of the
 * offending key, or of the object holding several unknown keys, all of which it names; unknown
 * keys are refused, never ignored; no two ranges of one config share an address, whatever
 * `enable_overlapping_ranges` says (across configs it keeps whereabouts' meaning: false keeps the
 * config's ranges apart, pools of their own); a parsed network_name can always be encoded in a pool key.
 *
 * One range is read in ipam-range.ts, `routes` and `dns` in routes-and-dns.ts, `pools` (and the
 * network names that are the pools' own) in pool-names.ts, the keys of whereabouts itself in
 * whereabouts-keys.ts; what the engine keeps of a range (ipam/range.ts) knows nothing of keys.
 */
import { formatIP } from '../ipam/address.ts';
import { networkNameProblem } from '../ipam/pool-key.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { StoreKind } from '../store/store.ts';
import {
  MAX_COOLDOWN_SECONDS,
  describe,
  invalid,
  ipAt,
  isCooldownSeconds,
  isPlainObject,
  optionalBoolean,
  optionalString,
  quoted,
  refuseUnknownKeys,
  stringAt,
} from './config-values.ts';
import { parseRange, refuseOverlaps } from './ipam-range.ts';
import { POOL_NETWORK_PREFIX, parsePools } from './pool-names.ts';
import { type Dns, type Route, parseDns, parseRoutes } from './routes-and-dns.ts';
import { IGNORED_KEYS, checkIgnored } from './whereabouts-keys.ts';

/** A key Warren accepted and does not act on, with why. */
export interface IgnoredKey {
  /** Where it was, e.g. `ipam.etcd_host`. */
  readonly path: string;
  readonly reason: string;
}

export interface IpamConfig {
  readonly type: string;
  readonly ranges: readonly RangeSpec[];
  readonly routes: readonly Route[];
  readonly dns?: Dns;
  readonly networkName: string;
  /** Seconds a released address rests before it may be handed out again. */
  readonly cooldownSeconds: number;
  /** Agent socket for the plugin, when not the default. */
  readonly socket?: string;
  /** Where the plugin records a DEL the agent could not take, when not the default. */
  readonly journalDir?: string;
  /** The store this network expects the agent to run on; the agent refuses a mismatch. */
  readonly store?: StoreKind;
  /**
   * The operator's word that no other node uses these ranges (`node_local`), so a per-node store
   * may serve them under Kubernetes (cni/node-local.ts); absent unless true.
   */
  readonly nodeLocal?: true;
  /**
   * WarrenPools the network draws from (`pools`), in place of inline ranges (`ranges` is then
   * empty): the agent reads them from the cluster (sources/kubernetes/warren-pool.ts), and a pod's
   * or its namespace's `warren.dev/pools` annotation may name others. Absent for inline ranges.
   */
  readonly pools?: readonly string[];
  /**
   * A StatefulSet's pod keeps its address across re-creation, on any node (`sticky`): held for
   * (namespace, StatefulSet, ordinal) until the StatefulSet no longer covers the ordinal (docs/kubernetes.md,
   * "Sticky addresses"). Absent unless true.
   */
  readonly sticky?: true;
  /** Whereabouts keys present in the config that change nothing in Warren, in the order written. */
  readonly ignoredKeys: readonly IgnoredKey[];
}

const TOP_KEYS: ReadonlySet<string> = new Set([
  // Whereabouts keys with their whereabouts meaning.
  'type',
  'range',
  'range_start',
  'range_end',
  'exclude',
  'gateway',
  'routes',
  'dns',
  'ipRanges',
  'network_name',
  'enable_l3',
  'enable_overlapping_ranges',
  'exclude_gateway',
  'addresses',
  ...IGNORED_KEYS.keys(),
  // Warren's own.
  'socket',
  'journal_dir',
  'cooldown_seconds',
  'block_size',
  'store',
  'node_local',
  'pools',
  'sticky',
]);
/** Whereabouts' RangeConfiguration keys, plus Warren's per-range gateway and block size. */
const RANGE_KEYS: ReadonlySet<string> = new Set([
  'range',
  'range_start',
  'range_end',
  'exclude',
  'enable_l3',
  'gateway',
  'block_size',
]);

/**
 * Validates the `ipam` object of a network config. `path` prefixes messages and the paths in
 * `ignoredKeys` (default `ipam`). Throws INVALID_CONFIG naming the first problem found, or every
 * unknown key of the first object that has any.
 */
export function parseIpamConfig(value: unknown, path = 'ipam'): IpamConfig {
  if (!isPlainObject(value)) throw invalid(path, `must be an object, got ${describe(value)}`);
  refuseUnknownKeys(value, TOP_KEYS, path);
  const type = stringAt(value.type, `${path}.type`);
  const networkName = optionalString(value.network_name, `${path}.network_name`) ?? '';
  const nameProblem = networkNameProblem(networkName);
  if (nameProblem !== undefined) throw invalid(`${path}.network_name`, `${quoted(networkName)} ${nameProblem}`);
  if (networkName.startsWith(POOL_NETWORK_PREFIX))
    throw invalid(
      `${path}.network_name`,
      `${quoted(networkName)}: names starting with ${quoted(POOL_NETWORK_PREFIX)} are WarrenPools' own; ` +
        `name the pool in "pools" to share its addresses`,
    );
  const pools = value.pools === undefined ? undefined : parsePools(value.pools, `${path}.pools`);

  const ignoredKeys: IgnoredKey[] = [];
  for (const key of Object.keys(value)) {
    const ignored = IGNORED_KEYS.get(key);
    if (ignored === undefined) continue;
    checkIgnored(value[key], ignored.check, `${path}.${key}`);
    ignoredKeys.push({ path: `${path}.${key}`, reason: ignored.reason });
  }
  // Whereabouts' meaning: false keeps this config's ranges apart from the other ranges of the
  // network_name (each its own pool, never checked against the others); true, the default, keeps an
  // address unique across all of them (allocator/admission.ts).
  const apart = optionalBoolean(value.enable_overlapping_ranges, `${path}.enable_overlapping_ranges`) === false;
  if (optionalBoolean(value.exclude_gateway, `${path}.exclude_gateway`) === false) {
    ignoredKeys.push({
      path: `${path}.exclude_gateway`,
      reason: 'Warren never hands out a gateway address that lies in a range',
    });
  }
  const topL3 = optionalBoolean(value.enable_l3, `${path}.enable_l3`) ?? false;
  if (value.addresses !== undefined) {
    if (!Array.isArray(value.addresses))
      throw invalid(`${path}.addresses`, `must be a list, got ${describe(value.addresses)}`);
    if (value.addresses.length > 0) {
      throw invalid(
        `${path}.addresses`,
        'static addresses would give every attachment of this network the same address, and Warren hands an ' +
          'address to one attachment only; use a range (a /32 or /128 for one address) or request the address ' +
          'with CNI_ARGS IP= or the ips capability',
      );
    }
  }
  const socket = optionalString(value.socket, `${path}.socket`);
  if (socket !== undefined && !socket.startsWith('/'))
    throw invalid(`${path}.socket`, `${quoted(socket)} must be an absolute path`);
  const journalDir = optionalString(value.journal_dir, `${path}.journal_dir`);
  if (journalDir !== undefined && !journalDir.startsWith('/'))
    throw invalid(`${path}.journal_dir`, `${quoted(journalDir)} must be an absolute path`);
  let cooldownSeconds = 0;
  if (value.cooldown_seconds !== undefined) {
    const c = value.cooldown_seconds;
    if (!isCooldownSeconds(c)) {
      throw invalid(
        `${path}.cooldown_seconds`,
        `must be a whole number of seconds from 0 to ${MAX_COOLDOWN_SECONDS}, got ${describe(c)}`,
      );
    }
    cooldownSeconds = c;
  }
  const sharedGateway = value.gateway === undefined ? undefined : ipAt(value.gateway, `${path}.gateway`);
  const store = optionalString(value.store, `${path}.store`);
  if (store !== undefined && store !== 'sqlite' && store !== 'etcd' && store !== 'kubernetes')
    throw invalid(`${path}.store`, `must be "kubernetes", "sqlite" or "etcd", got ${describe(store)}`);
  const nodeLocal = optionalBoolean(value.node_local, `${path}.node_local`);
  const sticky = optionalBoolean(value.sticky, `${path}.sticky`);

  const ranges: RangeSpec[] = [];
  const rangePaths: string[] = [];
  if (value.range === undefined) {
    // Whereabouts silently drops these without a `range`; an exclusion that does nothing is how
    // addresses meant to stay free get handed out, so say so instead.
    for (const key of ['range_start', 'range_end', 'exclude'] as const) {
      if (value[key] !== undefined)
        throw invalid(
          `${path}.${key}`,
          'needs "range" beside it (it does not apply to ipRanges entries: give each entry its own)',
        );
    }
  } else {
    const raw = {
      range: value.range,
      range_start: value.range_start,
      range_end: value.range_end,
      exclude: value.exclude,
      gateway: undefined,
      block_size: value.block_size,
    };
    ranges.push(parseRange(raw, path, { networkName, apart }, topL3, sharedGateway));
    rangePaths.push(`${path}.range`);
  }
  if (value.ipRanges !== undefined) {
    if (!Array.isArray(value.ipRanges))
      throw invalid(`${path}.ipRanges`, `must be a list of ranges, got ${describe(value.ipRanges)}`);
    value.ipRanges.forEach((item, i) => {
      const at = `${path}.ipRanges[${i}]`;
      if (!isPlainObject(item)) throw invalid(at, `must be an object, got ${describe(item)}`);
      refuseUnknownKeys(item, RANGE_KEYS, at);
      const l3 = topL3 || (optionalBoolean(item.enable_l3, `${at}.enable_l3`) ?? false);
      const raw = {
        range: item.range,
        range_start: item.range_start,
        range_end: item.range_end,
        exclude: item.exclude,
        gateway: item.gateway,
        block_size: item.block_size ?? value.block_size,
      };
      ranges.push(parseRange(raw, at, { networkName, apart }, l3, sharedGateway));
      rangePaths.push(`${at}.range`);
    });
  }
  if (pools !== undefined && ranges.length > 0)
    throw invalid(
      `${path}.pools`,
      'names WarrenPools, and the config has inline ranges too: give one or the other (a pool holds its own ranges)',
    );
  if (pools !== undefined && nodeLocal === true)
    throw invalid(`${path}.pools`, 'WarrenPools are shared by the nodes; "node_local": true cannot describe them');
  if (ranges.length === 0 && pools === undefined)
    throw invalid(path, 'needs "range", a non-empty "ipRanges", or "pools" naming WarrenPools');
  refuseOverlaps(ranges, rangePaths, value.enable_overlapping_ranges !== undefined);
  if (sharedGateway !== undefined && !ranges.some((r) => r.family === sharedGateway.family)) {
    throw invalid(
      `${path}.gateway`,
      `IPv${sharedGateway.family} gateway ${formatIP(sharedGateway)} but no IPv${sharedGateway.family} range`,
    );
  }
  const config: { -readonly [K in keyof IpamConfig]: IpamConfig[K] } = {
    type,
    ranges,
    routes: parseRoutes(value.routes, `${path}.routes`),
    networkName,
    cooldownSeconds,
    ignoredKeys,
  };
  const dns = parseDns(value.dns, `${path}.dns`);
  if (dns !== undefined) config.dns = dns;
  if (socket !== undefined) config.socket = socket;
  if (journalDir !== undefined) config.journalDir = journalDir;
  if (store !== undefined) config.store = store;
  if (nodeLocal === true) config.nodeLocal = true;
  if (pools !== undefined) config.pools = pools;
  if (sticky === true) config.sticky = true;
  return config;
}
