/**
 * A block's claim on the Kubernetes API (ClusterTier.claim for kubernetes/tier.ts): the WarrenBlock
 * named `blockName(key)` created, so of two claims of one block the API server lets exactly one
 * creation succeed (AlreadyExists to the others), in one request; moved by a handover
 * (ClusterTier.moveClaim: allocator/lending/handover.ts) by an update guarded by its resourceVersion.
 *
 * Where a range's blocks grow (RangeRecord.largestBlockPrefix: aligned blocks of several sizes,
 * ipam/blocks.ts), two claims of different blocks may share addresses, and names alone do not
 * collide. So a block carries the label of the largest block holding it (`warren.dev/enclosing-block`:
 * every block that may overlap it carries the same), and a claim, once created, lists the blocks
 * under that label (one request, at most a few dozen objects: bounded by the range's block sizes,
 * never by its blocks). A block overlapping it that was created earlier — a smaller resourceVersion
 * of its creation: the object's own until a handover changed it, then the one the handover kept in
 * an annotation (objects.ts createdVersionOf) — makes it give way: it is deleted at its uid and
 * resourceVersion and answered as not made.
 *
 * Guarantee: of two overlapping claims, at most one stands. The later creation's listing follows
 * it, and so sees the earlier one (listings without a resourceVersion are read from etcd, not a
 * cache): the later one always gives way; the earlier never does for it. A claim whose maker died
 * between its creation and its listing is left beside the one it overlaps, until its maker reads
 * it: the listing of a node's claims (`standingClaims`, for tier.claimsOf: once per range at start,
 * and what the file check adopts) and a claim of a block that exists already and is the node's own
 * make the same check of it, and give it back when it lost, so a node never adopts a claim that
 * lost.
 */
