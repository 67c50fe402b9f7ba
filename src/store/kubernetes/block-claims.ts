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
 * cache): the later one always gives way; the earlier never does for it. Not yet kept: a claim
 * whose maker died between its creation and its listing (one request) is left beside the one it
 * overlaps, and its maker's restart would adopt it as a claim its file never recorded
 * (tiered/file-check.ts); an upkeep that lists each own grown block's enclosing label once at start
 * would close that window.
 */
import { WarrenError } from '../../core/errors.ts';
import { blockCidrOfKey, blockKeysOverlap, enclosingBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { BlockClaim, RangeRecord } from '../tiered/cluster-tier.ts';
import { blockObject, claimOfObject } from './objects.ts';
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
  if (created.kind === 'exists') return undefined;
  const claim = claimOfObject(created.object);
  if (claim === undefined)
    throw new WarrenError('IO_FAILURE', `the API server answered the claim of block ${key} with no object`);
  if (enclosing !== undefined && (await overlapsEarlier(blocks, range, claim, enclosing))) {
    await blocks.remove(`give back block ${key}, which overlaps one claimed first`, blockName(key), {
      uid: claim.uid,
      resourceVersion: claim.version,
    });
    return undefined;
  }
  return claim;
}

/** Whether a claim created before `claim` shares an address with it: all such lie in `enclosing`. */
async function overlapsEarlier(
  blocks: Resource,
  range: RangeRecord,
  claim: BlockClaim,
  enclosing: string,
): Promise<boolean> {
  const labels = {
    [RANGE_LABEL]: labelValue(range.pool),
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
