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
 * `enable_overlapping_ranges` says; a parsed network_name can always be encoded in a pool key.
 */
import {
  type Cidr,
  type Family,
  type IPAddress,
  bitsOf,
  contains,
  formatCidr,
  formatIP,
  lastOf,
  networkOf,
  parseCidr,
  parseIP,
} from './address.ts';
import { networkNameProblem, poolKeyOf, subnetsOverlap } from './pool-key.ts';
import { describe, invalid, ipAt, isPlainObject, optionalBoolean, optionalString, quoted, refuseUnknownKeys, stringAt, stringListAt, subnetAt } from './config-values.ts';
import { IGNORED_KEYS, checkIgnored } from './whereabouts-keys.ts';

export interface Route {
  readonly dst: string;
  readonly gw?: string;
}

export interface Dns {
  readonly nameservers?: string[];
  readonly domain?: string;
  readonly search?: string[];
  readonly options?: string[];
}

/** One range addresses are drawn from: one address per range per attachment. */
export interface RangeSpec {
  readonly family: Family;
  /** The network the range lives in, canonical (`10.0.0.0/24`), whatever host bits were written. */
  readonly subnet: string;
  /** The subnet's network address. */
  readonly network: bigint;
  readonly prefixLength: number;
  /** First and last allocatable address, after range_start/range_end, network and broadcast. */
  readonly first: bigint;
  readonly last: bigint;
  /** Excluded CIDRs as inclusive [from, to] intervals, plus the gateway when it is in the subnet. */
  readonly excluded: ReadonlyArray<readonly [bigint, bigint]>;
  /** Reported with every address of this range; of the range's family, possibly outside its subnet. */
  readonly gateway?: IPAddress;
  /** Identity of the pool: ranges with one subnet and network_name share addresses. */
  readonly pool: string;
  /**
   * Prefix length of the blocks the range is split into when nodes share it (cluster store);
   * `block_size`, or the family's default, never shorter than the range's own prefix.
   */
  readonly blockPrefix: number;
}

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
  /** Whereabouts keys present in the config that change nothing in Warren, in the order written. */
  readonly ignoredKeys: readonly IgnoredKey[];
}

/** Default block prefix lengths in cluster mode: 64 addresses per block in either family. */
export const DEFAULT_BLOCK_PREFIX = { 4: 26, 6: 122 } as const;

export type StoreKind = 'sqlite' | 'etcd';

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
]);
/** Whereabouts' RangeConfiguration keys, plus Warren's per-range gateway and block size. */
const RANGE_KEYS: ReadonlySet<string> = new Set(['range', 'range_start', 'range_end', 'exclude', 'enable_l3', 'gateway', 'block_size']);
const ROUTE_KEYS: ReadonlySet<string> = new Set(['dst', 'gw']);
const DNS_KEYS: ReadonlySet<string> = new Set(['nameservers', 'domain', 'search', 'options']);

interface RawRange {
  range: unknown;
  range_start: unknown;
  range_end: unknown;
  exclude: unknown;
  gateway: unknown;
  block_size: unknown;
}

/**
 * One range. Whereabouts' semantics, from pkg/config/config.go and pkg/iphelpers: the range is
 * the masked network (the address written is not where allocation starts); the first and last
 * usable addresses leave out the network address and the IPv4 broadcast, except in /31, /32,
 * /127 and /128, where every address is usable, and except with `enable_l3` (`l3`), where every
 * address of the subnet is. (Whereabouts also leaves out IPv6's all-ones address; Warren hands
 * it out.) `range_start` and `range_end` narrow that span.
 */
