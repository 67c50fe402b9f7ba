/**
 * `warren allocations --cluster`: every node's allocations as published, streamed. The listing can
 * hold a million allocations (issue 26), so it is never held whole: each page the agent answers is
 * printed and let go before the next is asked for, and printing waits while the output is behind
 * (`CliIO.drain`), so the command's memory is about one page whatever the cluster holds.
 *
 * Guarantees:
 * - `--json` prints what `jsonText(list)` of the whole list would (format.ts: RFC 3339 moments), byte for byte;
 * - the order is the agent's (block by block as published), not sorted: sorting needs the whole;
 * - `--container` resolves a prefix among the allocations whose container ID begins with it, kept
 *   as they pass (a prefix selects few), then prints those; the rest are never kept;
 * - the table's columns are as wide as their widest cell seen so far: a later, wider cell widens the
 *   rows after it, not those already printed.
 */
import type { ApiClient } from '../api/client.ts';
import { type Allocation, type AllocationQuery, MAX_ALLOCATION_PAGE } from '../api/protocol.ts';
import { defined } from '../core/defined.ts';
import { bookkeepingLabel } from '../ipam/bookkeeping.ts';
import { useLedgerOf } from '../ipam/holding-key.ts';
import { age, momentsAsText, printable } from './format.ts';
import type { CliIO } from './io.ts';

export const ALLOCATION_HEADERS = [
  'ADDRESS',
  'POOL',
  'NETWORK',
  'CONTAINER',
  'IF',
  'POD',
  'HELD BY',
  'NODE',
  'AGE',
] as const;

/** One allocation as a row of the allocations table. */
export function allocationRow(a: Allocation, now: number): string[] {
  return [
    a.address,
    // A pod's use of a held address (ipam/holding-key.ts): its range, the holder in HELD BY.
    useLedgerOf(a.pool)?.rangePool ?? a.pool,
    a.network,
    // A bookkeeping record holds the address for no container: say what it is (`lent to n2`).
    bookkeepingLabel(a) ?? (a.containerID.length > 16 ? a.containerID.slice(0, 16) : a.containerID),
    a.ifname,
    a.podName === undefined ? '-' : a.podNamespace === undefined ? a.podName : `${a.podNamespace}/${a.podName}`,
    // What the address belongs to beyond the pod: a StatefulSet ordinal, an IPAMClaim.
    useLedgerOf(a.pool)?.holder ?? '-',
    a.node,
    age(a.createdAt, now),
  ];
}

export interface ClusterListing {
  readonly json: boolean;
  /** A --container value: its resolution among the allocations whose ID begins with it. */
  readonly container?: string | undefined;
  readonly resolve: (candidates: readonly Allocation[], given: string) => string;
  /** Allocations a page (default MAX_ALLOCATION_PAGE: fewest round trips, each page bounded). */
  readonly pageSize?: number;
}

/** Streams every node's published allocations the query selects to `io`; see the module header. */
export async function streamClusterAllocations(
  agent: ApiClient,
  query: AllocationQuery,
  o: ClusterListing,
  io: CliIO,
): Promise<number> {
  const pages = pagesOf(agent, query, o.pageSize ?? MAX_ALLOCATION_PAGE);
  const out = o.json ? jsonArray(io) : tableOut(io);
  if (o.container !== undefined) {
    const given = o.container;
    const candidates: Allocation[] = [];
    for await (const page of pages) candidates.push(...page.filter((a) => a.containerID.startsWith(given)));
    const id = o.resolve(candidates, given);
    await out.add(candidates.filter((a) => a.containerID === id));
  } else {
    for await (const page of pages) await out.add(page);
  }
  out.end();
  return 0;
}

/** The agent's pages, the next asked for while this one is printed. */
async function* pagesOf(agent: ApiClient, query: AllocationQuery, limit: number): AsyncGenerator<Allocation[]> {
  const ask = (token: string | undefined) =>
    agent.allocationsPage(query, { limit, cluster: true, ...defined({ continue: token }) });
  let next = ask(undefined);
  for (;;) {
    const page = await next;
    const token = page.continue;
    if (token !== undefined) {
      next = ask(token);
      // Handled when awaited; until then an early failure must not count as unhandled.
      next.catch(() => {});
    }
    yield [...page.items];
    if (token === undefined) return;
  }
}

interface Out {
  add(items: readonly Allocation[]): Promise<void>;
  end(): void;
}

/** Waits while the output is behind, so a fast agent and a slow reader hold no more than a page here. */
async function written(io: CliIO, text: string): Promise<void> {
  if (text === '') return;
  io.out(text);
  await io.drain?.();
}

/** The JSON of the whole list, as `jsonText(list)` writes it, an item at a time. */
function jsonArray(io: CliIO): Out {
  let first = true;
  return {
    async add(items) {
      let text = '';
      for (const item of items) {
        // The item as it sits one level deep in the array: every line of it indented by two.
        text += `${first ? '[\n' : ',\n'}  ${JSON.stringify(item, momentsAsText, 2).replaceAll('\n', '\n  ')}`;
        first = false;
      }
      await written(io, text);
    },
    end() {
      io.out(first ? '[]\n' : '\n]\n');
    },
  };
}

/** The allocations table, a page of rows at a time (format.ts `table`, its widths growing as it goes). */
function tableOut(io: CliIO): Out {
  const widths: number[] = ALLOCATION_HEADERS.map((h) => h.length);
  let rows = 0;
  const now = Date.now();
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return {
    async add(items) {
      const shown = items.map((a) => allocationRow(a, now).map(printable));
      for (const row of shown) for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
      const text = shown.map((r) => `${line(r)}\n`).join('');
      await written(io, rows === 0 && shown.length > 0 ? `${line(ALLOCATION_HEADERS)}\n${text}` : text);
      rows += shown.length;
    },
    end() {
      if (rows === 0) io.out('no allocations\n');
    },
  };
}
