/**
 * The names and labels of Warren's objects in the Kubernetes API: one place that says how a range,
 * a block, a request, an address space, a node's lease and a chore's lease are named, and how
 * objects are labelled so that listings select them on the server.
 *
 * Guarantees:
 * - every name is a valid RFC 1123 subdomain of at most 253 characters (what the API server demands
 *   of custom resources and Leases), whatever the pool key, node name or task holds;
 * - a name is a function of what it names alone: two claims of one block name one object, so the
 *   API server lets exactly one of them be created (AlreadyExists for the other);
 * - names of different things differ: each ends with a hash (sha256, 16 hex digits) of all of what
 *   it names, so the readable part in front (the CIDR, as `10-0-0-64-26`, the node) can be cut to
 *   fit without two names meeting;
 * - every label value is a valid one (at most 63 characters of `[A-Za-z0-9_.-]`, alphanumeric at
 *   both ends): the text itself when it is one, else a readable cut of it and its hash.
 */
import { createHash } from 'node:crypto';
import { blockCidrOfKey, rangePoolOfKey } from '../../ipam/blocks.ts';

/** The API group of Warren's custom resources, and its version. */
export const GROUP = 'warren.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** The range pool an object belongs to (ranges, blocks, requests). */
export const RANGE_LABEL = 'warren.dev/range';
/** The node an object belongs to (blocks, requests, leases). */
export const NODE_LABEL = 'warren.dev/node';
/** On a block object a handover changed: the resourceVersion of its creation (block-claims.ts). */
export const CREATED_VERSION_ANNOTATION = 'warren.dev/created-version';
/** Set (`true`) on the publication of a borrower's loan ledger, which names no claim (ClusterTier.publishLoan). */
export const LOAN_LABEL = 'warren.dev/loan';
/** Set on a request while it wants addresses (`true`), so open requests are listed by the server. */
export const OPEN_LABEL = 'warren.dev/open';
/** What a Lease of Warren's is for: `node` (an agent's announcement) or `task` (a chore's claim). */
export const LEASE_LABEL = 'warren.dev/lease';
/** The kind of holder of a holding (`statefulset`, `ipamclaim`). */
export const HOLDER_KIND_LABEL = 'warren.dev/holder-kind';
/** The ledger holding a holding's address (its owner's block), so a block's holdings are selected by the server. */
export const BLOCK_LABEL = 'warren.dev/block';
/**
 * On a block of a range whose blocks grow: the largest block holding it (its CIDR as a label value),
 * so the claims that may overlap a block are selected by the server (kubernetes/tier.ts `claim`).
 */
export const ENCLOSING_LABEL = 'warren.dev/enclosing-block';
/** The holder of a holding (its key as a label value), so a holder's records are selected by the server. */
export const HOLDER_LABEL = 'warren.dev/holder';
/** Prefix of the label a holding carries once per node using it: `user.warren.dev/<node>`. */
const USER_LABEL_PREFIX = 'user.warren.dev/';
/** Prefix of the label a request carries once per lender of its grants: `lender.warren.dev/<node>`. */
const LENDER_LABEL_PREFIX = 'lender.warren.dev/';

const MAX_NAME = 253;
const MAX_LABEL_VALUE = 63;
const HASH_DIGITS = 16;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** 16 hex digits of the sha256 of `parts` (joined by NUL, which none of them holds). */
export function hashOf(...parts: readonly string[]): string {
  return createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, HASH_DIGITS);
}

/** `text` as a run of `[a-z0-9-]`, alphanumeric at both ends, at most `max` long ('' when nothing is left). */
function readable(text: string, max: number): string {
  const plain = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, max);
  return plain.replace(/^-+|-+$/g, '');
}

/** `parts` made readable, dot-separated, then the hash of `hashed`: at most 253 characters. */
function nameOf(parts: readonly string[], hashed: readonly string[]): string {
  const hash = hashOf(...hashed);
  // Each readable part gets an equal share of what the hash leaves, so one long part cannot crowd out the others.
  const room = MAX_NAME - HASH_DIGITS - parts.length;
  const share = Math.floor(room / Math.max(1, parts.length));
  const shown = parts.map((p) => readable(p, share)).filter((p) => p !== '');
  return [...shown, hash].join('.');
}

/** The WarrenRange of range pool `pool` (`10.0.0.0/24` or `10.0.0.0/24@net`): `10-0-0-0-24-net.<hash>`. */
export function rangeName(pool: string): string {
  return nameOf([pool], ['range', pool]);
}

/** The WarrenBlock of block key `key` (`<range pool>#<CIDR>`): `10-0-0-64-26.<hash of the key>`. */
export function blockName(key: string): string {
  return nameOf([blockCidrOfKey(key) ?? key], ['block', key]);
}

/** The WarrenAddressRequest of `node` for range pool `pool`: `<node>.<range>.<hash>`. */
export function requestName(pool: string, node: string): string {
  return nameOf([node, pool], ['request', pool, node]);
}

/** The WarrenAddressSpace of address space `space` (`v4@net`). */
export function spaceName(space: string): string {
  return nameOf([space], ['space', space]);
}

/**
 * The WarrenAddressHolding of holder `key` in range pool `pool` (in the holder's namespace):
 * `<kind>.<name>[.<ordinal>].<hash of key and pool>`.
 */
export function holdingName(key: string, pool: string): string {
  return nameOf(
    key.split('/').filter((_, i) => i !== 1),
    ['holding', key, pool],
  );
}

/** The Lease announcing `node`'s agent, in the agent's namespace: `warren-node.<node>.<hash>`. */
export function nodeLeaseName(node: string): string {
  return nameOf(['warren-node', node], ['node', node]);
}

/** The Lease by which one node holds chore `task` (`forget-node/n3`): `warren-task.<task>.<hash>`. */
export function taskLeaseName(task: string): string {
  return nameOf(['warren-task', task], ['task', task]);
}

/** `text` as a label value: itself when it is a valid one, else a readable cut of it and its hash. */
export function labelValue(text: string): string {
  if (text.length <= MAX_LABEL_VALUE && LABEL_VALUE.test(text)) return text;
  const hash = hashOf('label', text);
  const head = text
    .replace(/[^A-Za-z0-9_.-]+/g, '-')
    .slice(0, MAX_LABEL_VALUE - HASH_DIGITS - 1)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return head === '' ? hash : `${head}-${hash}`;
}

/** The label a request carries for each node that lent it an address (its name part is a label value). */
export function lenderLabel(lender: string): string {
  return `${LENDER_LABEL_PREFIX}${labelValue(lender)}`;
}

/** The label a holding carries for each node whose pods use it. */
export function userLabel(node: string): string {
  return `${USER_LABEL_PREFIX}${labelValue(node)}`;
}

/** Whether a label key is a user label (userLabel). */
export function isUserLabel(key: string): boolean {
  return key.startsWith(USER_LABEL_PREFIX);
}

/** Whether a label key is a lender label (lenderLabel). */
export function isLenderLabel(key: string): boolean {
  return key.startsWith(LENDER_LABEL_PREFIX);
}

/** The labels of a block object: its range and its node. */
export function blockLabels(key: string, node: string): Record<string, string> {
  return { [RANGE_LABEL]: labelValue(rangePoolOfKey(key)), [NODE_LABEL]: labelValue(node) };
}

/** A label selector requiring each of `labels` (equality only: `k=v,k2=v2`). */
export function selectorOf(labels: Readonly<Record<string, string>>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/** Whether `name` is a valid RFC 1123 subdomain (what the API server checks of object names). */
export function isSubdomain(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= MAX_NAME &&
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name)
  );
}
