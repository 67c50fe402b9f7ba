/**
 * An allocation as a row of the SQLite store's `allocations` table (sqlite-schema.ts), both ways,
 * and an allocation filter as the WHERE clause that selects the same rows: the one mapping between
 * the store's records and its columns. Absent optional fields are NULL and read back absent; a
 * creation stamp is kept only whole (both its columns set).
 */
import type { Allocation } from '../ipam/allocation.ts';
import { blockKeyPrefix } from '../ipam/blocks.ts';
import type { AllocationFilter } from './store.ts';

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
  pool: 'pool',
  network: 'network',
  containerID: 'container_id',
  ifname: 'ifname',
  podNamespace: 'pod_namespace',
  podName: 'pod_name',
  podUID: 'pod_uid',
  node: 'node',
  address: 'address',
};

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
