/**
 * Warren's custom resources as JSON on the wire (deploy/crds/), and the tier's values made from
 * them and into them: ranges, block claims, blocks' published allocations (one WarrenBlockPublication
 * object per published block, apart from its claim, so a listing of claims never carries
 * allocations), address requests with their grants, address spaces. Pure: no I/O.
 *
 * Guarantees:
 * - what is read is checked: an object whose spec lacks what Warren writes (made by hand, or by a
 *   newer version) reads as undefined, never as a half-made value;
 * - `publicationObject` keeps a publication within the API server's object size limit (etcd's
 *   1.5 MiB per write, deploy/crds' 4096 items): when the allocations do not fit whole, the network
 *   namespace paths are left out first, then the allocations past what fits; the counts always
 *   say what the block holds, so a reader sees that `allocations` is short (`truncated`);
 * - what the schema does not keep is not sent: an allocation's monotonic stamp (`createdStamp`)
 *   and its pool and node (the block's key and node say those) are left out, and read back from
 *   the block; a grant's holder reads back with the request's range and node as its pool and node.
 */
import { defined } from '../../core/defined.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockCidrOfKey, blockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isPlainObject as isRecord } from '../../core/validate.ts';
import { successionOf } from '../succession.ts';
import type { AddressRequest, BlockClaim, Grant, PublishedBlock, RangeRecord } from '../tiered/cluster-tier.ts';
import {
  API_VERSION,
  ENCLOSING_LABEL,
  LOAN_LABEL,
  OPEN_LABEL,
  RANGE_LABEL,
  NODE_LABEL,
  labelValue,
  lenderLabel,
} from './names.ts';

/** Bytes a publication's allocations may take: etcd takes 1,572,864 per write; room is left for the rest. */
export const PUBLICATION_BUDGET_BYTES = 1_400_000;
/** The CRDs' `maxItems` of published allocations and of grants. */
export const MAX_ITEMS = 4096;

export interface ObjectMeta {
  readonly name: string;
  /** For namespaced kinds (WarrenAddressHolding): the object's namespace. */
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: ObjectMeta;
  readonly spec?: unknown;
  readonly status?: unknown;
}

const str = (v: unknown): v is string => typeof v === 'string';
const int = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** The metadata of a JSON object from the API, or undefined when it has no name. */
export function metaOf(object: unknown): (ObjectMeta & { uid: string; resourceVersion: string }) | undefined {
  if (!isRecord(object) || !isRecord(object.metadata)) return undefined;
  const m = object.metadata;
  if (!str(m.name) || !str(m.uid) || !str(m.resourceVersion)) return undefined;
  return {
    name: m.name,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    ...(isRecord(m.labels) ? { labels: m.labels as Record<string, string> } : {}),
    ...(isRecord(m.annotations) ? { annotations: m.annotations as Record<string, string> } : {}),
  };
}

export function specOf(object: unknown): Record<string, unknown> | undefined {
  return isRecord(object) && isRecord(object.spec) ? object.spec : undefined;
}

// --- ranges ---

export function rangeObject(name: string, r: RangeRecord): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenRange',
    metadata: { name, labels: { [RANGE_LABEL]: labelValue(r.pool) } },
    spec: {
      pool: r.pool,
      space: r.space,
      subnet: r.subnet,
      first: r.first,
      last: r.last,
      blockPrefix: r.blockPrefix,
      ...defined({ largestBlockPrefix: r.largestBlockPrefix }),
    },
  };
}

export function rangeOf(object: unknown): RangeRecord | undefined {
  const s = specOf(object);
  if (s === undefined || !str(s.pool) || !str(s.space) || !str(s.subnet) || !str(s.first) || !str(s.last)) return;
  if (!int(s.blockPrefix)) return undefined;
  const { pool, space, subnet, first, last, blockPrefix } = s;
  const largest = int(s.largestBlockPrefix) ? { largestBlockPrefix: s.largestBlockPrefix } : {};
  return { pool, space, subnet, first, last, blockPrefix, ...largest };
}

// --- blocks ---

/**
 * A block's claim object. In a range whose blocks grow, `enclosing` is the largest block holding it
 * (ipam/blocks.ts enclosingBlockKey), labelled so that the claims that may overlap it are one
 * listing by label away (kubernetes/tier.ts `claim`).
 */
export function blockObject(name: string, key: string, node: string, enclosing?: string): KubeObject {
  const labels = { [RANGE_LABEL]: labelValue(rangePoolOfKey(key)), [NODE_LABEL]: labelValue(node) };
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenBlock',
    metadata: {
      name,
      labels:
        enclosing === undefined
          ? labels
          : { ...labels, [ENCLOSING_LABEL]: labelValue(blockCidrOfKey(enclosing) ?? '') },
    },
    spec: { pool: rangePoolOfKey(key), cidr: blockCidrOfKey(key) ?? '', node },
  };
}

