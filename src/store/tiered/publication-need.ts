/**
 * When a block's changes need a write to the cluster (tiered/publisher.ts), and which addresses a
 * publication announces the node hands out next. Pure: no I/O, no clock of its own.
 *
 * The invariant kept: what the cluster holds of a block COVERS every address this node has handed
 * out in it — each allocation is listed there with its owner, or is one of the addresses the
 * publication announced as `ahead` (the next free addresses from the block's cursor, in the order
 * the picker takes them: next-after-last, ipam/ledger-state.ts). A change that leaves the block
 * covered needs no write now:
 * - an ADD that takes an `ahead` address stays covered;
 * - a release leaves the address listed with its old owner: the cluster over-covers, which is safe
 *   (a claimer keeps off the block, a file gone back keeps the record until its container is proven
 *   gone, as any other), and is bounded by the settle interval;
 * - an address taken outside `ahead` (a requested IP, a freed address the cursor reached first), a
 *   listed address taken by another owner, or any bookkeeping record (a loan's placeholder, a held
 *   address: named at once, for the nodes that read them) is not covered: written at the next run;
 * - `ahead` running low (fewer than a quarter of what a fresh list would hold left free) is written
 *   at the next run too, so that the ADDs to come find their addresses announced before they are
 *   taken; a burst that takes the rest within one run goes outside them, and costs the one write per
 *   block and run it cost before;
 * - every other difference (covered ADDs, releases) is written once the settle interval has passed
 *   since the block was last written, or with the next write it needs anyway.
 */
import { formatIP, lastOf, networkOf, parseCidr, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockCidrOfKey } from '../../ipam/blocks.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';

/** What this node last wrote of a block: the owners it listed, the addresses it announced, when. */
export interface WrittenBlock {
  /** Owner (network, containerID, ifname) of each listed address, by address. */
  readonly owners: ReadonlyMap<string, string>;
  readonly ahead: ReadonlySet<string>;
  /** When it was written, on the monotonic clock. */
  readonly atMs: number;
}

/** The block as the node's store holds it now. */
export interface BlockNow {
  readonly allocations: readonly Allocation[];
  /** The addresses a publication written now would announce (`aheadOf`). */
  readonly ahead: readonly string[];
}

/** `write`: at this run; `settle`: once the settle interval has passed; `none`: nothing to publish. */
export type PublicationNeed = 'write' | 'settle' | 'none';

/** Who holds an allocation, and where (a relocated one is written at the next run, as before). */
export function ownerOf(a: Allocation): string {
  return `${a.network}\0${a.containerID}\0${a.ifname}\0${a.netns ?? ''}`;
}

/** What block `now` needs, `written` being what was last written of it (undefined: never, since start). */
export function publicationNeed(written: WrittenBlock | undefined, now: BlockNow): PublicationNeed {
  if (written === undefined) return 'write';
  const taken = new Set<string>();
  let differs = written.owners.size !== now.allocations.length;
  for (const a of now.allocations) {
    taken.add(a.address);
    const listed = written.owners.get(a.address);
    if (listed === ownerOf(a)) continue;
    differs = true;
    if (listed !== undefined || isBookkeeping(a) || !written.ahead.has(a.address)) return 'write';
  }
  const left = [...written.ahead].filter((address) => !taken.has(address) && now.ahead.includes(address)).length;
  if (left * 4 < now.ahead.length) return 'write';
  return differs ? 'settle' : 'none';
}

/**
 * The next `count` addresses of block `key` free in its picture (neither allocated nor resting),
 * in pick order: after `cursor` to the block's end, then from its start (the picker's wrap). The
 * block's CIDR bounds it, within the range's first and last address when given (`span`): an
 * address the range excludes may be announced and never taken, which costs a place in the list.
 */
export function aheadOf(
  key: string,
  cursor: string | undefined,
  occupied: ReadonlySet<string>,
  count: number,
  span?: { readonly first: string; readonly last: string },
): string[] {
  const cidr = parseCidr(blockCidrOfKey(key) ?? '');
  if (cidr === undefined || count <= 0) return [];
  const family = cidr.address.family;
  const [low, high] = [parseIP(span?.first ?? ''), parseIP(span?.last ?? '')];
  const first = low?.family === family && low.value > networkOf(cidr) ? low.value : networkOf(cidr);
  const last = high?.family === family && high.value < lastOf(cidr) ? high.value : lastOf(cidr);
  if (first > last) return [];
  const at = cursor === undefined ? undefined : parseIP(cursor);
  const start =
    at === undefined || at.family !== family || at.value < first || at.value >= last ? first : at.value + 1n;
  const found: string[] = [];
  const size = last - first + 1n;
  for (let step = 0n; step < size && found.length < count; step++) {
    const value = first + ((start - first + step) % size);
    const address = formatIP({ family, value });
    if (!occupied.has(address)) found.push(address);
  }
  return found;
}
