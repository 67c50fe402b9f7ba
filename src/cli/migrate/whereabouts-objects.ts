/**
 * Whereabouts' objects as the API server hands them out, read for `warren migrate whereabouts`:
 * `IPPool` and `OverlappingRangeIPReservation` (group whereabouts.cni.cncf.io, version v1alpha1)
 * and the `NetworkAttachmentDefinition`s (k8s.cni.cncf.io/v1) whose network config names
 * whereabouts (or already Warren) as its IPAM. Pure: no I/O.
 *
 * Shapes, as whereabouts defines them (pkg/api/whereabouts.cni.cncf.io/v1alpha1):
 * - IPPool `spec.range` is a CIDR and `spec.allocations` maps an offset (decimal text) to
 *   `{id, podref, ifname?, ipamclaimref?}`; the address is the IP written in `spec.range` (Go's
 *   net.ParseCIDR keeps it, host bits and all) plus the offset, as whereabouts computes it.
 * - OverlappingRangeIPReservation `spec` is `{containerid?, podref, ifname?, ipamclaimref?}`; the
 *   address is in its name (whereabouts-names.ts).
 * Fields Warren does not use are left alone, so a newer whereabouts' additions do not stop a
 * migration.
 *
 * Guarantees: whatever JSON it is given, a reader answers a value or throws an INVALID_CONFIG
 * WarrenError whose message starts with the object (kind and namespace/name, or its place in
 * the listing) and then the path of the offending field; it never throws anything else.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { describe, isPlainObject, quoted } from '../../core/validate.ts';
import { type Cidr, type IPAddress, bitsOf, contains, formatIP, parseCidr } from '../../ipam/address.ts';
import { type IpamConfig, parseIpamConfig } from '../../cni/ipam-config.ts';

/** A pod named by whereabouts' `podref`, `namespace/name`. */
export interface PodRef {
  readonly namespace: string;
  readonly name: string;
}

/** One address an IPPool holds. */
export interface PoolAllocation {
  /** The key in `spec.allocations`, as written. */
  readonly offset: string;
  readonly address: IPAddress;
  /** Whereabouts' `id`: the container (sandbox) ID the runtime gave CNI. */
  readonly containerID: string;
  /** Absent when whereabouts recorded none (an empty or missing `podref`). */
  readonly pod?: PodRef;
  /** Absent in allocations of whereabouts releases that did not record it. */
  readonly ifname?: string;
}

export interface WhereaboutsPool {
  /** `IPPool <namespace>/<name>`, for messages. */
  readonly ref: string;
  readonly namespace: string;
  readonly name: string;
  /** `spec.range` as written. */
  readonly rangeText: string;
  /** `spec.range` parsed: the address written (the offsets' base) and the prefix length. */
  readonly range: Cidr;
  readonly allocations: readonly PoolAllocation[];
}

export interface Reservation {
  readonly ref: string;
  readonly namespace: string;
  /** The object's name: the address, normalized (whereabouts-names.ts). */
  readonly name: string;
  readonly containerID?: string;
  readonly pod?: PodRef;
  readonly ifname?: string;
}

/** A NetworkAttachmentDefinition whose config hands addresses out with whereabouts' keys. */
export interface AttachmentDefinition {
  readonly ref: string;
  readonly namespace: string;
  readonly name: string;
  /** The CNI network name: the config's `name` (Multus gives a config without one the object's name). */
  readonly network: string;
  /** `whereabouts` or `warren`. */
  readonly ipamType: string;
  /** The IPAM section as Warren reads it: its range pool keys are the ones the agent will use. */
  readonly ipam: IpamConfig;
}

/** The IPAM types whose configs carry whereabouts' keys. */
export const MIGRATED_IPAM_TYPES: ReadonlySet<string> = new Set(['whereabouts', 'warren']);

/** Longest offset text read: a /0 of IPv6 has 39 decimal digits. */
const MAX_OFFSET_DIGITS = 40;

function refusal(where: string, path: string, message: string): WarrenError {
  return new WarrenError('INVALID_CONFIG', `${where}: ${path}: ${message}`);
}

