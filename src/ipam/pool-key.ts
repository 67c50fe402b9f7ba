/**
 * Pool keys: the one place that says how a range's pool is named in a store. A pool key is the
 * range's canonical subnet, `10.0.0.0/24`, or `<subnet>@<network_name>` when the config names its
 * network; a range kept apart from the other ranges of its network (`enable_overlapping_ranges:
 * false`, whereabouts' meaning) is `<subnet>@@<network_name>` (`<subnet>@@` without a name), an
 * address space of its own; the keys of its parts append `#<part>` to it (store-key.ts). Because
 * `@` and `#` separate the parts, and `/` and whitespace appear in or around them, a network name
 * may contain none of them (nor control characters): `networkNameProblem` says why a name cannot
 * be encoded, and configs are refused with that reason. Pure: no I/O.
 *
 * Guarantees: `parsePoolKey(poolKeyOf(s, n, i))` gives back `s`, `n` and `i` for every subnet and
 * every name `networkNameProblem` accepts; a key that is not exactly a range pool key (a block key, a
 * subnet with host bits, an empty name after `@`) parses to undefined rather than to a guess.
 */
import { type Family, bitsOf, formatCidr, hostMask, isNetwork, parseCidr } from './address.ts';
import { KEY_SEPARATOR, partOf } from './store-key.ts';

/** A subnet as numbers: `RangeSpec` is one. */
export interface Subnet {
  readonly family: Family;
  /** The network address (no host bits). */
  readonly network: bigint;
  readonly prefixLength: number;
}

/** What a range pool key names: a subnet, and the network_name (`''` when none). */
export interface PoolKey extends Subnet {
  readonly networkName: string;
  /** Kept apart from the network's other ranges (`enable_overlapping_ranges: false`). */
  readonly isolated?: true;
}

/** Longest network_name accepted (a DNS name's length, so names taken from elsewhere fit). */
export const MAX_NETWORK_NAME_LENGTH = 253;

const NAME_SEPARATOR = '@';
/** Between a range pool key and a block CIDR; the store key's codec is store-key.ts. */
export const BLOCK_SEPARATOR = KEY_SEPARATOR;
/** Characters a network name may not contain: the key separators, `/`, whitespace, controls. */
const RESERVED_IN_NAME = /[#@/\s\p{Cc}]/u;

/**
 * Why `name` cannot be a network_name, or undefined when it can. The empty name is allowed: it
 * means "no name" and gives the bare-subnet key.
 */
export function networkNameProblem(name: string): string | undefined {
  if (name.length > MAX_NETWORK_NAME_LENGTH)
    return `must be at most ${MAX_NETWORK_NAME_LENGTH} characters, got ${name.length}`;
  const bad = RESERVED_IN_NAME.exec(name);
  if (bad !== null) {
    const shown = JSON.stringify(bad[0]);
    return (
      `must not contain ${shown} (found at character ${bad.index + 1}): "#", "@", "/", whitespace and ` +
      `control characters separate the parts of Warren's pool and block keys`
    );
  }
  return undefined;
}

/**
 * The pool key of a subnet in a network, `isolated` when the range is kept apart from the network's
 * other ranges. `networkName` must pass `networkNameProblem`.
 */
export function poolKeyOf(subnet: Subnet, networkName: string, isolated = false): string {
  const cidr = formatCidr(subnet.family, subnet.network, subnet.prefixLength);
  if (isolated) return `${cidr}${NAME_SEPARATOR}${NAME_SEPARATOR}${networkName}`;
  return networkName === '' ? cidr : `${cidr}${NAME_SEPARATOR}${networkName}`;
}

/**
 * The subnet and network name of a range pool key (`RangeSpec.pool`), or undefined when `key` is
 * not one. Block keys (`<pool>#<cidr>`) are not range pool keys: cut them at the first `#` first.
 */
export function parsePoolKey(key: string): PoolKey | undefined {
  if (typeof key !== 'string' || partOf(key) !== undefined) return undefined;
  const at = key.indexOf(NAME_SEPARATOR);
  const cidr = parseCidr(at < 0 ? key : key.slice(0, at));
  if (cidr === undefined || !isNetwork(cidr)) return undefined;
  const isolated = at >= 0 && key[at + 1] === NAME_SEPARATOR;
  const networkName = at < 0 ? '' : key.slice(at + (isolated ? 2 : 1));
  if (at >= 0 && !isolated && networkName === '') return undefined;
  if (networkNameProblem(networkName) !== undefined) return undefined;
  const subnet = { family: cidr.address.family, network: cidr.address.value, prefixLength: cidr.length };
  return isolated ? { ...subnet, networkName, isolated: true } : { ...subnet, networkName };
}

/** Whether two subnets share at least one address. CIDRs either nest or are disjoint. */
export function subnetsOverlap(a: Subnet, b: Subnet): boolean {
  if (a.family !== b.family) return false;
  const shorter = Math.min(a.prefixLength, b.prefixLength);
  const mask = ~hostMask(a.family, shorter) & ((1n << BigInt(bitsOf(a.family))) - 1n);
  return (a.network & mask) === (b.network & mask);
}

/**
 * Whether two pools can hand out the same address: the same network_name and overlapping
 * subnets, neither kept apart. Pools of different network names are separate address spaces by
 * design, and so is a pool kept apart (`isolated`: two such pools of one subnet are one pool).
 */
export function poolsOverlap(a: PoolKey, b: PoolKey): boolean {
  return a.networkName === b.networkName && a.isolated !== true && b.isolated !== true && subnetsOverlap(a, b);
}

/** Whether `inner` lies wholly inside `outer` (both of one family). */
export function subnetWithin(inner: Subnet, outer: Subnet): boolean {
  return inner.prefixLength >= outer.prefixLength && subnetsOverlap(inner, outer);
}
