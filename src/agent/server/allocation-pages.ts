/**
 * GET /v1/allocations one page at a time (issue 26: a listing at 100k allocations once built a
 * 29.5 MB answer and left the agent at 500 MB). A page holds at most `limit` allocations, and what
 * the agent reads to make it is bounded too:
 * - this agent's store: `Store.listPage` reads the page from the key on (SQLite walks its primary
 *   key from the cursor). A store without it (etcd) is listed and sliced: bounded answers, not
 *   bounded reads;
 * - the cluster (`cluster=true`, on the Kubernetes store): every node's allocations as their
 *   owners published them, read from the published view a few blocks at a time: as many as hold
 *   about one page, judged by the blocks read before (1 to `BLOCKS_PER_READ`), so a read is never
 *   many pages' worth. A page that stops inside a read resumes it: `recentReads` keeps the last
 *   reads a short while, so a listing read page after page reads each block once (issue 26: pages
 *   of 500 over blocks of 1,000 read every 50-block read 100 times, 658 s for 1,000,000), while a
 *   new listing reads afresh (what was published since the last one shows at once); a lent
 *   address once, as the container holding it where its borrower published one (cluster-holders.ts).
 *
 * The continue token is opaque to callers (base64url of JSON): the key after which the next page
 * starts, or the published view's own continue token with the block and offset reached in that
 * read. A token this agent did not give is refused (BAD_REQUEST), never guessed at.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isPlainObject } from '../../core/validate.ts';
import type { AllocationPage, AllocationPageRequest } from '../../api/protocol.ts';
import type { AllocationFilter, ListCursor, Store } from '../../store/store.ts';
import type { PublishedView } from '../../store/cluster.ts';
import { holdersOf } from './cluster-holders.ts';

/** The published view of a cluster store: one page of blocks with their allocations (store/cluster.ts). */
export type { PublishedView };

/** At most this many blocks are read from the published view at a time (blocks of a few allocations). */
export const BLOCKS_PER_READ = 50;

/** How long a read is kept for the next page of a listing, and how many reads (listings at once). */
export const RECENT_READ_MS = 30_000;
export const RECENT_READS = 4;

type Token = { readonly k: 'local'; readonly p: string; readonly a: string } | ClusterToken;
interface ClusterToken {
  readonly k: 'cluster';
  /** The published view's continue token of the read this page stopped in (absent: the first). */
  readonly t?: string;
  /** The block of that read, and the allocation in it, the next page starts at. */
  readonly b: number;
  readonly o: number;
  /** How many blocks that read asked for (absent: BLOCKS_PER_READ), so that it is asked again alike. */
  readonly w?: number;
}

function encode(token: Token): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

function refused(): WarrenError {
  return new WarrenError('BAD_REQUEST', 'continue is not a token this agent gave for this listing');
}

function decode(text: string | undefined, kind: Token['k']): Token | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw refused();
  }
  if (!isPlainObject(value) || value.k !== kind) throw refused();
  if (kind === 'local' && typeof value.p === 'string' && typeof value.a === 'string')
    return { k: 'local', p: value.p, a: value.a };
  const whole = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  const width = (n: unknown): boolean => n === undefined || (whole(n) && n >= 1 && n <= BLOCKS_PER_READ);
  if (
    kind === 'cluster' &&
    whole(value.b) &&
    whole(value.o) &&
    width(value.w) &&
    (value.t === undefined || typeof value.t === 'string')
  )
    return {
      k: 'cluster',
      b: value.b,
      o: value.o,
      ...defined({ t: value.t }),
      ...(value.w === undefined ? {} : { w: value.w as number }),
    };
  throw refused();
}

/** One page of this agent's store; see the module header. */
export async function localPage(
  store: Store,
  filter: AllocationFilter,
  page: AllocationPageRequest,
): Promise<AllocationPage> {
  const token = decode(page.continue, 'local');
  const after: ListCursor | undefined = token?.k === 'local' ? { ledger: token.p, address: token.a } : undefined;
  const read =
    store.listPage === undefined
      ? sliced(await store.list(filter), page.limit, after)
      : await store.listPage(filter, { limit: page.limit, ...defined({ after }) });
  return {
    items: read.items,
    ...(read.next === undefined ? {} : { continue: encode({ k: 'local', p: read.next.ledger, a: read.next.address }) }),
  };
}

/** A whole list cut as listPage would: key order, after the cursor. */
function sliced(all: Allocation[], limit: number, after: ListCursor | undefined) {
  const key = (a: { pool: string; address: string }): [string, string] => [a.pool, a.address];
  const before = (x: [string, string], y: [string, string]): boolean => x[0] < y[0] || (x[0] === y[0] && x[1] < y[1]);
  const sorted = all.sort((x, y) => (before(key(x), key(y)) ? -1 : before(key(y), key(x)) ? 1 : 0));
  const rest = after === undefined ? sorted : sorted.filter((a) => before([after.ledger, after.address], key(a)));
  const items = rest.slice(0, limit);
  const last = items.at(-1);
  return rest.length > limit && last !== undefined
    ? { items, next: { ledger: last.pool, address: last.address } }
    : { items };
}

