/**
 * One range of a network config's IPAM section, read with whereabouts' meaning (the masked
 * network, its usable addresses, range_start and range_end, exclusions, the gateway, Warren's
 * block_size), and the rule that no two ranges of one config share an address. A range of a config
 * with `enable_overlapping_ranges: false` (`apart`) gets a pool key of its own address space
 * (ipam/pool-key.ts), as whereabouts keeps such a range out of its cluster-wide reservations.
 *
 * Guarantees: every problem is an INVALID_CONFIG error whose message starts with the path of the
 * offending key; a range that parses has at least one allocatable address and a pool key.
 */
import {
  type Cidr,
  type IPAddress,
  bitsOf,
  contains,
  formatCidr,
  formatIP,
  lastOf,
  networkOf,
  parseCidr,
  parseIP,
} from '../ipam/address.ts';
import { poolKeyOf, subnetsOverlap } from '../ipam/pool-key.ts';
import { DEFAULT_BLOCK_PREFIX, type RangeSpec } from '../ipam/range.ts';
import { describe, invalid, ipAt, quoted, stringAt, subnetAt } from './config-values.ts';

/** A range's keys as written: at the top of the IPAM section or in an ipRanges entry. */
export interface RawRange {
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
export function parseRange(
  raw: RawRange,
  path: string,
  network: { readonly networkName: string; readonly apart: boolean },
  l3: boolean,
  sharedGateway?: IPAddress,
): RangeSpec {
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
    const cidr =
      slash < 0 || startIP === undefined
        ? undefined
        : parseCidr(`${rangeText.slice(0, dash)}${rangeText.slice(slash)}`);
    if (cidr === undefined || startIP === undefined || endIP === undefined || endIP.family !== startIP.family) {
      throw invalid(`${path}.range`, `${quoted(rangeText)} is not a CIDR or a start-end/length range`);
    }
    subnet = { address: { family: cidr.address.family, value: networkOf(cidr) }, length: cidr.length };
    if (raw.range_start !== undefined || raw.range_end !== undefined) {
      throw invalid(`${path}.range`, 'a start-end range cannot be combined with range_start or range_end');
    }
    explicitStart = startIP;
    explicitEnd = endIP;
    if (!contains(subnet, endIP))
      throw invalid(`${path}.range`, `end ${formatIP(endIP)} is outside ${formatSubnet(subnet)}`);
  } else {
    subnet = subnetAt(rangeText, `${path}.range`, false);
  }
  const family = subnet.address.family;
  const subnetText = formatSubnet(subnet);
  if (raw.range_start !== undefined) explicitStart = ipAt(raw.range_start, `${path}.range_start`);
  if (raw.range_end !== undefined) explicitEnd = ipAt(raw.range_end, `${path}.range_end`);
  for (const [key, ip] of [
    ['range_start', explicitStart],
    ['range_end', explicitEnd],
  ] as const) {
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
    throw invalid(
      `${path}.${dash >= 0 ? 'range' : 'range_end'}`,
      `${formatIP(explicitEnd)} comes before range_start ${formatIP(explicitStart)}`,
    );
  }
  if (first > last) throw invalid(`${path}.range`, `${subnetText} has no allocatable addresses`);

  const excluded: Array<[bigint, bigint]> = [];
  if (raw.exclude !== undefined) {
    if (!Array.isArray(raw.exclude))
      throw invalid(`${path}.exclude`, `must be a list of CIDRs, got ${describe(raw.exclude)}`);
    raw.exclude.forEach((item, i) => {
      const cidr = subnetAt(item, `${path}.exclude[${i}]`, true);
      if (cidr.address.family !== family) {
        throw invalid(
          `${path}.exclude[${i}]`,
          `IPv${cidr.address.family} exclusion in IPv${family} range ${subnetText}`,
        );
      }
      excluded.push([networkOf(cidr), lastOf(cidr)]);
    });
  }
  // Whereabouts reports its one gateway with every address and checks nothing about it; Warren
  // reports it with the addresses of its own family, and never hands it out when it is in range.
  let gateway: IPAddress | undefined;
  if (raw.gateway !== undefined) {
    gateway = ipAt(raw.gateway, `${path}.gateway`);
    if (gateway.family !== family)
      throw invalid(`${path}.gateway`, `IPv${gateway.family} gateway for IPv${family} range ${subnetText}`);
  } else if (sharedGateway !== undefined && sharedGateway.family === family) {
    gateway = sharedGateway;
  }
  if (gateway !== undefined && contains(subnet, gateway)) excluded.push([gateway.value, gateway.value]);
  const spec = { family, network: net, prefixLength: subnet.length };
  let blockPrefix = Math.max(DEFAULT_BLOCK_PREFIX[family], subnet.length);
  if (raw.block_size !== undefined) {
    const b = raw.block_size;
    if (typeof b !== 'number' || !Number.isInteger(b) || b < subnet.length || b > bits) {
      throw invalid(
        `${path}.block_size`,
        `must be a prefix length from ${subnet.length} (the range's own) to ${bits}, got ${describe(b)}`,
      );
    }
    blockPrefix = b;
  }
  return {
    ...spec,
    subnet: subnetText,
    first,
    last,
    excluded,
    gateway,
    pool: poolKeyOf(spec, network.networkName, network.apart),
    blockPrefix,
    ...(raw.block_size === undefined ? {} : { blockSizeSet: true as const }),
  };
}

/** A subnet as canonical text: its network address, whatever host bits were written. */
export function formatSubnet(cidr: Cidr): string {
  return formatCidr(cidr.address.family, networkOf(cidr), cidr.length);
}

/**
 * Refuses two ranges that share an address. Within one config they share a network_name, so one
 * address could go to two attachments (and one attachment would hold two addresses of one
 * subnet); whereabouts' `enable_overlapping_ranges` cannot make that safe. Sorting by network
 * finds any overlap in O(n log n): CIDRs nest or are disjoint, so a range overlaps an earlier one
 * exactly when it overlaps the earlier range reaching furthest.
 */
export function refuseOverlaps(
  ranges: readonly RangeSpec[],
  paths: readonly string[],
  overlappingKeyGiven: boolean,
): void {
  const order = ranges.map((_, i) => i);
  const at = (i: number): RangeSpec => ranges[i] as RangeSpec;
  order.sort(
    (i, j) =>
      at(i).family - at(j).family ||
      compareBig(at(i).network, at(j).network) ||
      at(i).prefixLength - at(j).prefixLength ||
      i - j,
  );
  let reach: number | undefined;
  for (const i of order) {
    const range = at(i);
    if (reach !== undefined && subnetsOverlap(at(reach), range)) {
      const [earlier, later] = reach < i ? [reach, i] : [i, reach];
      const a = at(earlier);
      const b = at(later);
      if (a.subnet === b.subnet)
        throw invalid(paths[later] as string, `${b.subnet} is listed twice (also at ${paths[earlier]})`);
      const note = overlappingKeyGiven ? ', whatever enable_overlapping_ranges says' : '';
      throw invalid(
        paths[later] as string,
        `${b.subnet} overlaps ${a.subnet} at ${paths[earlier]}: ranges of one network must not share addresses${note}`,
      );
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