function parseRange(raw: RawRange, path: string, networkName: string, l3: boolean, sharedGateway?: IPAddress): RangeSpec {
  const rangeText = stringAt(raw.range, `${path}.range`);
  let subnet: Cidr;
  let explicitStart: IPAddress | undefined;
  let explicitEnd: IPAddress | undefined;
  const dash = rangeText.indexOf('-');
  if (dash >= 0) {
    // Whereabouts' `a.b.c.d-e.f.g.h/len`: a span inside the network of length `len`.
    const slash = rangeText.lastIndexOf('/');
    const startIP = parseIP(rangeText.slice(0, dash));
    const endIP = parseIP(rangeText.slice(dash + 1, slash < 0 ? undefined : slash));
    const cidr = slash < 0 || startIP === undefined ? undefined : parseCidr(`${rangeText.slice(0, dash)}${rangeText.slice(slash)}`);
    if (cidr === undefined || startIP === undefined || endIP === undefined || endIP.family !== startIP.family) {
      throw invalid(`${path}.range`, `${quoted(rangeText)} is not a CIDR or a start-end/length range`);
    }
    subnet = { address: { family: cidr.address.family, value: networkOf(cidr) }, length: cidr.length };
    if (raw.range_start !== undefined || raw.range_end !== undefined) {
      throw invalid(`${path}.range`, 'a start-end range cannot be combined with range_start or range_end');
    }
    explicitStart = startIP;
    explicitEnd = endIP;
    if (!contains(subnet, endIP)) throw invalid(`${path}.range`, `end ${formatIP(endIP)} is outside ${formatSubnet(subnet)}`);
  } else {
    subnet = subnetAt(rangeText, `${path}.range`, false);
  }
  const family = subnet.address.family;
  const subnetText = formatSubnet(subnet);
  if (raw.range_start !== undefined) explicitStart = ipAt(raw.range_start, `${path}.range_start`);
  if (raw.range_end !== undefined) explicitEnd = ipAt(raw.range_end, `${path}.range_end`);
  for (const [key, ip] of [['range_start', explicitStart], ['range_end', explicitEnd]] as const) {
    if (ip !== undefined && !contains(subnet, ip)) {
      throw invalid(`${path}.${key}`, `${formatIP(ip)} is outside range ${subnetText}`);
    }
  }
  const net = networkOf(subnet);
  const broadcast = lastOf(subnet);
  const bits = bitsOf(family);
  const everyAddress = l3 || subnet.length >= bits - 1;
  const firstHost = everyAddress ? net : net + 1n;
  const lastHost = everyAddress || family === 6 ? broadcast : broadcast - 1n;
  const first = explicitStart !== undefined && explicitStart.value > firstHost ? explicitStart.value : firstHost;
  const last = explicitEnd !== undefined && explicitEnd.value < lastHost ? explicitEnd.value : lastHost;
  if (explicitStart !== undefined && explicitEnd !== undefined && explicitStart.value > explicitEnd.value) {
    throw invalid(`${path}.${dash >= 0 ? 'range' : 'range_end'}`, `${formatIP(explicitEnd)} comes before range_start ${formatIP(explicitStart)}`);
  }
  if (first > last) throw invalid(`${path}.range`, `${subnetText} has no allocatable addresses`);

  const excluded: Array<[bigint, bigint]> = [];
  if (raw.exclude !== undefined) {
    if (!Array.isArray(raw.exclude)) throw invalid(`${path}.exclude`, `must be a list of CIDRs, got ${describe(raw.exclude)}`);
    raw.exclude.forEach((item, i) => {
      const cidr = subnetAt(item, `${path}.exclude[${i}]`, true);
      if (cidr.address.family !== family) {
        throw invalid(`${path}.exclude[${i}]`, `IPv${cidr.address.family} exclusion in IPv${family} range ${subnetText}`);
      }
      excluded.push([networkOf(cidr), lastOf(cidr)]);
    });
  }
  // Whereabouts reports its one gateway with every address and checks nothing about it; Warren
  // reports it with the addresses of its own family, and never hands it out when it is in range.
  let gateway: IPAddress | undefined;
  if (raw.gateway !== undefined) {
    gateway = ipAt(raw.gateway, `${path}.gateway`);
    if (gateway.family !== family) throw invalid(`${path}.gateway`, `IPv${gateway.family} gateway for IPv${family} range ${subnetText}`);
  } else if (sharedGateway !== undefined && sharedGateway.family === family) {
    gateway = sharedGateway;
  }
  if (gateway !== undefined && contains(subnet, gateway)) excluded.push([gateway.value, gateway.value]);
  const spec = { family, network: net, prefixLength: subnet.length };
  let blockPrefix = Math.max(DEFAULT_BLOCK_PREFIX[family], subnet.length);
  if (raw.block_size !== undefined) {
    const b = raw.block_size;
    if (typeof b !== 'number' || !Number.isInteger(b) || b < subnet.length || b > bits) {
      throw invalid(`${path}.block_size`, `must be a prefix length from ${subnet.length} (the range's own) to ${bits}, got ${describe(b)}`);
    }
    blockPrefix = b;
  }
  return { ...spec, subnet: subnetText, first, last, excluded, gateway, pool: poolKeyOf(spec, networkName), blockPrefix };
}

function formatSubnet(cidr: Cidr): string {
  return formatCidr(cidr.address.family, networkOf(cidr), cidr.length);
}