/** How messages name an object: `<Kind> <namespace>/<name>`, or its place when it has no name. */
function whereOf(kind: string, object: unknown, index: number): { where: string; namespace: string; name: string } {
  const metadata = isPlainObject(object) ? object.metadata : undefined;
  const name = isPlainObject(metadata) && typeof metadata.name === 'string' ? metadata.name : '';
  const namespace = isPlainObject(metadata) && typeof metadata.namespace === 'string' ? metadata.namespace : '';
  if (name === '') return { where: `${kind} #${index + 1} of the listing (it has no metadata.name)`, namespace, name };
  return { where: `${kind} ${quotedRef(namespace === '' ? name : `${namespace}/${name}`)}`, namespace, name };
}

/** A reference quoted only when it holds what would make a message ambiguous. */
function quotedRef(ref: string): string {
  return /^[\w./:-]{1,300}$/.test(ref) ? ref : quoted(ref);
}

function specOf(object: unknown, where: string): Record<string, unknown> {
  if (!isPlainObject(object)) throw refusal(where, '(object)', `must be an object, got ${describe(object)}`);
  if (!isPlainObject(object.spec)) throw refusal(where, 'spec', `must be an object, got ${describe(object.spec)}`);
  return object.spec;
}

function optionalText(value: unknown, where: string, path: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw refusal(where, path, `must be a string, got ${describe(value)}`);
  return value;
}

/** Whereabouts' `podref`: `namespace/name`; absent when empty or missing. */
export function parsePodRef(value: unknown, where: string, path: string): PodRef | undefined {
  const text = optionalText(value, where, path);
  if (text === undefined) return undefined;
  const slash = text.indexOf('/');
  const namespace = text.slice(0, slash);
  const name = text.slice(slash + 1);
  // A namespace is a DNS label, a pod's name a DNS subdomain; whereabouts writes them as the runtime gave them.
  if (slash <= 0 || !/^[a-z0-9-]{1,63}$/.test(namespace) || !/^[a-z0-9.-]{1,253}$/.test(name))
    throw refusal(where, path, `must be "namespace/name" of a pod, got ${quoted(text)}`);
  return { namespace, name };
}

/** The address `offset` past `base`, as whereabouts' IPAddOffset computes it; undefined past the family's end. */
function addOffset(base: IPAddress, offset: bigint): IPAddress | undefined {
  const value = base.value + offset;
  return value >= 1n << BigInt(bitsOf(base.family)) ? undefined : { family: base.family, value };
}

/** One IPPool; `index` is its place in the listing (for one without a name). */
export function parseIpPool(object: unknown, index = 0): WhereaboutsPool {
  const { where, namespace, name } = whereOf('IPPool', object, index);
  const spec = specOf(object, where);
  if (name === '') throw refusal(where, 'metadata.name', 'missing');
  if (typeof spec.range !== 'string') throw refusal(where, 'spec.range', `must be a CIDR, got ${describe(spec.range)}`);
  const range = parseCidr(spec.range);
  if (range === undefined) throw refusal(where, 'spec.range', `${quoted(spec.range)} is not a CIDR`);
  const subnet = { address: range.address, length: range.length };
  const allocations: PoolAllocation[] = [];
  const raw = spec.allocations;
  if (raw !== undefined && raw !== null) {
    if (!isPlainObject(raw))
      throw refusal(where, 'spec.allocations', `must be an object of offsets, got ${describe(raw)}`);
    for (const [offset, entry] of Object.entries(raw)) {
      const path = `spec.allocations[${quoted(offset)}]`;
      if (!/^[0-9]+$/.test(offset) || offset.length > MAX_OFFSET_DIGITS)
        throw refusal(where, path, 'the key must be an offset into spec.range (a whole number)');
      const address = addOffset(range.address, BigInt(offset));
      const masked = { address: subnetBase(subnet), length: subnet.length };
      if (address === undefined || !contains(masked, address))
        throw refusal(where, path, `offset ${offset} from ${formatIP(range.address)} lies outside ${spec.range}`);
      if (!isPlainObject(entry)) throw refusal(where, path, `must be an object, got ${describe(entry)}`);
      const containerID = optionalText(entry.id, where, `${path}.id`);
      if (containerID === undefined)
        throw refusal(where, `${path}.id`, 'missing: whereabouts records the container ID');
      const pod = parsePodRef(entry.podref, where, `${path}.podref`);
      const ifname = optionalText(entry.ifname, where, `${path}.ifname`);
      allocations.push({
        offset,
        address,
        containerID,
        ...defined({ pod, ifname }),
      });
    }
  }
  return { ref: refOf('IPPool', namespace, name), namespace, name, rangeText: spec.range, range, allocations };
}

