/**
 * The reads and chores of the two-tier store (tiered/store.ts) that look past this node's own
 * blocks: the whole range's claims for block placement, and freeing a node gone for good.
 *
 * Guarantees:
 * - `rangeBlocks` reads every page of the range's claims (and, with counts, of its published
 *   blocks), each page at most PAGE_LIMIT records; it is called only when this node's own blocks are
 *   full, so the common ADD never reads the range; and in a range of more than a page only when
 *   probing found nothing (allocator/range-placer.ts);
 * - `knownBlocks` answers the same picture with no claim of another node in it, and reads nothing
 *   but this node's claims of the range (once per range): what a claim placed by probing costs does
 *   not grow with the range's claims; undefined for a range of one page (listed: one request);
 * - a block known here but claimed by nobody in the cluster shows without affinity, at its local
 *   revision, so a claim of it commits against the revision the node's store holds; except a block
 *   whose claim vanished while this node held it: that one shows held (`<node> (vanished)`), so this
 *   node does not claim it again on its own and go on allocating where someone removed its claim;
 *   its claim listed again as this node's (the listing started after the judgment) holds it again;
 * - a block the claim guard refused (another node's publication of it) shows held by that node;
 * - `fullyClaimedOf` passes on the tier's fully-claimed mark of a range (one request instead of
 *   `rangeBlocks`' pages, for a range with no block free), where the tier keeps one, for a range of
 *   more than one page of blocks;
 * - `forgetNodeBlocks` removes each claim of the node only at the version read (uid and version
 *   preconditions): of two agents forgetting one node, each block is freed by exactly one, and a
 *   block claimed again by a live node in between is never removed. Grants the node had lent are
 *   dropped from the requests holding them, and every publication still naming the node is withdrawn
 *   (its loan ledgers, and its blocks whose claim someone removed or moved to another node by hand,
 *   or a restore took away: a forgotten node's containers are gone, and no claim's give-back removes
 *   those), except the publication of a claim of its that kept changing (it stays with its claim).
 */
import { defined } from '../../core/defined.ts';
import type { BlockClaim, BlockCounts, ClusterTier, Page, RangeRecord } from './cluster-tier.ts';
import { blockCidrOfKey, blockKeyPrefix, rangePoolOfKey } from '../../ipam/blocks.ts';
import { bitsOf, parseIP } from '../../ipam/address.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { BlockOwners, LedgerSummary, Store } from '../store.ts';
import type { TieredClaims } from './claims.ts';
import { madeAnother } from './stray-claims.ts';

/** The address space of a range pool as `spaces` names it (allocator/admission.ts): `v4`, `v4@<network_name>`. */
export function spaceOfPool(pool: string): string {
  const key = parsePoolKey(pool);
  if (key === undefined) return '';
  return key.networkName === '' ? `v${key.family}` : `v${key.family}@${key.networkName}`;
}

/**
 * The record of a range this store never saw described (a block claimed by a caller that wrote no
 * description first): its block size is the block key's own.
 */
export function recordFromKey(key: string): RangeRecord {
  const rangePool = rangePoolOfKey(key);
  const cidr = blockCidrOfKey(key) ?? '';
  const subnet = parsePoolKey(rangePool) === undefined ? cidr : (rangePool.split('@')[0] ?? cidr);
  const blockPrefix = Number(cidr.slice(cidr.indexOf('/') + 1));
  return { pool: rangePool, space: spaceOfPool(rangePool), subnet, first: '', last: '', blockPrefix };
}

/** Records per listing page. */
export const PAGE_LIMIT = 250;

/** Every item of a paged listing, page by page. */
async function allPages<T>(read: (page: { limit: number; continue?: string }) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let next: string | undefined;
  do {
    const page = await read({ limit: PAGE_LIMIT, ...defined({ continue: next }) });
    items.push(...page.items);
    next = page.continue;
  } while (next !== undefined);
  return items;
}

/**
 * The listing `pools(<range>#)` answers on the two-tier store: this node's blocks of the range, as
 * the cluster's claims say (read once per range), with the local summaries (`shown`, vanished claims
 * already without affinity). Before the node's file is compared with what it published (`compared`
 * false), a claim with nothing recorded here yet shows empty: a commit in it compares the file
 * first (tiered/file-check.ts), which records it, or gives it back when this node never made it in a
 * block another node uses. Once compared, a claim naming this node that its file does not record is
 * not listed: every claim this node makes is recorded before it is used (tiered/claim-commit.ts), so
 * one seen after is a stray (an object edited by hand: listing it handed that node's addresses out
 * again, found by the soak; tiered/stray-claims.ts). While the cluster cannot be reached and the
 * range's claims were never read (a restart), the local record of this node's claims stands in, so
 * ADDs in its blocks go on.
 */
