/**
 * The IPAM section of a CNI network config. Accepts the keys whereabouts users already write
 * (`range`, `range_start`, `range_end`, `exclude`, `gateway`, `routes`, `dns`, `ipRanges`,
 * `network_name`, ...) plus Warren's own. Every problem is an INVALID_CONFIG error whose message
 * starts with the path of the offending key, and unknown keys are refused rather than ignored.
 */
import { WarrenError } from '../core/errors.ts';
import {
  type Cidr,
  type Family,
  type IPAddress,
  contains,
  formatCidr,
  formatIP,
  isNetwork,
  lastOf,
  networkOf,
  parseCidr,
  parseIP,
} from './address.ts';

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
  /** The network the range lives in, canonical (`10.0.0.0/24`). */
  readonly subnet: string;
  /** The subnet's network address. */
  readonly network: bigint;
  readonly prefixLength: number;
  /** First and last allocatable address, after range_start/range_end, network and broadcast. */
  readonly first: bigint;
  readonly last: bigint;
  /** Excluded CIDRs as inclusive [from, to] intervals, plus the gateway. */
  readonly excluded: ReadonlyArray<readonly [bigint, bigint]>;
  readonly gateway?: IPAddress;
  /** Identity of the pool: ranges with one subnet and network_name share addresses. */
  readonly pool: string;
  /**
   * Prefix length of the blocks the range is split into when nodes share it (cluster store);
   * `block_size`, or the family's default, never shorter than the range's own prefix.
   */
  readonly blockPrefix: number;
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
}

const TOP_KEYS = new Set([
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
  // Whereabouts keys Warren accepts so configs move over unchanged; they do not change Warren's
  // behaviour (Warren never allows overlapping pools to hand out one address twice, and logs
  // through the agent).
  'enable_overlapping_ranges',
  'log_file',
  'log_level',
  // Warren's own.
  'socket',
  'journal_dir',
  'cooldown_seconds',
  'block_size',
  'store',
]);
const RANGE_KEYS = new Set(['range', 'range_start', 'range_end', 'exclude', 'gateway', 'block_size']);

/** Default block prefix lengths in cluster mode: 64 addresses per block in either family. */
export const DEFAULT_BLOCK_PREFIX = { 4: 26, 6: 122 } as const;

export type StoreKind = 'sqlite' | 'etcd';
const ROUTE_KEYS = new Set(['dst', 'gw']);
const DNS_KEYS = new Set(['nameservers', 'domain', 'search', 'options']);

