/**
 * A primary network config's IPAM section in Warren's keys, for the agent's CNI config manager
 * (docs/node-cni-config.md): the primary's chain is kept and its IPAM is taken over by
 * Warren. host-local's keys are translated (the table is docs/ipam-keys.md); whereabouts' keys are
 * Warren's already, so only the type changes and the keys that configure whereabouts itself are
 * dropped; a section that is Warren's stays.
 *
 * Guarantees: the meaning is kept or the section is refused, never guessed. Every refusal is an
 * INVALID_CONFIG error whose message starts with the path of what cannot be translated and says
 * why. host-local's implicit gateway (the subnet's first address when none is written) is made
 * explicit, because the bridge plugin puts that address on the bridge and Warren must never hand
 * it to a container. What is dropped is listed in `notes`, with why.
 */
import { isAbsolute } from 'node:path';
import { type Cidr, bitsOf, contains, formatIP, parseCidr } from '../ipam/address.ts';
import {
  describe,
  invalid,
  ipAt,
  isPlainObject,
  quoted,
  refuseUnknownKeys,
  stringAt,
  subnetAt,
} from './config-values.ts';
import { formatSubnet } from './ipam-range.ts';
import { IGNORED_KEYS } from './whereabouts-keys.ts';

export interface TranslatedIpam {
  /** Warren's IPAM section, `type` "warren"; still to be checked by parseIpamConfig. */
  readonly ipam: Record<string, unknown>;
  /** Keys dropped on the way, each with why. */
  readonly notes: readonly string[];
  /**
   * For host-local: the directory that holds its reservations, before the network's name is
   * joined to it (its `dataDir`, or host-local's default). Warren imports them before serving.
   */
  readonly hostLocalDataDir?: string;
}

/** Where host-local keeps its reservations when the config names no `dataDir`. */
export const HOST_LOCAL_DEFAULT_DATA_DIR = '/var/lib/cni/networks';

const HOST_LOCAL_KEYS: ReadonlySet<string> = new Set([
  'type',
  'subnet',
  'rangeStart',
  'rangeEnd',
  'gateway',
  'ranges',
  'routes',
  'dataDir',
  'resolvConf',
]);
const HOST_LOCAL_RANGE_KEYS: ReadonlySet<string> = new Set(['subnet', 'rangeStart', 'rangeEnd', 'gateway']);

/** The primary's IPAM section `ipam` (found at `path`) as Warren's; throws INVALID_CONFIG when it cannot be. */
export function translateIpam(ipam: unknown, path: string): TranslatedIpam {
  if (!isPlainObject(ipam)) throw invalid(path, `must be an object, got ${describe(ipam)}`);
  const type = stringAt(ipam.type, `${path}.type`);
  switch (type) {
    case 'host-local':
      return fromHostLocal(ipam, path);
    case 'whereabouts':
    case 'warren': {
      const notes: string[] = [];
      // fromEntries, not assignment: a key named "__proto__" stays a key.
      const kept = Object.entries(ipam).filter(([key]) => {
        if (!IGNORED_KEYS.has(key)) return true;
        notes.push(`${path}.${key} dropped: ${IGNORED_KEYS.get(key)?.reason}`);
        return false;
      });
      return { ipam: { ...Object.fromEntries(kept), type: 'warren' }, notes };
    }
    default:
      throw invalid(
        `${path}.type`,
        `IPAM ${quoted(type)} cannot be taken over: Warren translates host-local and whereabouts (name a ` +
          `primary that uses one with --primary-config, or write Warren's IPAM into the primary yourself)`,
      );
  }
}

