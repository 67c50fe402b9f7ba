/**
 * The reports an operator reads (pools, nodes, the plugin counts in the status) and the store
 * filter an allocation query means, built from what the store answered. Pure: no store, no clock,
 * no I/O; the same rows give the same report, so the service reads and these only shape.
 *
 * - A range split into blocks is reported whole (its blocks summed) and block by block; only
 *   blocks with a node count towards the range's `blocks`. A holding's use ledger is a row while a
 *   pod uses its address (or it rests), not after.
 * - A node is in the node report when it is announced, owns a block or holds an allocation; the
 *   report is sorted by node name. A bookkeeping record (ipam/bookkeeping.ts) is no node's
 *   allocation: a lender's placeholder counts as `lent` of the node whose block holds it, never as
 *   an allocation of the borrower it names, and a record naming no node makes no node appear.
 *   Where the store knows only this node's blocks (kubernetes), the other nodes' are added from
 *   what the cluster published (cluster-nodes.ts).
 * - An allocation query's `pool` is a range with every block it is split into; its address is
 *   compared in canonical form, and one that is not an IP address is a BAD_REQUEST.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { formatIP, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { bookkeepingNetwork, isBookkeeping } from '../../ipam/bookkeeping.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isUseKey } from '../../ipam/holding-key.ts';
import type { AllocationFilter, NodeRecord, LedgerSummary } from '../../store/store.ts';
import type { PluginsStatus } from '../../api/status.ts';
import type { AllocationQuery, NodeReport, PoolReport } from '../../api/protocol.ts';
import type { PublishedNode } from './cluster-nodes.ts';

/** Every pool; a range split into blocks is reported whole (its blocks summed) and block by block. */
export function poolReports(summaries: readonly LedgerSummary[]): PoolReport[] {
  // Block totals per range pool, in one pass.
  const totals = new Map<string, { allocated: number; resting: number; blocks: number }>();
  for (const b of summaries) {
    if (!isBlockKey(b.ledger)) continue;
    const t = totals.get(rangePoolOfKey(b.ledger)) ?? { allocated: 0, resting: 0, blocks: 0 };
    t.allocated += b.allocated;
    t.resting += b.resting;
    if (b.affinity !== undefined) t.blocks += 1;
    totals.set(rangePoolOfKey(b.ledger), t);
  }
  // A use ledger records pods' use of a held address: a row of its own only while a use is there.
  // The store keeps the pool's row (its revision) after the use ended; the report does not.
  const shown = summaries.filter((p) => !(isUseKey(p.ledger) && p.allocated === 0 && p.resting === 0));
  return shown.map((p) => {
    let { allocated, resting } = p;
    let blocks = 0;
    if (p.description?.blockPrefix !== undefined) {
      const t = totals.get(p.ledger) ?? { allocated: 0, resting: 0, blocks: 0 };
      ({ allocated, resting, blocks } = t);
    }
    const capacity = p.description === undefined ? undefined : Number(p.description.capacity);
    return {
      pool: p.ledger,
      ...(p.description === undefined
        ? {}
        : {
            subnet: p.description.subnet,
            first: p.description.first,
            last: p.description.last,
            capacity: p.description.capacity,
          }),
      allocated,
      resting,
      ...(capacity === undefined || capacity === 0 ? {} : { utilisation: allocated / capacity }),
      ...defined({ node: p.affinity }),
      ...(p.description?.blockPrefix === undefined ? {} : { blockPrefix: p.description.blockPrefix, blocks }),
    };
  });
}

/** Nodes sharing the store: announced ones, and any that still own blocks or allocations. */
export function nodeReports(
  live: readonly NodeRecord[],
  summaries: readonly LedgerSummary[],
  allocations: readonly Allocation[],
  published: ReadonlyMap<string, PublishedNode> = new Map(),
): NodeReport[] {
  const nodes = new Map<
    string,
    { alive: boolean; since?: string; version?: string; blocks: string[]; allocations: number; lent?: number }
  >();
  const entry = (name: string) => {
    let n = nodes.get(name);
    if (n === undefined) {
      n = { alive: false, blocks: [], allocations: 0 };
      nodes.set(name, n);
    }
    return n;
  };
  for (const record of live)
    Object.assign(entry(record.node), {
      alive: true,
      since: new Date(record.since).toISOString(),
      ...defined({ version: record.version }),
    });
  const owners = new Map<string, string>();
  for (const p of summaries)
    if (p.affinity !== undefined) {
      entry(p.affinity).blocks.push(p.ledger);
      owners.set(p.ledger, p.affinity);
    }
  for (const a of allocations) {
    if (!isBookkeeping(a)) {
      entry(a.node).allocations += 1;
      continue;
    }
    const lender = a.network === bookkeepingNetwork('lent') ? owners.get(a.pool) : undefined;
    if (lender !== undefined) entry(lender).lent = (entry(lender).lent ?? 0) + 1;
  }
  // Other nodes as the cluster published them (cluster-nodes.ts), where this store knows only its own.
  for (const [name, p] of published) {
    const n = entry(name);
    n.blocks.push(...p.blocks);
    n.allocations += p.allocations;
    if (p.lent > 0) n.lent = (n.lent ?? 0) + p.lent;
  }
  return [...nodes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([node, n]) => ({ node, ...n }));
}

/** The store filter an allocation query means; throws BAD_REQUEST for an address that is not one. */
export function allocationFilterOf(query: AllocationQuery): AllocationFilter {
  // The API's `pool` means what users mean by a pool: a range, with every block it is split into.
  const { pool, ...rest } = query;
  const filter: AllocationFilter = pool === undefined ? rest : { ...rest, rangePool: pool };
  if (filter.address === undefined) return filter;
  const ip = parseIP(filter.address);
  if (ip === undefined) throw new WarrenError('BAD_REQUEST', `address "${filter.address}" is not an IP address`);
  return { ...filter, address: formatIP(ip) };
}

/** The plugin registry's counts, as the status shows them. */
export function pluginCounts(status: PluginsStatus): { registered: number; refused: number; retrying: number } {
  return { registered: status.registered, refused: status.refused, retrying: status.retrying };
}