function invalid(path: string, message: string): WarrenError {
  return new WarrenError('INVALID_CONFIG', `${path}: ${message}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function refuseUnknownKeys(object: Record<string, unknown>, allowed: Set<string>, path: string): void {
  for (const key of Object.keys(object)) {
    if (!allowed.has(key)) throw invalid(`${path}.${key}`, 'unknown key');
  }
}

function stringAt(value: unknown, path: string): string {
  if (typeof value !== 'string') throw invalid(path, `must be a string, got ${describe(value)}`);
  return value;
}

function optionalString(value: unknown, path: string): string | undefined {
  return value === undefined ? undefined : stringAt(value, path);
}

function stringListAt(value: unknown, path: string): string[] {
  if (!Array.isArray(value)) throw invalid(path, `must be a list of strings, got ${describe(value)}`);
  return value.map((item, i) => stringAt(item, `${path}[${i}]`));
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `"${value.length > 60 ? `${value.slice(0, 60)}...` : value}"`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function ipAt(value: unknown, path: string): IPAddress {
  const text = stringAt(value, path);
  const ip = parseIP(text);
  if (ip === undefined) throw invalid(path, `"${text}" is not an IP address`);
  return ip;
}

function networkCidrAt(value: unknown, path: string, allowBareAddress: boolean): Cidr {
  const text = stringAt(value, path);
  if (allowBareAddress && !text.includes('/')) {
    const ip = parseIP(text);
    if (ip !== undefined) return { address: ip, length: ip.family === 4 ? 32 : 128 };
  }
  const cidr = parseCidr(text);
  if (cidr === undefined) throw invalid(path, `"${text}" is not a CIDR`);
  if (!isNetwork(cidr)) {
    const net = formatCidr(cidr.address.family, networkOf(cidr), cidr.length);
    throw invalid(path, `"${text}" is not a network (host bits are set; did you mean ${net}?)`);
  }
  return cidr;
}

interface RawRange {
  range: unknown;
  range_start: unknown;
  range_end: unknown;
  exclude: unknown;
  gateway: unknown;
  block_size: unknown;
}

function parseRange(raw: RawRange, path: string, networkName: string, sharedGateway?: IPAddress): RangeSpec {
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
      throw invalid(`${path}.range`, `"${rangeText}" is not a CIDR or a start-end/length range`);
    }
    subnet = { address: { family: cidr.address.family, value: networkOf(cidr) }, length: cidr.length };
    if (raw.range_start !== undefined || raw.range_end !== undefined) {
      throw invalid(`${path}.range`, 'a start-end range cannot be combined with range_start or range_end');
    }
    explicitStart = startIP;
    explicitEnd = endIP;
    if (!contains(subnet, endIP)) throw invalid(`${path}.range`, `end ${formatIP(endIP)} is outside ${formatSubnet(subnet)}`);
  } else {
    subnet = networkCidrAt(rangeText, `${path}.range`, false);
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
  const bits = family === 4 ? 32 : 128;
  // The network address (and IPv4 broadcast) are not handed out, except in point-to-point prefixes.
  const tiny = subnet.length >= bits - 1;
  const firstHost = tiny ? net : net + 1n;
  const lastHost = tiny || family === 6 ? broadcast : broadcast - 1n;
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
      const cidr = networkCidrAt(item, `${path}.exclude[${i}]`, true);
      if (cidr.address.family !== family) {
        throw invalid(`${path}.exclude[${i}]`, `IPv${cidr.address.family} exclusion in IPv${family} range ${subnetText}`);
      }
      excluded.push([networkOf(cidr), lastOf(cidr)]);
    });
  }
  let gateway: IPAddress | undefined;
  if (raw.gateway !== undefined) {
    gateway = ipAt(raw.gateway, `${path}.gateway`);
    if (!contains(subnet, gateway)) throw invalid(`${path}.gateway`, `${formatIP(gateway)} is outside range ${subnetText}`);
  } else if (sharedGateway !== undefined && contains(subnet, sharedGateway)) {
    gateway = sharedGateway;
  }
  if (gateway !== undefined) excluded.push([gateway.value, gateway.value]);
  const pool = networkName === '' ? subnetText : `${subnetText}@${networkName}`;
  let blockPrefix = Math.max(DEFAULT_BLOCK_PREFIX[family], subnet.length);
  if (raw.block_size !== undefined) {
    const b = raw.block_size;
    if (typeof b !== 'number' || !Number.isInteger(b) || b < subnet.length || b > bits) {
      throw invalid(`${path}.block_size`, `must be a prefix length from ${subnet.length} (the range's own) to ${bits}, got ${describe(b)}`);
    }
    blockPrefix = b;
  }
  return { family, subnet: subnetText, network: net, prefixLength: subnet.length, first, last, excluded, gateway, pool, blockPrefix };
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
    const dst = parseCidr(stringAt(item.dst, `${at}.dst`));
    if (dst === undefined || !isNetwork(dst)) throw invalid(`${at}.dst`, `"${String(item.dst)}" is not a network CIDR`);
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
 * Validates the `ipam` object of a network config. `path` prefixes messages (default `ipam`).
 * Throws INVALID_CONFIG naming the first problem found.
 */
export function parseIpamConfig(value: unknown, path = 'ipam'): IpamConfig {
  if (!isPlainObject(value)) throw invalid(path, `must be an object, got ${describe(value)}`);
  refuseUnknownKeys(value, TOP_KEYS, path);
  const type = stringAt(value.type, `${path}.type`);
  const networkName = optionalString(value.network_name, `${path}.network_name`) ?? '';
  if (networkName.length > 253 || /[\s/@]/.test(networkName)) {
    throw invalid(`${path}.network_name`, 'must be at most 253 characters without spaces, "/" or "@"');
  }
  for (const key of ['enable_overlapping_ranges'] as const) {
    if (value[key] !== undefined && typeof value[key] !== 'boolean') throw invalid(`${path}.${key}`, `must be a boolean, got ${describe(value[key])}`);
  }
  optionalString(value.log_file, `${path}.log_file`);
  optionalString(value.log_level, `${path}.log_level`);
  const socket = optionalString(value.socket, `${path}.socket`);
  if (socket !== undefined && !socket.startsWith('/')) throw invalid(`${path}.socket`, `"${socket}" must be an absolute path`);
  const journalDir = optionalString(value.journal_dir, `${path}.journal_dir`);
  if (journalDir !== undefined && !journalDir.startsWith('/')) throw invalid(`${path}.journal_dir`, `"${journalDir}" must be an absolute path`);
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
  const hasTopRange = value.range !== undefined;
  if (!hasTopRange) {
    for (const key of ['range_start', 'range_end', 'exclude'] as const) {
      if (value[key] !== undefined) throw invalid(`${path}.${key}`, 'needs "range" beside it');
    }
  } else {
    ranges.push(
      parseRange(
        { range: value.range, range_start: value.range_start, range_end: value.range_end, exclude: value.exclude, gateway: undefined, block_size: value.block_size },
        path,
        networkName,
        sharedGateway,
      ),
    );
  }
  if (value.ipRanges !== undefined) {
    if (!Array.isArray(value.ipRanges)) throw invalid(`${path}.ipRanges`, `must be a list of ranges, got ${describe(value.ipRanges)}`);
    value.ipRanges.forEach((item, i) => {
      const at = `${path}.ipRanges[${i}]`;
      if (!isPlainObject(item)) throw invalid(at, `must be an object, got ${describe(item)}`);
      refuseUnknownKeys(item, RANGE_KEYS, at);
      ranges.push(
        parseRange(
          { range: item.range, range_start: item.range_start, range_end: item.range_end, exclude: item.exclude, gateway: item.gateway, block_size: item.block_size ?? value.block_size },
          at,
          networkName,
          sharedGateway,
        ),
      );
    });
  }
  if (ranges.length === 0) throw invalid(path, 'needs "range" or a non-empty "ipRanges"');
  const seen = new Set<string>();
  for (const range of ranges) {
    if (seen.has(range.pool)) throw invalid(path, `range ${range.subnet} is listed twice`);
    seen.add(range.pool);
  }
  if (sharedGateway !== undefined && !ranges.some((r) => inSubnet(r, sharedGateway))) {
    throw invalid(`${path}.gateway`, `${formatIP(sharedGateway)} is not inside any range`);
  }
  const config: { -readonly [K in keyof IpamConfig]: IpamConfig[K] } = {
    type,
    ranges,
    routes: parseRoutes(value.routes, `${path}.routes`),
    networkName,
    cooldownSeconds,
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
  const shift = BigInt((range.family === 4 ? 32 : 128) - range.prefixLength);
  return ip.value >> shift === range.network >> shift;
}