function fromHostLocal(ipam: Record<string, unknown>, path: string): TranslatedIpam {
  refuseUnknownKeys(ipam, HOST_LOCAL_KEYS, path);
  const notes: string[] = [];
  // Go's decoder leaves a key given as null (or resolvConf as "") unset: host-local ignores it.
  if (ipam.resolvConf !== undefined && ipam.resolvConf !== null && ipam.resolvConf !== '') {
    throw invalid(
      `${path}.resolvConf`,
      'host-local reads DNS servers from this file at every ADD; Warren takes DNS from ipam.dns only, so it ' +
        'cannot stand in for it',
    );
  }
  let dataDir = HOST_LOCAL_DEFAULT_DATA_DIR;
  // Go's decoder leaves "" as unset too: host-local then uses its default.
  if (ipam.dataDir !== undefined && ipam.dataDir !== null) {
    const given = stringAt(ipam.dataDir, `${path}.dataDir`);
    if (given !== '' && !isAbsolute(given))
      throw invalid(
        `${path}.dataDir`,
        `${quoted(given)} is not an absolute path: Warren imports host-local's reservations from it before ` +
          `taking the range over`,
      );
    if (given !== '') dataDir = given;
    notes.push(
      `${path}.dataDir dropped: host-local's own state; Warren keeps addresses in the agent's store ` +
        `(host-local's reservations there are imported first)`,
    );
  }
  const ranges: Record<string, unknown>[] = [];
  if (ipam.subnet !== undefined) {
    // host-local puts the old single range first, before the range sets.
    ranges.push(
      rangeOf(
        { subnet: ipam.subnet, rangeStart: ipam.rangeStart, rangeEnd: ipam.rangeEnd, gateway: ipam.gateway },
        path,
      ),
    );
  } else {
    for (const key of ['rangeStart', 'rangeEnd', 'gateway'] as const) {
      if (ipam[key] !== undefined)
        throw invalid(`${path}.${key}`, 'needs "subnet" beside it (host-local ignores it without one)');
    }
  }
  if (ipam.ranges !== undefined) {
    if (!Array.isArray(ipam.ranges))
      throw invalid(`${path}.ranges`, `must be a list of range sets, got ${describe(ipam.ranges)}`);
    ipam.ranges.forEach((set, i) => {
      const at = `${path}.ranges[${i}]`;
      if (!Array.isArray(set)) throw invalid(at, `must be a range set (a list of ranges), got ${describe(set)}`);
      if (set.length !== 1) {
        throw invalid(
          at,
          set.length === 0
            ? 'is an empty range set'
            : `holds ${set.length} ranges: host-local draws one address from any of them, Warren gives one ` +
                `address per range, so the meaning would change (keep one range per set)`,
        );
      }
      const range = set[0];
      if (!isPlainObject(range)) throw invalid(`${at}[0]`, `must be an object, got ${describe(range)}`);
      refuseUnknownKeys(range, HOST_LOCAL_RANGE_KEYS, `${at}[0]`);
      ranges.push(rangeOf(range, `${at}[0]`));
    });
  }
  if (ranges.length === 0)
    throw invalid(path, 'host-local section has neither "subnet" nor "ranges": there is no address to hand out');
  const out: Record<string, unknown> = { type: 'warren', ipRanges: ranges };
  if (ipam.routes !== undefined) out.routes = ipam.routes;
  return { ipam: out, notes, hostLocalDataDir: dataDir };
}

/** One host-local range in whereabouts' keys, with host-local's default gateway made explicit. */
function rangeOf(range: Record<string, unknown>, path: string): Record<string, unknown> {
  const subnetPath = `${path}.subnet`;
  const written = parseCidr(stringAt(range.subnet, subnetPath));
  const subnet: Cidr = subnetAt(range.subnet, subnetPath, false);
  if (written !== undefined && written.address.value !== subnet.address.value) {
    // host-local starts counting from the address written (or refuses it, by version): either
    // way not what the masked subnet would give, so the meaning cannot be kept.
    throw invalid(
      subnetPath,
      `${quoted(String(range.subnet))} has host bits set; write the network address, ${formatSubnet(subnet)}`,
    );
  }
  const bits = bitsOf(subnet.address.family);
  if (subnet.length > bits - 2)
    throw invalid(
      subnetPath,
      `${formatSubnet(subnet)} is too small: host-local refuses subnets without a network and a gateway address`,
    );
  const inSubnet = (key: 'rangeStart' | 'rangeEnd' | 'gateway'): string | undefined => {
    if (range[key] === undefined || range[key] === null) return undefined;
    const ip = ipAt(range[key], `${path}.${key}`);
    if (!contains(subnet, ip))
      throw invalid(`${path}.${key}`, `${formatIP(ip)} is outside ${formatSubnet(subnet)} (host-local refuses it)`);
    return formatIP(ip);
  };
  const out: Record<string, unknown> = { range: formatSubnet(subnet) };
  const start = inSubnet('rangeStart');
  const end = inSubnet('rangeEnd');
  if (start !== undefined) out.range_start = start;
  if (end !== undefined) out.range_end = end;
  out.gateway = inSubnet('gateway') ?? formatIP({ family: subnet.address.family, value: subnet.address.value + 1n });
  return out;
}