/** The block key and node a block object names, or undefined for one Warren did not write. */
function blockSpecOf(object: unknown): Omit<BlockClaim, 'uid' | 'version'> | undefined {
  const s = specOf(object);
  if (s === undefined || !str(s.pool) || !str(s.cidr) || !str(s.node) || s.cidr === '') return undefined;
  const [offeredTo, takenFrom] = [s.offeredTo, s.takenFrom].map((v) => (str(v) ? v : undefined));
  return { key: blockKey(s.pool, s.cidr), node: s.node, ...defined({ offeredTo, takenFrom }) };
}

export function claimOfObject(object: unknown): BlockClaim | undefined {
  const meta = metaOf(object);
  const spec = blockSpecOf(object);
  if (meta === undefined || spec === undefined) return undefined;
  return { ...spec, uid: meta.uid, version: meta.resourceVersion };
}

const ALLOCATION_TEXT = ['podNamespace', 'podName', 'podUID', 'netns'] as const;

function allocationEntry(a: Allocation, withNetns: boolean): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    address: a.address,
    network: a.network,
    containerID: a.containerID,
    ifname: a.ifname,
  };
  for (const k of ALLOCATION_TEXT) if (a[k] !== undefined && (k !== 'netns' || withNetns)) entry[k] = a[k];
  entry.createdAt = Math.max(0, Math.floor(a.createdAt));
  return entry;
}

/** A publication's allocations, within the size budget (see the header). */
function publishedEntries(block: PublishedBlock): { entries: Record<string, unknown>[]; truncated: boolean } {
  const sorted = [...block.allocations].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  for (const withNetns of [true, false]) {
    const entries = sorted.slice(0, MAX_ITEMS).map((a) => allocationEntry(a, withNetns));
    const size = JSON.stringify(entries).length;
    if (size <= PUBLICATION_BUDGET_BYTES && entries.length === sorted.length) return { entries, truncated: false };
  }
  const kept: Record<string, unknown>[] = [];
  let size = 2;
  for (const a of sorted.slice(0, MAX_ITEMS)) {
    const entry = allocationEntry(a, false);
    size += JSON.stringify(entry).length + 1;
    if (size > PUBLICATION_BUDGET_BYTES) break;
    kept.push(entry);
  }
  return { entries: kept, truncated: true };
}

/**
 * The WarrenBlockPublication object publishing `block` (named as its block object, with its labels);
 * with `version` (and `uid`), the body of an update guarded by them. `truncated`: see the header.
 */
export function publicationObject(
  name: string,
  block: PublishedBlock,
  version?: { uid: string; resourceVersion: string },
): { object: KubeObject; truncated: boolean } {
  const { entries, truncated } = publishedEntries(block);
  const pool = rangePoolOfKey(block.key);
  const object: KubeObject = {
    apiVersion: API_VERSION,
    kind: 'WarrenBlockPublication',
    metadata: {
      name,
      labels: {
        [RANGE_LABEL]: labelValue(pool),
        [NODE_LABEL]: labelValue(block.node),
        ...(block.loan === true ? { [LOAN_LABEL]: 'true' } : {}),
      },
      ...(version === undefined ? {} : version),
    },
    spec: {
      pool,
      cidr: blockCidrOfKey(block.key) ?? '',
      node: block.node,
      allocated: block.counts.allocated,
      resting: block.counts.resting,
      publishedAt: Math.max(0, Math.floor(block.publishedAt)),
      ...defined({ revision: block.revision, lineage: block.lineage, succession: block.succession }),
      ...(block.ahead === undefined || block.ahead.length === 0 ? {} : { ahead: [...block.ahead] }),
      allocations: entries,
    },
  };
  return { object, truncated };
}

function allocationOf(entry: unknown, pool: string, node: string): Allocation | undefined {
  if (!isRecord(entry) || !str(entry.address) || !str(entry.network) || !str(entry.containerID)) return undefined;
  if (!str(entry.ifname)) return undefined;
  const extra: Record<string, string> = {};
  for (const k of ALLOCATION_TEXT) if (str(entry[k])) extra[k] = entry[k];
  return {
    pool,
    address: entry.address,
    network: entry.network,
    containerID: entry.containerID,
    ifname: entry.ifname,
    node,
    createdAt: int(entry.createdAt) ? entry.createdAt : 0,
    ...extra,
  };
}

