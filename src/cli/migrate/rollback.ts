/**
 * The way back from Warren to whereabouts, end to end (`warren migrate to-whereabouts`): read the
 * definitions of type warren and whereabouts' objects (a WhereaboutsReader, as the forward
 * migration reads them), what Warren holds of those ranges (warren-held.ts: in every pool that may
 * serve them, and given to the IPPool of the definition that made each, rollback-attribution.ts),
 * plan each object's merge (rollback-plan.ts) and, unless it is a dry run, write it (a
 * WhereaboutsWriter).
 *
 * Whereabouts' namespace: `--whereabouts-namespace`, else the one namespace its objects are in,
 * else `kube-system` (whereabouts' own default, WHEREABOUTS_NAMESPACE).
 *
 * Guarantees:
 * - a dry run writes nothing anywhere; the tier is only ever read;
 * - an address whose IPPool or reservation another live container holds is written to neither:
 *   a conflict, reported; a record whose pod is gone, finished or no longer lists the address
 *   (the forward migration's judgement, pod-facts.ts) is replaced, and the report says whose;
 * - every write is a create or a replace at the version read: an object another writer changed in
 *   between is read again and merged again (never overwritten), up to MAX_ATTEMPTS;
 * - addresses Warren holds for no container are reported `not-written`, never written as a pod's;
 * - running it twice writes nothing the second time (`present`).
 */
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import type { ClusterTier } from '../../store/tiered/cluster-tier.ts';
import type { Problem } from './holdings.ts';
import type { WhereaboutsReader } from './kube-reads.ts';
import type { KubeObjectJson, WhereaboutsKind, WhereaboutsWriter } from './kube-writes.ts';
import { type PodFacts, podFactsOf } from './pod-facts.ts';
import { attribute, poolsToRead } from './rollback-attribution.ts';
import { podKey } from './plan.ts';
import {
  type Merged,
  type Replaceable,
  type RollbackEntry,
  type RollbackTarget,
  type Selection,
  type Verdict,
  mergeIpPool,
  mergeReservation,
  podrefOf,
  reservationNameOf,
  rollbackTargets,
} from './rollback-plan.ts';
import { readWarrenHeld } from './warren-held.ts';
import type { PodRef } from './whereabouts-objects.ts';

/** Attempts at one object while others keep changing it. */
const MAX_ATTEMPTS = 10;
export const WHEREABOUTS_DEFAULT_NAMESPACE = 'kube-system';

export interface RollbackOptions {
  readonly reader: WhereaboutsReader;
  readonly writer: WhereaboutsWriter;
  /** Read only: its records, and its address spaces (which pools serve the ranges). */
  readonly tier: ClusterTier;
  readonly selection: Selection;
  /** Whereabouts' namespace, when given (`--whereabouts-namespace`). */
  readonly namespace?: string | undefined;
  readonly dryRun: boolean;
}

export interface RollbackReport {
  readonly dryRun: boolean;
  readonly namespace: string;
  readonly entries: readonly RollbackEntry[];
  readonly problems: readonly Problem[];
}

type Listed = Map<string, KubeObjectJson>;

function byName(items: readonly unknown[], namespace: string): Listed {
  const map: Listed = new Map();
  for (const item of items as KubeObjectJson[])
    if (item?.metadata?.namespace === namespace && typeof item.metadata.name === 'string')
      map.set(item.metadata.name, item);
  return map;
}

/** The pod's judgement as the forward migration makes it: why its record is a leftover, or undefined. */
function gone(facts: PodFacts | undefined, pod: string, address: string): string | undefined {
  if (facts === undefined) return `pod ${pod} no longer exists`;
  if (facts.finished) return `pod ${pod} has finished`;
  if (facts.attachments !== undefined && !facts.attachments.some((s) => s.addresses.includes(address)))
    return `pod ${pod}'s network-status lists other addresses`;
  return undefined;
}

