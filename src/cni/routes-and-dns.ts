/**
 * The `routes` and `dns` of a network config's IPAM section (cni/ipam-config.ts): what the plugin
 * hands the runtime beside the addresses, in whereabouts' and the CNI spec's shapes. Read as
 * strictly as the rest of the section: unknown keys refused, every problem an INVALID_CONFIG error
 * starting with the offending key's path; a route's destination is masked like every other CIDR,
 * and its gateway must be of the destination's family.
 */
import { formatIP } from '../ipam/address.ts';
import {
  describe,
  invalid,
  ipAt,
  isPlainObject,
  optionalString,
  refuseUnknownKeys,
  stringListAt,
  subnetAt,
} from './config-values.ts';
import { formatSubnet } from './ipam-range.ts';

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

const ROUTE_KEYS: ReadonlySet<string> = new Set(['dst', 'gw']);
const DNS_KEYS: ReadonlySet<string> = new Set(['nameservers', 'domain', 'search', 'options']);

export function parseRoutes(value: unknown, path: string): Route[] {
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
      if (gw.family !== dst.address.family)
        throw invalid(`${at}.gw`, `IPv${gw.family} gateway for an IPv${dst.address.family} destination`);
      route.gw = formatIP(gw);
    }
    return route;
  });
}

export function parseDns(value: unknown, path: string): Dns | undefined {
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