export async function ownBlocks(
  claims: TieredClaims,
  rangePool: string,
  shown: LedgerSummary[],
  compared: boolean,
): Promise<LedgerSummary[]> {
  try {
    await claims.load(rangePool);
  } catch {
    return shown;
  }
  if (compared) return shown;
  const known = new Set(shown.map((p) => p.ledger));
  // A block in a handover is not one to hand out from (tiered/handover.ts).
  const unseen = claims
    .of(rangePool)
    .filter((c) => !known.has(c.key) && !claims.handingOver(c.key))
    .map((c): LedgerSummary => ({ ledger: c.key, revision: 0, allocated: 0, resting: 0, affinity: claims.node }));
  return [...shown, ...unseen].sort((a, b) => (a.ledger < b.ledger ? -1 : a.ledger > b.ledger ? 1 : 0));
}

/** Ranges of address space `space` in which `node` holds a block by its own store's record, with what they hold. */
export async function heldByNode(local: Store, node: string, space: string): Promise<Map<string, number>> {
  const held = new Map<string, number>();
  for (const p of await local.ledgers()) {
    const rangePool = rangePoolOfKey(p.ledger);
    if (p.ledger === rangePool || p.affinity !== node || spaceOfPool(rangePool) !== space) continue;
    held.set(rangePool, (held.get(rangePool) ?? 0) + Math.max(1, p.allocated + p.resting));
  }
  return held;
}

export interface RangeParts {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly claims: TieredClaims;
  /** Whether the node's file was compared with what it published (tiered/file-check.ts). */
  readonly compared: () => boolean;
}

export async function rangeBlocks(parts: RangeParts, rangePool: string, counts: boolean): Promise<LedgerSummary[]> {
  const { tier, claims } = parts;
  await claims.load(rangePool);
  const started = claims.listingStarts();
  const claimed = await allPages((page) => tier.claimsIn(rangePool, page));
  const published = new Map(
    counts ? (await allPages((page) => tier.published({ pool: rangePool }, page))).map((p) => [p.key, p.counts]) : [],
  );
  const shown = await summaries(parts, rangePool, claimed, published);
  // This node's record, newer than any judgment that it vanished: held (one wrong judgment never wedges a range).
  for (const c of claimed) claims.sawInRange(c, started);
  return shown;
}

/**
 * The blocks of range `rangePool` this node knows without reading the range's claims, as
 * `rangeBlocks` shows them but with only this node's claims (read once per range): undefined for a
 * range of one page of claims (`rangeBlocks` is then one request) or never split (`range`).
 */
export async function knownBlocks(
  parts: RangeParts,
  rangePool: string,
  range: RangeRecord | undefined,
): Promise<LedgerSummary[] | undefined> {
  if (range === undefined || !isPagedRange(range)) return undefined;
  await parts.claims.load(rangePool);
  return summaries(parts, rangePool, parts.claims.of(rangePool), new Map());
}

/**
 * The range's blocks as `claimed` (all of the range's, or this node's) show them over this node's
 * store, with the holders' published counts where `published` has them; vanished and refused
 * blocks shown held.
 */
async function summaries(
  parts: RangeParts,
  rangePool: string,
  claimed: readonly BlockClaim[],
  published: ReadonlyMap<string, BlockCounts>,
): Promise<LedgerSummary[]> {
  const { local, claims } = parts;
  const here = new Map((await local.ledgers(blockKeyPrefix(rangePool))).map((p) => [p.ledger, p]));
  const byKey = new Map<string, LedgerSummary>();
  for (const [key, p] of here) {
    const { affinity: _local, ...rest } = p;
    byKey.set(key, claims.vanished(key) ? { ...rest, affinity: `${claims.node} (vanished)` } : rest);
  }
  for (const c of claimed) {
    const mine = here.get(c.key);
    const theirs = published.get(c.key);
    byKey.set(c.key, {
      ledger: c.key,
      revision: mine?.revision ?? 0,
      allocated: theirs?.allocated ?? mine?.allocated ?? 0,
      resting: theirs?.resting ?? mine?.resting ?? 0,
      // Before the file is compared, every claim of this node counts as recorded (ownBlocks says why);
      // after, only the record the file made (stray-claims.ts).
      affinity: affinityOf(
        c,
        claims.node,
        !parts.compared() || (mine?.affinity === claims.node && !madeAnother(local, c.key, c.uid)),
      ),
    });
  }
  // Refused by the claim guard (another node's publication): shown held, so placement moves on.
  for (const [key, owner] of claims.refusals()) {
    const p = byKey.get(key);
    if (rangePoolOfKey(key) !== rangePool || p?.affinity !== undefined) continue;
    const { revision = 0, allocated = 0, resting = 0 } = p ?? {};
    byKey.set(key, { ledger: key, revision, allocated, resting, affinity: `${owner} (claim vanished)` });
  }
  return [...byKey.values()].sort((a, b) => (a.ledger < b.ledger ? -1 : a.ledger > b.ledger ? 1 : 0));
}

/**
 * Whose to hand out from claim `c` is, for placement: its node's; in a handover (tiered/handover.ts)
 * held but nobody's yet; one naming this node that its file (once compared) does not record
 * claiming held but not this node's (a claim it never recorded, given back unused: stray-claims.ts;
 * its own are recorded before use).
 */