export async function rollBackToWhereabouts(o: RollbackOptions): Promise<RollbackReport> {
  const { targets, problems } = rollbackTargets(await o.reader.list('definitions'), o.selection);
  const [ipPoolsListed, reservationsListed] = [await o.reader.list('ipPools'), await o.reader.list('reservations')];
  const namespaces = new Set(
    [...ipPoolsListed, ...reservationsListed].map((i) => (i as KubeObjectJson)?.metadata?.namespace ?? ''),
  );
  const [onlyNamespace, ...more] = namespaces;
  const namespace = o.namespace ?? (more.length === 0 ? onlyNamespace : undefined) ?? WHEREABOUTS_DEFAULT_NAMESPACE;
  if (o.namespace === undefined && more.length > 0)
    return {
      dryRun: o.dryRun,
      namespace,
      entries: [],
      problems: [
        ...problems,
        {
          object: 'whereabouts',
          message:
            `its objects are in several namespaces (${[...namespaces].join(', ')}): ` +
            'name one with --whereabouts-namespace',
        },
      ],
    };
  const listed: Record<WhereaboutsKind, Listed> = {
    ipPools: byName(ipPoolsListed, namespace),
    reservations: byName(reservationsListed, namespace),
  };
  const held = attribute(targets, await readWarrenHeld(o.tier, await poolsToRead(o.tier.spaces, targets)));
  for (const p of held.problems)
    problems.push({ object: `${p.pool} ${p.address}`, message: `${p.message}: not written` });
  const entries: RollbackEntry[] = [];
  const plans = targets.map((target) => {
    const allocations = held.holders.get(target) ?? [];
    for (const b of held.bookkeeping.get(target) ?? [])
      entries.push({
        ipPool: target.ipPool,
        address: b.address,
        outcome: 'not-written',
        detail: `Warren holds it for no container (${b.what})`,
      });
    return { target, allocations };
  });

  // The pods named by records of other containers at Warren's addresses: read once, to judge them.
  const asked = new Map<string, PodRef>();
  const collect: Replaceable = (record) => {
    if (record.pod !== undefined) asked.set(podKey(record.pod), record.pod);
    return undefined;
  };
  for (const { target, allocations } of plans) {
    try {
      mergeAll(target, namespace, listed, allocations, collect);
    } catch {
      // Reported below, when the same objects are merged again.
    }
  }
  const pods = new Map<string, PodFacts | undefined>();
  for (const [key, pod] of asked) pods.set(key, podFactsOf(await o.reader.pod(pod.namespace, pod.name)));
  const replaceable: Replaceable = (record, address) => {
    if (record.pod === undefined || !pods.has(podKey(record.pod))) return undefined;
    return gone(pods.get(podKey(record.pod)), podKey(record.pod), address);
  };

  for (const { target, allocations } of plans) {
    let planned: Merged[];
    try {
      planned = mergeAll(target, namespace, listed, allocations, replaceable);
    } catch (error) {
      // Whereabouts' object cannot be read: nothing of it is written over.
      problems.push({ object: `IPPool ${namespace}/${target.ipPool}`, message: messageOf(error) });
      for (const a of allocations) entries.push({ ...entryOf(target, a, [], o.dryRun), outcome: 'not-written' });
      continue;
    }
    // An address conflicting in either object is written to neither.
    const writable = allocations.filter((a) => planned.every((m) => m.verdicts.get(a.address)?.outcome !== 'conflict'));
    const done = o.dryRun ? planned : await writeAll(o.writer, target, namespace, listed, writable, replaceable);
    for (const a of allocations) {
      const verdicts = [...planned, ...done].flatMap((m) => {
        const v = m.verdicts.get(a.address);
        return v === undefined ? [] : [v];
      });
      entries.push(entryOf(target, a, verdicts, o.dryRun));
    }
  }
  return { dryRun: o.dryRun, namespace, entries, problems };
}

function entryOf(target: RollbackTarget, a: Allocation, verdicts: readonly Verdict[], dryRun: boolean): RollbackEntry {
  const outcome = verdicts.some((v) => v.outcome === 'conflict')
    ? 'conflict'
    : verdicts.some((v) => v.outcome === 'write')
      ? dryRun
        ? 'write'
        : 'written'
      : 'present';
  const details = [...new Set(verdicts.flatMap((v) => (v.detail === undefined ? [] : [v.detail])))];
  const pod = podrefOf(a);
  return {
    ipPool: target.ipPool,
    address: a.address,
    ...(pod === undefined ? {} : { pod }),
    container: a.containerID,
    outcome,
    ...(details.length === 0 ? {} : { detail: details.join('; ') }),
  };
}

/** The merges of one target's IPPool and its reservations, on the objects as listed. */
function mergeAll(
  target: RollbackTarget,
  namespace: string,
  listed: Record<WhereaboutsKind, Listed>,
  allocations: readonly Allocation[],
  replaceable: Replaceable,
): Merged[] {
  const merges: Merged[] = [
    mergeIpPool(target, namespace, listed.ipPools.get(target.ipPool), allocations, replaceable),
  ];
  if (target.reservations)
    for (const a of allocations) {
      const name = reservationNameOf(target, a.address);
      const { object, verdict } = mergeReservation(target, namespace, listed.reservations.get(name), a, replaceable);
      merges.push({ ...(object === undefined ? {} : { object }), verdicts: new Map([[a.address, verdict]]) });
    }
  return merges;
}

/** Writes one target's objects, each read again and merged again when it changed meanwhile. */
async function writeAll(
  writer: WhereaboutsWriter,
  target: RollbackTarget,
  namespace: string,
  listed: Record<WhereaboutsKind, Listed>,
  allocations: readonly Allocation[],
  replaceable: Replaceable,
): Promise<Merged[]> {
  const done: Merged[] = [];
  const pool = (existing: KubeObjectJson | undefined) =>
    mergeIpPool(target, namespace, existing, allocations, replaceable);
  done.push(await written(writer, 'ipPools', namespace, target.ipPool, listed.ipPools.get(target.ipPool), pool));
  if (target.reservations)
    for (const a of allocations) {
      const name = reservationNameOf(target, a.address);
      const reservation = (existing: KubeObjectJson | undefined): Merged => {
        const { object, verdict } = mergeReservation(target, namespace, existing, a, replaceable);
        return { ...(object === undefined ? {} : { object }), verdicts: new Map([[a.address, verdict]]) };
      };
      done.push(await written(writer, 'reservations', namespace, name, listed.reservations.get(name), reservation));
    }
  return done;
}

async function written(
  writer: WhereaboutsWriter,
  kind: WhereaboutsKind,
  namespace: string,
  name: string,
  first: KubeObjectJson | undefined,
  merge: (existing: KubeObjectJson | undefined) => Merged,
): Promise<Merged> {
  let existing = first;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    let merged: Merged;
    try {
      merged = merge(existing);
    } catch (error) {
      throw new WarrenError(
        'INVALID_CONFIG',
        `${kind === 'ipPools' ? 'IPPool' : 'reservation'} ${namespace}/${name}: ${messageOf(error)}`,
      );
    }
    if (merged.object === undefined) return merged;
    const answer =
      existing === undefined
        ? await writer.create(kind, namespace, merged.object)
        : await writer.replace(kind, namespace, merged.object);
    if (answer === 'created' || answer === 'replaced') return merged;
    existing = await writer.get(kind, namespace, name);
  }
  throw new WarrenError(
    'TRY_AGAIN',
    `${namespace}/${name} changed ${MAX_ATTEMPTS} times while the rollback wrote it; ` +
      'run it again (what it wrote stays written)',
  );
}
