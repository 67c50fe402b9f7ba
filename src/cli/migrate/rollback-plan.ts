/**
 * Planning `warren migrate to-whereabouts` (pure, no I/O): which whereabouts objects Warren's
 * networks map to, and what each object becomes once Warren's holders are merged into it.
 *
 * - The networks: the NetworkAttachmentDefinitions whose IPAM type is `warren` (read as the forward
 *   migration reads them, whereabouts-objects.ts), or those `--network`/`--nad` names, whether
 *   `warren` or already switched back to `whereabouts` (a run after the switch catches what Warren
 *   handed out just before it).
 *   Each range is one IPPool, named as whereabouts names it (whereabouts-names.ts) after the range's
 *   subnet and the config's `network_name`; its `spec.range` is the subnet, so an allocation's key
 *   is its offset from the network address, as whereabouts computes it.
 * - The merge, per object: an address the object does not hold is added; one it holds for the same
 *   container (and pod) is left as it is (`present`: running twice writes nothing twice); one it
 *   holds for another container is a conflict, left as it is, unless `replaceable` judged that
 *   record's pod gone (whereabouts' own leftover, which its reconciler would remove: the same
 *   judgement the forward migration makes of a pod gone, finished, or not listing the address).
 *   Fields and records Warren does not write are kept as they are.
 *
 * Guarantees: a merge never drops or changes a record of another container unless `replaceable`
 * said so for that very record; `metadata.resourceVersion` is carried from the object read, so the
 * write (kube-writes.ts) happens only if nothing changed since.
 */
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { type IPAddress, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { Problem } from './holdings.ts';
import type { KubeObjectJson } from './kube-writes.ts';
import { ipPoolName, reservationName } from './whereabouts-names.ts';
import {
  type AttachmentDefinition,
  type PodRef,
  parseAttachmentDefinition,
  parseIpPool,
  parseReservation,
} from './whereabouts-objects.ts';

export const WHEREABOUTS_API_VERSION = 'whereabouts.cni.cncf.io/v1alpha1';

export type RollbackOutcome =
  /** Planned (a dry run's answer): to be written. */
  | 'write'
  | 'written'
  /** Whereabouts already holds it for the same container. */
  | 'present'
  | 'conflict'
  /** Warren holds it for no container (bookkeeping), or holds it twice: not written. */
  | 'not-written';

export interface RollbackEntry {
  /** The IPPool's name. */
  readonly ipPool: string;
  readonly address: string;
  readonly pod?: string;
  readonly container?: string;
  outcome: RollbackOutcome;
  detail?: string;
}

/** One IPPool of whereabouts a network's range maps to. */
export interface RollbackTarget {
  readonly ipPool: string;
  /** `spec.range`: the range's subnet, canonical. */
  readonly rangeText: string;
  readonly networkName: string;
  /** Warren's range pools of its range (the definitions' ranges' own pool keys). */
  readonly pools: readonly string[];
  /** Whether whereabouts keeps OverlappingRangeIPReservations for it (its default). */
  readonly reservations: boolean;
  /** The ranges of its definitions, as the agent reads them: which addresses are its (rollback-attribution.ts). */
  readonly ranges: readonly RangeSpec[];
  /** The CNI network names of its definitions: an allocation's `network` says which definition made it. */
  readonly networks: readonly string[];
}

/** What a merge needs of a target: the object's name, range and network_name. */
export type TargetObject = Pick<RollbackTarget, 'ipPool' | 'rangeText' | 'networkName'>;

export interface Selection {
  /** CNI network names (`--network`). */
  readonly networks: readonly string[];
  /** `namespace/name` of definitions (`--nad`). */
  readonly definitions: readonly string[];
}

/** Judges a record of another container at `address`: why it may be replaced, or undefined (a conflict). */
export type Replaceable = (record: { containerID?: string; pod?: PodRef }, address: string) => string | undefined;

const endsWithKey = (d: AttachmentDefinition, key: string): boolean =>
  d.ipam.ignoredKeys.some((k) => k.path.endsWith(`.${key}`));

/** The IPPools the selected warren-type definitions map to, and what kept any from being read. */
export function rollbackTargets(
  listed: readonly unknown[],
  selection: Selection,
): { targets: RollbackTarget[]; problems: Problem[] } {
  const problems: Problem[] = [];
  const definitions: AttachmentDefinition[] = [];
  for (const [index, object] of listed.entries()) {
    try {
      const d = parseAttachmentDefinition(object, index);
      if (d !== undefined) definitions.push(d);
    } catch (error) {
      problems.push({ object: `NetworkAttachmentDefinition #${index + 1}`, message: messageOf(error) });
    }
  }
  // Named, a definition switched back already is taken too: a run after the switch catches what
  // Warren handed out just before it.
  const chosen = (d: AttachmentDefinition): boolean =>
    selection.networks.length === 0 && selection.definitions.length === 0
      ? d.ipamType === 'warren'
      : selection.networks.includes(d.network) || selection.definitions.includes(`${d.namespace}/${d.name}`);
  for (const network of selection.networks)
    if (!definitions.some((d) => d.network === network))
      problems.push({
        object: `network ${network}`,
        message: 'no NetworkAttachmentDefinition of type warren names it',
      });
  for (const ref of selection.definitions)
    if (!definitions.some((d) => `${d.namespace}/${d.name}` === ref))
      problems.push({
        object: `NetworkAttachmentDefinition ${ref}`,
        message: 'not found, or its IPAM is neither warren nor whereabouts',
      });
  const byName = new Map<string, { target: RollbackTarget; ranges: Map<string, RangeSpec>; networks: Set<string> }>();
  for (const d of definitions.filter(chosen)) {
    if (endsWithKey(d, 'node_slice_size')) {
      problems.push({
        object: d.ref,
        message: 'node_slice_size: whereabouts reads per-node slices there, which this rollback does not write',
      });
      continue;
    }
    for (const range of d.ipam.ranges) {
      const name = ipPoolName(range.subnet, d.ipam.networkName);
      const held = byName.get(name);
      if (held === undefined) {
        const target = {
          ipPool: name,
          rangeText: range.subnet,
          networkName: d.ipam.networkName,
          pools: [],
          // `enable_overlapping_ranges: false` (a range kept apart: an isolated pool key): whereabouts
          // checks no reservation for it, and writes none.
          reservations: parsePoolKey(range.pool)?.isolated !== true,
          ranges: [],
          networks: [],
        };
        byName.set(name, { target, ranges: new Map([[range.pool, range]]), networks: new Set([d.network]) });
      } else {
        if (!held.ranges.has(range.pool)) held.ranges.set(range.pool, range);
        held.networks.add(d.network);
      }
    }
  }
  const targets = [...byName.values()].map(({ target, ranges, networks }) => ({
    ...target,
    pools: [...ranges.keys()],
    ranges: [...ranges.values()],
    networks: [...networks],
  }));
  return { targets, problems };
}

/** Whereabouts' `podref` of an allocation: `namespace/name`, or undefined when Warren knows no pod. */
export function podrefOf(a: Allocation): string | undefined {
  return a.podNamespace !== undefined && a.podName !== undefined ? `${a.podNamespace}/${a.podName}` : undefined;
}

const sameOwner = (record: { containerID?: string; pod?: PodRef }, a: Allocation): boolean =>
  record.containerID === a.containerID &&
  (record.pod === undefined ? undefined : `${record.pod.namespace}/${record.pod.name}`) === podrefOf(a);

/** What became of one address in one object's merge. */
export interface Verdict {
  readonly outcome: 'write' | 'present' | 'conflict';
  readonly detail?: string;
}

export interface Merged {
  /** The object to write; undefined when nothing changes. */
  readonly object?: KubeObjectJson;
  readonly verdicts: ReadonlyMap<string, Verdict>;
}

/** Where an existing record is judged against the holder. */
function judge(
  record: { containerID?: string; pod?: PodRef; ifname?: string } | undefined,
  a: Allocation,
  replaceable: Replaceable,
  what: string,
): Verdict {
  if (record === undefined) return { outcome: 'write' };
  if (sameOwner(record, a))
    // Whereabouts releases by container and interface: a record without the interface (older
    // whereabouts) would never be released by the pod's DEL.
    return record.ifname === a.ifname
      ? { outcome: 'present' }
      : { outcome: 'write', detail: `${what}'s record gets its interface, ${a.ifname}` };
  const owner =
    `${record.pod === undefined ? 'no pod' : `pod ${record.pod.namespace}/${record.pod.name}`}, ` +
    `container ${(record.containerID ?? '?').slice(0, 12)}`;
  const why = replaceable(record, a.address);
  return why === undefined
    ? { outcome: 'conflict', detail: `${what} holds it for ${owner}` }
    : { outcome: 'write', detail: `replaces ${what}'s record of ${owner}: ${why}` };
}

/** `allocations` merged into the IPPool `existing` (undefined: none yet) of `target`. */
export function mergeIpPool(
  target: TargetObject,
  namespace: string,
  existing: KubeObjectJson | undefined,
  allocations: readonly Allocation[],
  replaceable: Replaceable,
): Merged {
  const verdicts = new Map<string, Verdict>();
  let base: IPAddress | undefined;
  let records: Map<string, { containerID?: string; pod?: PodRef; ifname?: string; offset: string }>;
  if (existing === undefined) {
    base = parseIP(target.rangeText.slice(0, target.rangeText.indexOf('/')));
    records = new Map();
  } else {
    const pool = parseIpPool(existing);
    base = pool.range.address;
    records = new Map(pool.allocations.map((r) => [`${r.address.value}`, r]));
  }
  if (base === undefined) throw new Error(`no address in ${target.rangeText}`);
  const spec = (existing?.spec ?? {}) as { allocations?: Record<string, unknown> | null };
  const entries: Record<string, unknown> = { ...(spec.allocations ?? {}) };
  let changed = existing === undefined;
  for (const a of allocations) {
    const ip = parseIP(a.address);
    if (ip === undefined) continue;
    const record = records.get(`${ip.value}`);
    const verdict = judge(record, a, replaceable, `IPPool ${target.ipPool}`);
    verdicts.set(a.address, verdict);
    if (verdict.outcome !== 'write') continue;
    if (record !== undefined) delete entries[record.offset];
    entries[String(ip.value - base.value)] = {
      id: a.containerID,
      ...defined({ podref: podrefOf(a) }),
      ifname: a.ifname,
    };
    changed = true;
  }
  if (!changed) return { verdicts };
  const object: KubeObjectJson = {
    ...(existing ?? {}),
    apiVersion: WHEREABOUTS_API_VERSION,
    kind: 'IPPool',
    metadata: existing?.metadata ?? { name: target.ipPool, namespace },
    spec: {
      ...(existing?.spec as object | undefined),
      range: existing === undefined ? target.rangeText : (existing.spec as { range: string }).range,
      allocations: entries,
    },
  };
  return { object, verdicts };
}

/** The OverlappingRangeIPReservation of `a` in `target`'s network, merged into `existing`. */
export function mergeReservation(
  target: TargetObject,
  namespace: string,
  existing: KubeObjectJson | undefined,
  a: Allocation,
  replaceable: Replaceable,
): { object?: KubeObjectJson; verdict: Verdict } {
  const record = existing === undefined ? undefined : parseReservation(existing);
  const name = reservationNameOf(target, a.address);
  const verdict = judge(record, a, replaceable, `OverlappingRangeIPReservation ${name}`);
  if (verdict.outcome !== 'write') return { verdict };
  const object: KubeObjectJson = {
    ...(existing ?? {}),
    apiVersion: WHEREABOUTS_API_VERSION,
    kind: 'OverlappingRangeIPReservation',
    metadata: existing?.metadata ?? { name, namespace },
    spec: { containerid: a.containerID, ...defined({ podref: podrefOf(a) }), ifname: a.ifname },
  };
  return { object, verdict };
}

/** The name whereabouts gives the reservation of `address` in `target`'s network. */
export function reservationNameOf(target: Pick<TargetObject, 'networkName'>, address: string): string {
  const ip = parseIP(address);
  if (ip === undefined) throw new Error(`not an address: ${address}`);
  return reservationName(ip, target.networkName);
}