function affinityOf(c: BlockClaim, node: string, recorded: boolean): string {
  if (c.offeredTo !== undefined || c.takenFrom !== undefined) return `${c.node} (handing over)`;
  if (c.node === node && !recorded) return `${c.node} (not recorded by it)`;
  return c.node;
}

/** Frees the blocks of `node`, gone for good: the keys freed by this call. */
export async function forgetNodeBlocks(tier: ClusterTier, node: string): Promise<string[]> {
  const freed: string[] = [];
  /** Claims of the node that still stand (changed at every try): their publications stay with them. */
  const standing = new Set<string>();
  for (const claim of await tier.claimsOf(node)) {
    let current: BlockClaim | undefined = claim;
    // A claim whose version moved (its owner published before it died) is read again; only the same
    // record (uid) of the same node is removed.
    for (let attempt = 0; attempt < 3 && current !== undefined; attempt++) {
      const outcome = await tier.unclaim(current);
      if (outcome === 'released') freed.push(claim.key);
      const again = outcome === 'changed' ? await tier.claimOf(claim.key) : undefined;
      current = again?.uid === claim.uid && again.node === node ? again : undefined;
    }
    if (current !== undefined) standing.add(claim.key);
  }
  for (const request of await tier.requestsLentBy(node)) {
    for (let r: typeof request | undefined = request, attempt = 0; r !== undefined && attempt < 3; attempt++) {
      const kept = r.grants.filter((g) => g.lender !== node);
      if (kept.length === r.grants.length) break;
      const updated = await tier.updateRequest(r, kept, r.wanted);
      if (updated !== undefined) break;
      r = await tier.requestOf(r.pool, r.node);
    }
  }
  await withdrawPublications(tier, node, standing);
  return freed;
}

/**
 * Withdraws every publication still naming `node` (it is gone: it holds no address), loans and
 * blocks, but those of claims in `standing`: all read first, page by page.
 */
async function withdrawPublications(tier: ClusterTier, node: string, standing: ReadonlySet<string>): Promise<void> {
  const left = (await allPages((page) => tier.published({ node }, page))).filter((b) => !standing.has(b.key));
  for (const b of left) await tier.withdraw(b.key, node);
}

/**
 * What the store's `cluster.owners` reads of its ranges: `rangeBlocks`, `knownBlocks` and the
 * fully-claimed mark. `rangeOf`: the range as pinned (undefined: never split).
 */
export function rangeOwners(
  parts: RangeParts,
  rangeOf: (rangePool: string) => Promise<RangeRecord | undefined>,
): Pick<BlockOwners, 'rangeBlocks' | 'knownBlocks' | 'fullyClaimed' | 'markFullyClaimed'> {
  return {
    rangeBlocks: (rangePool, options) => rangeBlocks(parts, rangePool, options.counts),
    knownBlocks: async (rangePool) => knownBlocks(parts, rangePool, await rangeOf(rangePool)),
    ...fullyClaimedOf(parts.tier, rangeOf),
  };
}

/**
 * The fully-claimed mark of the tier's ranges, where it keeps one (BlockOwners.fullyClaimed), for
 * ranges of more than PAGE_LIMIT smallest blocks: a smaller range's claims are one page, one
 * request, as the mark is, so for it the mark is neither read nor written. `rangeOf`: the range as
 * pinned (undefined: never split, no mark).
 */
function fullyClaimedOf(
  tier: ClusterTier,
  rangeOf: (rangePool: string) => Promise<RangeRecord | undefined>,
): Pick<BlockOwners, 'fullyClaimed' | 'markFullyClaimed'> {
  const { fullyClaimed, markFullyClaimed } = tier;
  if (fullyClaimed === undefined || markFullyClaimed === undefined) return {};
  const pages = async (pool: string) => {
    const range = await rangeOf(pool);
    return range !== undefined && isPagedRange(range);
  };
  return {
    fullyClaimed: async (pool) => (await pages(pool)) && fullyClaimed.call(tier, pool),
    markFullyClaimed: async (pool, full) => {
      if (!(await pages(pool))) return false;
      await markFullyClaimed.call(tier, pool, full);
      return true;
    },
  };
}

/**
 * Whether range `r` may hold more than one page of claims (PAGE_LIMIT smallest blocks): where a
 * fully-claimed mark saves requests.
 */
export function isPagedRange(r: RangeRecord): boolean {
  return blocksOf(r) > BigInt(PAGE_LIMIT);
}

/** How many smallest blocks range `r` spans at most. */
function blocksOf(r: RangeRecord): bigint {
  const first = parseIP(r.first);
  const last = parseIP(r.last);
  if (first === undefined || last === undefined || last.value < first.value) return 0n;
  return ((last.value - first.value) >> BigInt(bitsOf(first.family) - r.blockPrefix)) + 1n;
}