function parseRoutes(value: unknown, path: string): Route[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid(path, `must be a list of routes, got ${describe(value)}`);
  return value.map((item, i) => {
    const at = `${path}[${i}]`;
    if (!isPlainObject(item)) throw invalid(at, `must be an object, got ${describe(item)}`);
    refuseUnknownKeys(item, ROUTE_KEYS, at);
    // Masked like every other CIDR: the kernel refuses a route whose destination has host bits.
    const dst = subnetAt(item.dst, `${at}.dst`, false);
    const route: { dst: string; gw?: string } = { dst: formatSubnet(dst) };
    if (item.gw !== undefined) {
      const gw = ipAt(item.gw, `${at}.gw`);
      if (gw.family !== dst.address.family) throw invalid(`${at}.gw`, `IPv${gw.family} gateway for an IPv${dst.address.family} destination`);
      route.gw = formatIP(gw);
    }
    return route;
  });
}

function parseDns(value: unknown, path: string): Dns | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) throw invalid(path, `must be an object, got ${describe(value)}`);
  refuseUnknownKeys(value, DNS_KEYS, path);
  const dns: { nameservers?: string[]; domain?: string; search?: string[]; options?: string[] } = {};
  if (value.nameservers !== undefined) {
    dns.nameservers = stringListAt(value.nameservers, `${path}.nameservers`).map((ns, i) =>
      formatIP(ipAt(ns, `${path}.nameservers[${i}]`)),
    );
  }
  const domain = optionalString(value.domain, `${path}.domain`);
  if (domain !== undefined) dns.domain = domain;
  if (value.search !== undefined) dns.search = stringListAt(value.search, `${path}.search`);
  if (value.options !== undefined) dns.options = stringListAt(value.options, `${path}.options`);
  return dns;
}

/**
 * Refuses two ranges that share an address. Within one config they share a network_name, so one
 * address could go to two attachments (and one attachment would hold two addresses of one
 * subnet); whereabouts' `enable_overlapping_ranges` cannot make that safe. Sorting by network
 * finds any overlap in O(n log n): CIDRs nest or are disjoint, so a range overlaps an earlier one
 * exactly when it overlaps the earlier range reaching furthest.
 */
function refuseOverlaps(ranges: readonly RangeSpec[], paths: readonly string[], overlappingKeyGiven: boolean): void {
  const order = ranges.map((_, i) => i);
  const at = (i: number): RangeSpec => ranges[i] as RangeSpec;
  order.sort((i, j) => at(i).family - at(j).family || compareBig(at(i).network, at(j).network) || at(i).prefixLength - at(j).prefixLength || i - j);
  let reach: number | undefined;
  for (const i of order) {
    const range = at(i);
    if (reach !== undefined && subnetsOverlap(at(reach), range)) {
      const [earlier, later] = reach < i ? [reach, i] : [i, reach];
      const a = at(earlier);
      const b = at(later);
      if (a.subnet === b.subnet) throw invalid(paths[later] as string, `${b.subnet} is listed twice (also at ${paths[earlier]})`);
      const note = overlappingKeyGiven ? ', whatever enable_overlapping_ranges says' : '';
      throw invalid(paths[later] as string, `${b.subnet} overlaps ${a.subnet} at ${paths[earlier]}: ranges of one network must not share addresses${note}`);
    }
    if (reach === undefined || at(reach).family !== range.family || subnetEnd(range) > subnetEnd(at(reach))) reach = i;
  }
}

