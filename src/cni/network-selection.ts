/**
 * The multi-network spec's network selection annotation, `k8s.v1.cni.cncf.io/networks`, as far as
 * an IPAM needs it: which element a CNI ADD is for and the IPAMClaim it names
 * (`ipam-claim-reference`, spec 1.3). Pure: no I/O.
 *
 * Two forms are read, as Multus reads them:
 * - JSON: a list of objects, each with a non-empty string `name` and optional string `namespace`,
 *   `interface` and `ipam-claim-reference` (other keys — ips, mac, cni-args... — are the
 *   runtime's, passed over);
 * - short: comma-separated `[namespace/]name[@interface]`, each part a DNS-1123 label.
 * A value is JSON when it holds `[`, `{` or `"` (Multus' own test).
 *
 * Guarantees:
 * - any input answers a list or throws WarrenError INVALID_CONFIG (CNI code 7) saying what is wrong
 *   and where (element index, field); nothing else is ever thrown, whatever the input;
 * - an element's interface is the one it names, else Multus' default for its position: `net<i+1>`
 *   for the element at index i (eth0 is the cluster network's);
 * - the element an ADD is for is the one whose interface is the ADD's CNI_IFNAME (Multus made the
 *   ADD from it); never one guessed by name, since a claim attached to the wrong interface would
 *   share its address with another pod; two elements on the ADD's interface are refused (Multus
 *   would not have made that ADD: the annotation changed since).
 * - the cluster network's element (`v1.multus-cni.io/default-network`, one element) is on eth0
 *   unless it names an interface.
 */
import { defined } from '../core/defined.ts';
import { WarrenError } from '../core/errors.ts';
import { describe, isPlainObject, quoted } from '../core/validate.ts';

export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';

/** Longest annotation read: the API server caps all of a pod's annotations at 256 KiB together. */
const MAX_ANNOTATION_CHARS = 256 * 1024;

export interface NetworkSelectionElement {
  /** The NetworkAttachmentDefinition's name. */
  readonly name: string;
  /** Its namespace, when the element names one (else the pod's). */
  readonly namespace?: string;
  /** The interface the element asks for, when it names one. */
  readonly interface?: string;
  /** The IPAMClaim (in the pod's namespace) holding this attachment's addresses. */
  readonly ipamClaimReference?: string;
}

/** Multus' check of each part of the short form (a DNS-1123 label). */
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** A Kubernetes object name (DNS-1123 subdomain), as an IPAMClaim's name must be. */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

type Refuse = (message: string) => WarrenError;

const refuserOf =
  (annotation: string): Refuse =>
  (message) =>
    new WarrenError('INVALID_CONFIG', `annotation ${annotation}: ${message}`);

/** The elements the annotation (`annotation` names it, for errors) selects, in order; [] for an empty value. */
export function parseNetworkSelection(value: string, annotation = NETWORKS_ANNOTATION): NetworkSelectionElement[] {
  const refuse = refuserOf(annotation);
  if (value.length > MAX_ANNOTATION_CHARS) throw refuse(`longer than ${MAX_ANNOTATION_CHARS} characters`);
  if (value.trim() === '') return [];
  return /[[{"]/.test(value) ? jsonForm(value, refuse) : shortForm(value, refuse);
}

function jsonForm(value: string, refuse: Refuse): NetworkSelectionElement[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    throw refuse(`not valid JSON (${error instanceof Error ? error.message : 'unreadable'})`);
  }
  if (!Array.isArray(parsed))
    throw refuse(`the JSON form must be a list of network selection elements, got ${describe(parsed)}`);
  return parsed.map((item, index) => jsonElement(item, index, refuse));
}

function jsonElement(item: unknown, index: number, refuse: Refuse): NetworkSelectionElement {
  const at = `element ${index}`;
  if (!isPlainObject(item)) throw refuse(`${at} must be an object, got ${describe(item)}`);
  const text = (key: string): string | undefined => {
    const v = item[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw refuse(`${at}: "${key}" must be a string, got ${describe(v)}`);
    return v;
  };
  const name = text('name');
  if (name === undefined || name === '') throw refuse(`${at} names no network ("name" is missing or empty)`);
  const namespace = text('namespace');
  const iface = text('interface');
  const claim = text('ipam-claim-reference');
  if (claim !== undefined && (claim.length > 253 || !OBJECT_NAME.test(claim)))
    throw refuse(`${at}: "ipam-claim-reference" ${quoted(claim)} is not an object name (DNS-1123 subdomain)`);
  return {
    name,
    ...(namespace === undefined || namespace === '' ? {} : { namespace }),
    ...(iface === undefined || iface === '' ? {} : { interface: iface }),
    ...(claim === undefined || claim === '' ? {} : { ipamClaimReference: claim }),
  };
}

function shortForm(value: string, refuse: Refuse): NetworkSelectionElement[] {
  return value.split(',').map((raw, index) => {
    const item = raw.trim();
    const at = `entry ${index}`;
    if (item === '') throw refuse(`${at} is empty (a stray comma?)`);
    const slashes = item.split('/');
    if (slashes.length > 2) throw refuse(`${at} ${quoted(item)} has more than one "/"`);
    const [namespace, rest] = slashes.length === 2 ? [slashes[0], slashes[1]] : [undefined, slashes[0]];
    const ats = (rest as string).split('@');
    if (ats.length > 2) throw refuse(`${at} ${quoted(item)} has more than one "@"`);
    const [name, iface] = ats as [string, string | undefined];
    if (name === '') throw refuse(`${at} ${quoted(item)} names no network`);
    for (const [what, part] of [
      ['namespace', namespace],
      ['name', name],
      ['interface', iface],
    ] as const) {
      if (part !== undefined && !LABEL.test(part))
        throw refuse(`${at} ${quoted(item)}: the ${what} ${quoted(part)} is not a DNS-1123 label`);
    }
    return {
      name,
      ...defined({ namespace, interface: iface }),
    };
  });
}

/** The interface Multus gives the element at `index`: the one it names, else net<index+1>. */
export function interfaceOf(element: NetworkSelectionElement, index: number): string {
  return element.interface ?? `net${index + 1}`;
}

/**
 * The element of the annotation on `ifname`: the one Multus made that ADD from; undefined when none
 * is. Throws INVALID_CONFIG when two elements are on it.
 */
export function elementOnInterface(
  elements: readonly NetworkSelectionElement[],
  ifname: string,
): NetworkSelectionElement | undefined {
  const onInterface = elements.filter((e, i) => interfaceOf(e, i) === ifname);
  if (onInterface.length > 1)
    throw refuserOf(NETWORKS_ANNOTATION)(`${onInterface.length} elements select interface ${quoted(ifname)}; one may`);
  return onInterface[0];
}

/** The cluster network's selection (Multus' default-network annotation): one element. */
export const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';
/** The interface the cluster network gets. */
export const DEFAULT_INTERFACE = 'eth0';

/** The element of the default-network annotation when it is on `ifname` (eth0 unless it names one). */
export function defaultElementOn(value: string, ifname: string): NetworkSelectionElement | undefined {
  const elements = parseNetworkSelection(value, DEFAULT_NETWORK_ANNOTATION);
  if (elements.length > 1) throw refuserOf(DEFAULT_NETWORK_ANNOTATION)(`selects ${elements.length} networks; one may`);
  const element = elements[0];
  return element !== undefined && (element.interface ?? DEFAULT_INTERFACE) === ifname ? element : undefined;
}