/** A publication's block and allocations; undefined for an object Warren did not write. */
export function publishedOf(object: unknown): PublishedBlock | undefined {
  const spec = blockSpecOf(object);
  const s = specOf(object);
  if (spec === undefined || s === undefined || !int(s.publishedAt)) return undefined;
  const allocations = (Array.isArray(s.allocations) ? s.allocations : [])
    .map((e) => allocationOf(e, spec.key, spec.node))
    .filter((a) => a !== undefined);
  return {
    key: spec.key,
    node: spec.node,
    counts: { allocated: int(s.allocated) ? s.allocated : 0, resting: int(s.resting) ? s.resting : 0 },
    allocations,
    publishedAt: s.publishedAt,
    ...(int(s.revision) ? { revision: s.revision } : {}),
    ...(str(s.lineage) ? { lineage: s.lineage } : {}),
    ...defined({ succession: successionOf(s.succession) }),
    ...aheadOf(s.ahead),
    ...(loanLabelled(object) ? { loan: true as const } : {}),
  };
}

/** A publication's `ahead` addresses (strings only), or nothing when it lists none. */
function aheadOf(ahead: unknown): { ahead?: string[] } {
  const addresses = Array.isArray(ahead) ? ahead.filter(str) : [];
  return addresses.length === 0 ? {} : { ahead: addresses };
}

function loanLabelled(object: unknown): boolean {
  const metadata = isRecord(object) && isRecord(object.metadata) ? object.metadata : undefined;
  return metadata !== undefined && isRecord(metadata.labels) && metadata.labels[LOAN_LABEL] === 'true';
}

// --- address requests ---

function grantEntry(g: Grant): Record<string, unknown> {
  const h = g.holder;
  return {
    address: g.address,
    lender: g.lender,
    ...defined({ block: g.block }),
    ...(g.returned === true ? { returned: true } : {}),
    ...(g.offered === true ? { offered: true } : {}),
    ...(h === undefined
      ? {}
      : {
          holder: Object.fromEntries(Object.entries(allocationEntry(h, false)).filter(([k]) => k !== 'address')),
        }),
  };
}

/** The labels of a request: its range, its node, whether it is open, and each of its lenders. */
export function requestLabels(pool: string, node: string, wanted: number, grants: readonly Grant[]) {
  const labels: Record<string, string> = { [RANGE_LABEL]: labelValue(pool), [NODE_LABEL]: labelValue(node) };
  if (wanted > 0) labels[OPEN_LABEL] = 'true';
  for (const g of grants) labels[lenderLabel(g.lender)] = 'true';
  return labels;
}

/** A request object; with `resourceVersion` (and `uid`), the body of an update. */
export function requestObject(
  name: string,
  r: { pool: string; node: string; wanted: number; grants: readonly Grant[] },
  version?: string,
): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenAddressRequest',
    metadata: {
      name,
      labels: requestLabels(r.pool, r.node, r.wanted, r.grants),
      ...defined({ resourceVersion: version }),
    },
    spec: { pool: r.pool, node: r.node, wanted: Math.max(0, Math.floor(r.wanted)), grants: r.grants.map(grantEntry) },
  };
}

function grantOf(entry: unknown, pool: string, node: string): Grant | undefined {
  if (!isRecord(entry) || !str(entry.address) || !str(entry.lender)) return undefined;
  const holder = isRecord(entry.holder)
    ? allocationOf({ ...entry.holder, address: entry.address }, pool, node)
    : undefined;
  return {
    address: entry.address,
    lender: entry.lender,
    ...(str(entry.block) ? { block: entry.block } : {}),
    ...(entry.returned === true ? { returned: true as const } : {}),
    ...(entry.offered === true ? { offered: true as const } : {}),
    ...defined({ holder }),
  };
}

export function requestOf(object: unknown): AddressRequest | undefined {
  const meta = metaOf(object);
  const s = specOf(object);
  if (meta === undefined || s === undefined || !str(s.pool) || !str(s.node) || !int(s.wanted)) return undefined;
  const { pool, node } = s;
  const grants = (Array.isArray(s.grants) ? s.grants : []).map((e) => grantOf(e, pool, node)).filter((g) => !!g);
  return { pool, node, wanted: s.wanted, grants, version: meta.resourceVersion };
}

// --- address spaces ---

export function spaceObject(name: string, space: string, admitted: readonly string[], version?: string): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenAddressSpace',
    metadata: { name, ...defined({ resourceVersion: version }) },
    spec: { space, admitted: [...admitted] },
  };
}

export function admittedOf(object: unknown): string[] | undefined {
  const s = specOf(object);
  if (s === undefined || !str(s.space)) return undefined;
  return (Array.isArray(s.admitted) ? s.admitted : []).filter(str);
}