/** Whether `a` passes the filters the published view cannot apply itself. */
function matches(a: Allocation, filter: AllocationFilter): boolean {
  const fields = ['network', 'containerID', 'ifname', 'podNamespace', 'podName', 'podUID', 'address'] as const;
  return (
    fields.every((field) => filter[field] === undefined || a[field] === filter[field]) &&
    (filter.ledger === undefined || a.pool === filter.ledger)
  );
}

/**
 * How many blocks to read next for a page of `limit`: enough to fill it at the allocations per
 * block of `read` (at least one block, at most BLOCKS_PER_READ).
 */
function widthAfter(read: readonly { allocations: readonly unknown[] }[], limit: number): number {
  const held = read.reduce((sum, block) => sum + block.allocations.length, 0);
  const perBlock = Math.max(1, held / Math.max(1, read.length));
  return Math.min(BLOCKS_PER_READ, Math.max(1, Math.ceil(limit / perBlock)));
}

/** One page of every node's published allocations; see the module header. */
export async function clusterPage(
  published: PublishedView,
  filter: AllocationFilter,
  page: AllocationPageRequest,
): Promise<AllocationPage> {
  const token = decode(page.continue, 'cluster');
  // The first read is one block: its size says how many the next should be.
  let at: ClusterToken = token?.k === 'cluster' ? token : { k: 'cluster', b: 0, o: 0, w: 1 };
  const where = {
    ...defined({ pool: filter.rangePool, node: filter.node }),
  };
  const items: Allocation[] = [];
  for (;;) {
    const width = at.w ?? BLOCKS_PER_READ;
    const read = await published(where, { limit: width, ...defined({ continue: at.t }) });
    // Who really holds each address: a lent one is shown as its borrower's container (cluster-holders.ts).
    const shown = await holdersOf(read.items, published, filter.node !== undefined);
    for (let b = at.b; b < read.items.length; b++) {
      const held = (shown[b] ?? []).filter((a) => matches(a, filter));
      for (let o = b === at.b ? at.o : 0; o < held.length; o++) {
        if (items.length === page.limit) return { items, continue: encode({ ...at, b, o, w: width }) };
        items.push(held[o] as Allocation);
      }
    }
    if (read.continue === undefined) return { items };
    at = { k: 'cluster', t: read.continue, b: 0, o: 0, w: widthAfter(read.items, page.limit) };
  }
}

/** The published view as the pages of listings read it (recentReads). */
export interface RecentReads {
  /**
   * The view one page reads: a listing's first page (no continue token) reads afresh, so what was
   * published since any earlier listing shows at once; its later pages are answered from the reads
   * kept for them.
   */
  forPage(page: AllocationPageRequest): PublishedView;
}

/**
 * The published view, with its last reads kept (up to RECENT_READS, each for RECENT_READ_MS on the
 * monotonic clock): the next page of a listing asks again for the read its last page stopped in,
 * and is answered from here. A listing is not a snapshot (owners publish meanwhile), so an answer
 * some seconds old is what a page read then would have said. But a new listing never starts from a
 * kept read: one kept from a listing made just before an owner published would hide what it
 * published for up to RECENT_READ_MS (issue 34: `warren allocations --cluster` missed new
 * allocations for ~25 s, against a 2 s publication interval). Memory: a few reads of about a page.
 */
export function recentReads(published: PublishedView, clock: Clock): RecentReads {
  const kept = new Map<string, { at: number; read: Awaited<ReturnType<PublishedView>> }>();
  const view =
    (fresh: boolean): PublishedView =>
    async (filter, page) => {
      const key = JSON.stringify([
        filter.pool ?? null,
        filter.node ?? null,
        page?.limit ?? null,
        page?.continue ?? null,
      ]);
      const now = clock.monotonic();
      for (const [k, v] of kept) if (now - v.at > RECENT_READ_MS) kept.delete(k);
      const hit = fresh ? undefined : kept.get(key);
      if (hit !== undefined) return hit.read;
      const read = await published(filter, page);
      kept.delete(key); // kept again as the newest
      kept.set(key, { at: now, read });
      // Oldest first in a Map: the one read longest ago goes.
      while (kept.size > RECENT_READS) kept.delete(kept.keys().next().value as string);
      return read;
    };
  const [first, later] = [view(true), view(false)];
  return { forPage: (page) => (page.continue === undefined ? first : later) };
}
