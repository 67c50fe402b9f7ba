/**
 * An allocation as a row of the SQLite store's `allocations` table (sqlite/schema.ts), both ways,
 * and an allocation filter as the WHERE clause that selects the same rows: the one mapping between
 * the store's records and its columns. Absent optional fields are NULL and read back absent; a
 * creation stamp is kept only whole (both its columns set). Also the pools' summaries (`readLedgers`),
 * their counts read from the same tables.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import { blockKeyPrefix } from '../../ipam/blocks.ts';
import type { DatabaseSync } from 'node:sqlite';
import type { AllocationFilter, ListCursor, ListPage, LedgerDescription, LedgerSummary } from '../store.ts';

export interface AllocationRow {
  pool: string;
  address: string;
  network: string;
  container_id: string;
  ifname: string;
  pod_namespace: string | null;
  pod_name: string | null;
  pod_uid: string | null;
  node: string;
  netns: string | null;
  created_at: number;
  created_boot: string | null;
  created_mono: number | null;
}

/** Inserts one allocation; its values are `rowValues`, in this order. */
export const INSERT_ALLOCATION = `INSERT INTO allocations
  (pool, address, network, container_id, ifname, pod_namespace, pod_name, pod_uid, node, netns,
   created_at, created_boot, created_mono)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The values of INSERT_ALLOCATION for `a` in `pool`. */
export function rowValues(pool: string, a: Allocation): Array<string | number | null> {
  return [
    pool,
    a.address,
    a.network,
    a.containerID,
    a.ifname,
    a.podNamespace ?? null,
    a.podName ?? null,
    a.podUID ?? null,
    a.node,
    a.netns ?? null,
    a.createdAt,
    a.createdStamp?.boot ?? null,
    a.createdStamp?.at ?? null,
  ];
}

/** The allocation a row holds. */
export function toAllocation(row: AllocationRow): Allocation {
  const a: { -readonly [K in keyof Allocation]: Allocation[K] } = {
    pool: row.pool,
    address: row.address,
    network: row.network,
    containerID: row.container_id,
    ifname: row.ifname,
    node: row.node,
    createdAt: Number(row.created_at),
  };
  if (row.pod_namespace !== null) a.podNamespace = row.pod_namespace;
  if (row.pod_name !== null) a.podName = row.pod_name;
  if (row.pod_uid !== null) a.podUID = row.pod_uid;
  if (row.netns !== null) a.netns = row.netns;
  if (row.created_boot !== null && row.created_mono !== null) {
    a.createdStamp = { boot: row.created_boot, at: Number(row.created_mono) };
  }
  return a;
}

const FILTER_COLUMNS: Record<Exclude<keyof AllocationFilter, 'rangePool'>, string> = {
  ledger: 'pool',
  network: 'network',
  containerID: 'container_id',
  ifname: 'ifname',
  podNamespace: 'pod_namespace',
  podName: 'pod_name',
  podUID: 'pod_uid',
  node: 'node',
  address: 'address',
};

/**
 * One page of the allocations `filter` matches, after `after`, in primary-key order (pool,
 * address): SQLite walks the key from `after` and stops after `limit` rows and one more (which
 * says whether there is a next page).
 */
export function readPage(db: DatabaseSync, filter: AllocationFilter, limit: number, after?: ListCursor): ListPage {
  const { where, values } = whereClause(filter);
  const past = after === undefined ? '' : `${where === '' ? 'WHERE' : ' AND'} (pool, address) > (?, ?)`;
  const rows = db
    .prepare(`SELECT * FROM allocations ${where}${past} ORDER BY pool, address LIMIT ?`)
    .all(
      ...values,
      ...(after === undefined ? [] : [after.ledger, after.address]),
      limit + 1,
    ) as unknown as AllocationRow[];
  const items = rows.slice(0, limit).map(toAllocation);
  const last = items.at(-1);
  return rows.length > limit && last !== undefined
    ? { items, next: { ledger: last.pool, address: last.address } }
    : { items };
}

/** The WHERE clause (empty for no filter) selecting the rows `filter` matches, and its values. */
export function whereClause(filter: AllocationFilter): { where: string; values: string[] } {
  const clauses: string[] = [];
  const values: string[] = [];
  for (const [key, column] of Object.entries(FILTER_COLUMNS) as Array<[keyof typeof FILTER_COLUMNS, string]>) {
    const value = filter[key];
    if (value !== undefined) {
      clauses.push(`${column} = ?`);
      values.push(value);
    }
  }
  if (filter.rangePool !== undefined) {
    // The range pool itself, or any of its blocks.
    const prefix = blockKeyPrefix(filter.rangePool);
    clauses.push(`(pool = ? OR substr(pool, 1, ?) = ?)`);
    values.push(filter.rangePool, String(prefix.length), prefix);
  }
  return { where: clauses.length === 0 ? '' : `WHERE ${clauses.join(' AND ')}`, values };
}

/** Summaries of the pools whose key starts with `prefix`, in key order. */
export function readLedgers(db: DatabaseSync, prefix: string): LedgerSummary[] {
  const rows = db
    .prepare(
      `SELECT p.pool, p.revision, p.description, p.affinity,
         (SELECT count(*) FROM allocations a WHERE a.pool = p.pool) AS allocated,
         (SELECT count(*) FROM resting r WHERE r.pool = p.pool) AS resting
       FROM pools p WHERE substr(p.pool, 1, ?) = ? ORDER BY p.pool`,
    )
    .all(prefix.length, prefix) as Array<{
    pool: string;
    revision: number;
    description: string | null;
    affinity: string | null;
    allocated: number;
    resting: number;
  }>;
  return rows.map((r) => ({
    ledger: r.pool,
    revision: Number(r.revision),
    allocated: Number(r.allocated),
    resting: Number(r.resting),
    ...(r.description === null ? {} : { description: JSON.parse(r.description) as LedgerDescription }),
    ...(r.affinity === null ? {} : { affinity: r.affinity }),
  }));
}