import { WarrenError } from '../../core/errors.ts';
import { blockCidrOfKey, blockKeysOverlap, enclosingBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { ClaimState } from '../cluster.ts';
import type { BlockClaim, RangeRecord } from '../tiered/cluster-tier.ts';
import { type KubeObject, blockObject, claimOfObject, metaOf, specOf } from './objects.ts';
import { defined } from '../../core/defined.ts';
import {
  API_VERSION,
  CREATED_VERSION_ANNOTATION,
  ENCLOSING_LABEL,
  NODE_LABEL,
  RANGE_LABEL,
  blockName,
  labelValue,
  selectorOf,
} from './names.ts';
import type { Resource } from './resources.ts';

/** Claims block `key` of `range` for `node`: undefined when a claim of it, or overlapping it made first, exists. */
export async function claimBlock(
  blocks: Resource,
  range: RangeRecord,
  key: string,
  node: string,
): Promise<BlockClaim | undefined> {
  if (rangePoolOfKey(key) !== range.pool)
    throw new WarrenError('IO_FAILURE', `block ${key} is not a block of range ${range.pool}`);
  const largest = range.largestBlockPrefix;
  const enclosing = largest === undefined ? undefined : enclosingBlockKey(key, largest);
  const created = await blocks.create(`claim block ${key}`, blockObject(blockName(key), key, node, enclosing));
  if (created.kind === 'exists') {
    // This node's own, made before a crash (the caller then takes it as its own): it must stand.
    const held =
      enclosing === undefined ? undefined : claimOfObject(await blocks.get(`read block ${key}`, blockName(key)));
    if (held?.node === node && enclosing !== undefined) await giveWayIfLater(blocks, range.pool, held, enclosing);
    return undefined;
  }
  const claim = claimOfObject(created.object);
  if (claim === undefined)
    throw new WarrenError('IO_FAILURE', `the API server answered the claim of block ${key} with no object`);
  return enclosing !== undefined && (await giveWayIfLater(blocks, range.pool, claim, enclosing)) ? undefined : claim;
}

/**
 * The claims among block objects `items` (a listing of one node's) that stand: one carrying an
 * enclosing block's label that a claim made earlier overlaps is given back and left out. One
 * listing per enclosing block among them.
 */
export async function standingClaims(blocks: Resource, items: readonly unknown[]): Promise<BlockClaim[]> {
  const standing: BlockClaim[] = [];
  for (const item of items) {
    const claim = claimOfObject(item);
    if (claim === undefined) continue;
    const enclosing = enclosingOf(claim.key, metaOf(item)?.labels?.[ENCLOSING_LABEL]);
    if (enclosing !== undefined && (await giveWayIfLater(blocks, rangePoolOfKey(claim.key), claim, enclosing)))
      continue;
    standing.push(claim);
  }
  return standing;
}

/** The key of the enclosing block of block `key` that `label` (its ENCLOSING_LABEL) names, if any. */
function enclosingOf(key: string, label: string | undefined): string | undefined {
  if (label === undefined) return undefined;
  const prefix = Number(blockCidrOfKey(key)?.split('/')[1]);
  for (let largest = prefix; largest >= 0; largest--) {
    const enclosing = enclosingBlockKey(key, largest);
    if (labelValue(blockCidrOfKey(enclosing) ?? '') === label) return enclosing;
  }
  return undefined;
}

/** Gives `claim` back when a claim made before it overlaps it: whether it did. */
async function giveWayIfLater(blocks: Resource, pool: string, claim: BlockClaim, enclosing: string): Promise<boolean> {
  if (!(await overlapsEarlier(blocks, pool, claim, enclosing))) return false;
  await blocks.remove(`give back block ${claim.key}, which overlaps one claimed first`, blockName(claim.key), {
    uid: claim.uid,
    resourceVersion: claim.version,
  });
  return true;
}

/** Whether a claim created before `claim` shares an address with it: all such lie in `enclosing`. */
async function overlapsEarlier(blocks: Resource, pool: string, claim: BlockClaim, enclosing: string): Promise<boolean> {
  const labels = {
    [RANGE_LABEL]: labelValue(pool),
    [ENCLOSING_LABEL]: labelValue(blockCidrOfKey(enclosing) ?? ''),
  };
  const items = await blocks.listAll(`list the blocks overlapping ${claim.key}`, selectorOf(labels));
  const created = Number(createdVersionOf(items.find((i) => claimOfObject(i)?.key === claim.key)) ?? claim.version);
  return items.some((item) => {
    const c = claimOfObject(item);
    return (
      c !== undefined &&
      c.key !== claim.key &&
      blockKeysOverlap(c.key, claim.key) &&
      Number(createdVersionOf(item) ?? c.version) < created
    );
  });
}

/**
 * Moves `claim` to `state` (a handover's step) if it is still exactly `claim` (uid and
 * resourceVersion): the claim as written, or undefined when it changed or is gone.
 */
export async function moveClaim(
  blocks: Resource,
  claim: BlockClaim,
  state: ClaimState,
): Promise<BlockClaim | undefined> {
  const object = await blocks.get(`read block ${claim.key}`, blockName(claim.key));
  const now = claimOfObject(object);
  if (now === undefined || now.uid !== claim.uid || now.version !== claim.version) return undefined;
  const body = movedBlockObject(object, state);
  if (body === undefined) return undefined;
  const written = await blocks.replace(`hand block ${claim.key} over`, body);
  return written.kind === 'replaced' ? claimOfObject(written.object) : undefined;
}

/**
 * The resourceVersion of a block object's creation: the object's own until a handover first changed
 * it, then the one kept in CREATED_VERSION_ANNOTATION (block-claims.ts orders overlapping claims by it).
 */
export function createdVersionOf(object: unknown): string | undefined {
  const meta = metaOf(object);
  return meta?.annotations?.[CREATED_VERSION_ANNOTATION] ?? meta?.resourceVersion;
}

/**
 * The block object `object` (as read) moved to `state` (ClusterTier.moveClaim), guarded by its
 * resourceVersion: its node label follows the node, and its creation's version is kept.
 */
export function movedBlockObject(object: unknown, state: ClaimState): KubeObject | undefined {
  const meta = metaOf(object);
  const s = specOf(object);
  if (meta === undefined || s === undefined) return undefined;
  const { offeredTo: _o, takenFrom: _t, ...spec } = s;
  const kept = (object as KubeObject).metadata;
  const created = createdVersionOf(object) ?? meta.resourceVersion;
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenBlock',
    metadata: {
      ...kept,
      labels: { ...(meta.labels ?? {}), [NODE_LABEL]: labelValue(state.node) },
      annotations: { ...(meta.annotations ?? {}), [CREATED_VERSION_ANNOTATION]: created },
    },
    spec: { ...spec, node: state.node, ...defined({ offeredTo: state.offeredTo, takenFrom: state.takenFrom }) },
  };
}