function compareBig(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function subnetEnd(range: RangeSpec): bigint {
  return lastOf({ address: { family: range.family, value: range.network }, length: range.prefixLength });
}

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

  const ignoredKeys: IgnoredKey[] = [];
  for (const key of Object.keys(value)) {
    const ignored = IGNORED_KEYS.get(key);
    if (ignored === undefined) continue;
    checkIgnored(value[key], ignored.check, `${path}.${key}`);
    ignoredKeys.push({ path: `${path}.${key}`, reason: ignored.reason });
  }
  // Whereabouts' defaults (true, false) describe what it does; Warren always does the safe thing,
  // so only the other value is worth a word.
  if (optionalBoolean(value.enable_overlapping_ranges, `${path}.enable_overlapping_ranges`) === false) {
    ignoredKeys.push({ path: `${path}.enable_overlapping_ranges`, reason: 'Warren keeps every address unique within a network_name whatever this says' });
  }
  if (optionalBoolean(value.exclude_gateway, `${path}.exclude_gateway`) === false) {
    ignoredKeys.push({ path: `${path}.exclude_gateway`, reason: 'Warren never hands out a gateway address that lies in a range' });
  }
  const topL3 = optionalBoolean(value.enable_l3, `${path}.enable_l3`) ?? false;
  if (value.addresses !== undefined) {
    if (!Array.isArray(value.addresses)) throw invalid(`${path}.addresses`, `must be a list, got ${describe(value.addresses)}`);
    if (value.addresses.length > 0) {
      throw invalid(
        `${path}.addresses`,
        'static addresses would give every attachment of this network the same address, and Warren hands an address to one attachment only; use a range (a /32 or /128 for one address) or request the address with CNI_ARGS IP= or the ips capability',
      );
    }
  }
  const socket = optionalString(value.socket, `${path}.socket`);
  if (socket !== undefined && !socket.startsWith('/')) throw invalid(`${path}.socket`, `${quoted(socket)} must be an absolute path`);
  const journalDir = optionalString(value.journal_dir, `${path}.journal_dir`);
  if (journalDir !== undefined && !journalDir.startsWith('/')) throw invalid(`${path}.journal_dir`, `${quoted(journalDir)} must be an absolute path`);
  let cooldownSeconds = 0;
  if (value.cooldown_seconds !== undefined) {
    const c = value.cooldown_seconds;
    if (typeof c !== 'number' || !Number.isInteger(c) || c < 0 || c > 86_400) {
      throw invalid(`${path}.cooldown_seconds`, `must be a whole number of seconds from 0 to 86400, got ${describe(c)}`);
    }
    cooldownSeconds = c;
  }
  const sharedGateway = value.gateway === undefined ? undefined : ipAt(value.gateway, `${path}.gateway`);
  const store = optionalString(value.store, `${path}.store`);
  if (store !== undefined && store !== 'sqlite' && store !== 'etcd') throw invalid(`${path}.store`, `must be "sqlite" or "etcd", got ${describe(store)}`);

  const ranges: RangeSpec[] = [];
  const rangePaths: string[] = [];
  if (value.range === undefined) {
    // Whereabouts silently drops these without a `range`; an exclusion that does nothing is how
    // addresses meant to stay free get handed out, so say so instead.
    for (const key of ['range_start', 'range_end', 'exclude'] as const) {
      if (value[key] !== undefined) throw invalid(`${path}.${key}`, 'needs "range" beside it (it does not apply to ipRanges entries: give each entry its own)');
    }
  } else {
    const raw = { range: value.range, range_start: value.range_start, range_end: value.range_end, exclude: value.exclude, gateway: undefined, block_size: value.block_size };
    ranges.push(parseRange(raw, path, networkName, topL3, sharedGateway));
    rangePaths.push(`${path}.range`);
  }
  if (value.ipRanges !== undefined) {
    if (!Array.isArray(value.ipRanges)) throw invalid(`${path}.ipRanges`, `must be a list of ranges, got ${describe(value.ipRanges)}`);
    value.ipRanges.forEach((item, i) => {
      const at = `${path}.ipRanges[${i}]`;
      if (!isPlainObject(item)) throw invalid(at, `must be an object, got ${describe(item)}`);
      refuseUnknownKeys(item, RANGE_KEYS, at);
      const l3 = topL3 || (optionalBoolean(item.enable_l3, `${at}.enable_l3`) ?? false);
      const raw = { range: item.range, range_start: item.range_start, range_end: item.range_end, exclude: item.exclude, gateway: item.gateway, block_size: item.block_size ?? value.block_size };
      ranges.push(parseRange(raw, at, networkName, l3, sharedGateway));
      rangePaths.push(`${at}.range`);
    });
  }
  if (ranges.length === 0) throw invalid(path, 'needs "range" or a non-empty "ipRanges"');
  refuseOverlaps(ranges, rangePaths, value.enable_overlapping_ranges !== undefined);
  if (sharedGateway !== undefined && !ranges.some((r) => r.family === sharedGateway.family)) {
    throw invalid(`${path}.gateway`, `IPv${sharedGateway.family} gateway ${formatIP(sharedGateway)} but no IPv${sharedGateway.family} range`);
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
  return config;
}

/** How many addresses a range can hand out (before what is allocated). */
export function capacityOf(range: RangeSpec): bigint {
  let excluded = 0n;
  // Exclusions may overlap each other or fall outside the allocatable span; count each address once.
  const clipped = range.excluded
    .map(([a, b]) => [a < range.first ? range.first : a, b > range.last ? range.last : b] as const)
    .filter(([a, b]) => a <= b)
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  let covered = range.first - 1n;
  for (const [a, b] of clipped) {
    const from = a > covered ? a : covered + 1n;
    if (b >= from) excluded += b - from + 1n;
    if (b > covered) covered = b;
  }
  return range.last - range.first + 1n - excluded;
}

/** Whether `ip` lies in the range's subnet (not necessarily in its allocatable span). */
export function inSubnet(range: RangeSpec, ip: IPAddress): boolean {
  if (ip.family !== range.family) return false;
  const shift = BigInt(bitsOf(range.family) - range.prefixLength);
  return ip.value >> shift === range.network >> shift;
}
