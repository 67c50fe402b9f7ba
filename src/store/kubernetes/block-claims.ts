/**
 * A block's claim on the Kubernetes API (ClusterTier.claim for kubernetes/tier.ts): the WarrenBlock
 * named `blockName(key)` created, so of two claims of one block the API server lets exactly one
 * creation succeed (AlreadyExists to the others), in one request.
 *
 * Where a range's blocks grow (RangeRecord.largestBlockPrefix: aligned blocks of several sizes,
 * ipam/blocks.ts), two claims of different blocks may share addresses, and names alone do not
 * collide. So a block carries the label of the largest block holding it (`warren.dev/enclosing-block`:
 * every block that may overlap it carries the same), and a claim, once created, lists the blocks
 * under that label (one request, at most a few dozen objects: bounded by the range's block sizes,
 * never by its blocks). A block overlapping it that was created earlier — a smaller resourceVersion:
 * a block object never changes once made, so its resourceVersion is its creation's — makes it give
 * way: it is deleted at its uid and resourceVersion and answered as not made.
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
import type { BlockClaim, RangeRecord } from '../tiered/cluster-tier.ts';
import { blockObject, claimOfObject, metaOf } from './objects.ts';
import { ENCLOSING_LABEL, RANGE_LABEL, blockName, labelValue, selectorOf } from './names.ts';
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
  return items
    .map(claimOfObject)
    .some(
      (c) =>
        c !== undefined &&
        c.key !== claim.key &&
        blockKeysOverlap(c.key, claim.key) &&
        Number(c.version) < Number(claim.version),
    );
}