function subnetBase(cidr: Cidr): IPAddress {
  const bits = BigInt(bitsOf(cidr.address.family) - cidr.length);
  return { family: cidr.address.family, value: (cidr.address.value >> bits) << bits };
}

function refOf(kind: string, namespace: string, name: string): string {
  return `${kind} ${quotedRef(namespace === '' ? name : `${namespace}/${name}`)}`;
}

/** One OverlappingRangeIPReservation. */
export function parseReservation(object: unknown, index = 0): Reservation {
  const { where, namespace, name } = whereOf('OverlappingRangeIPReservation', object, index);
  const spec = specOf(object, where);
  if (name === '') throw refusal(where, 'metadata.name', 'missing');
  const containerID = optionalText(spec.containerid, where, 'spec.containerid');
  const pod = parsePodRef(spec.podref, where, 'spec.podref');
  const ifname = optionalText(spec.ifname, where, 'spec.ifname');
  return {
    ref: refOf('OverlappingRangeIPReservation', namespace, name),
    namespace,
    name,
    ...defined({ containerID, pod, ifname }),
  };
}

/**
 * One NetworkAttachmentDefinition: its config when it hands addresses out with whereabouts' keys
 * (IPAM type whereabouts or warren), undefined when it is another IPAM's or names a config file on
 * the nodes (no `spec.config`). A config list is searched for the plugin with such an IPAM.
 */
export function parseAttachmentDefinition(object: unknown, index = 0): AttachmentDefinition | undefined {
  const { where, namespace, name } = whereOf('NetworkAttachmentDefinition', object, index);
  if (!isPlainObject(object)) throw refusal(where, '(object)', `must be an object, got ${describe(object)}`);
  if (object.spec === undefined || object.spec === null) return undefined;
  const spec = specOf(object, where);
  if (name === '') throw refusal(where, 'metadata.name', 'missing');
  if (spec.config === undefined || spec.config === null || spec.config === '') return undefined;
  if (typeof spec.config !== 'string')
    throw refusal(where, 'spec.config', `must be a network config as JSON text, got ${describe(spec.config)}`);
  let config: unknown;
  try {
    config = JSON.parse(spec.config);
  } catch (error) {
    throw refusal(where, 'spec.config', `is not JSON: ${messageOf(error)}`);
  }
  if (!isPlainObject(config)) throw refusal(where, 'spec.config', `must be a JSON object, got ${describe(config)}`);
  const plugins = config.plugins;
  let plugin: Record<string, unknown> | undefined;
  let path = 'spec.config';
  if (plugins !== undefined) {
    if (!Array.isArray(plugins))
      throw refusal(where, 'spec.config.plugins', `must be a list of plugins, got ${describe(plugins)}`);
    const at = plugins.findIndex((p) => isPlainObject(p) && isPlainObject(p.ipam) && migrated(p.ipam.type));
    if (at >= 0) {
      plugin = plugins[at] as Record<string, unknown>;
      path = `spec.config.plugins[${at}]`;
    }
  } else if (isPlainObject(config.ipam) && migrated(config.ipam.type)) {
    plugin = config;
  }
  if (plugin === undefined) return undefined;
  const network = optionalText(config.name, where, 'spec.config.name') ?? name;
  let ipam: IpamConfig;
  try {
    ipam = parseIpamConfig(plugin.ipam, `${path}.ipam`);
  } catch (error) {
    // The parser's message starts with the path it was given: the object is all it lacks.
    throw new WarrenError('INVALID_CONFIG', `${where}: ${messageOf(error)}`, { cause: error });
  }
  return {
    ref: refOf('NetworkAttachmentDefinition', namespace, name),
    namespace,
    name,
    network,
    ipamType: ipam.type,
    ipam,
  };
}

function migrated(type: unknown): boolean {
  return typeof type === 'string' && MIGRATED_IPAM_TYPES.has(type);
}
