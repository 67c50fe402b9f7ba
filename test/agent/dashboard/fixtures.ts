/**
 * Dashboard data to render: a healthy agent on SQLite with nothing on, by default, and builders for
 * the parts tests vary (pools, releases, the sources' statuses).
 */
import {
  type DashboardData,
  RELEASE_SOURCES,
  type ReleaseRecord,
  type ReleaseSource,
} from '../../../src/api/dashboard.ts';
import type { PoolReport } from '../../../src/api/protocol.ts';

export const NOW = '2025-03-04T10:20:30.000Z';

export function dashboardData(
  over: Partial<DashboardData> = {},
  status: Partial<DashboardData['status']> = {},
): DashboardData {
  return {
    generatedAt: NOW,
    status: {
      node: 'node-a',
      pid: 4242,
      version: '0.1.0',
      startedAt: '2025-03-04T08:00:00.000Z',
      uptimeSeconds: 8430,
      socket: '/run/warren/warren.sock',
      store: { description: 'sqlite /var/lib/warren/warren.db', healthy: true },
      ready: true,
      pools: 0,
      allocations: 0,
      reconciler: {
        journalDir: '/var/lib/warren/journal',
        listed: true,
        pending: [],
        rejected: [],
        unread: [],
        releasedFromJournal: 0,
        recentErrors: [],
      },
      ...status,
    },
    pools: [],
    releases: [],
    releasesBySource: bySource({}),
    ...over,
  };
}

export function bySource(counts: Partial<Record<ReleaseSource, number>>): Record<ReleaseSource, number> {
  return Object.fromEntries(RELEASE_SOURCES.map((s) => [s, counts[s] ?? 0])) as Record<ReleaseSource, number>;
}

export function range(
  pool: string,
  allocated: number,
  capacity: string | undefined,
  over: Partial<PoolReport> = {},
): PoolReport {
  return {
    pool,
    subnet: pool.split('@')[0] ?? pool,
    ...(capacity === undefined ? {} : { capacity }),
    allocated,
    resting: 0,
    ...over,
  };
}

export function release(n: number, over: Partial<ReleaseRecord> = {}): ReleaseRecord {
  return {
    at: new Date(Date.parse(NOW) - n * 1_000).toISOString(),
    source: 'cni-del',
    reason: 'CNI DEL',
    address: `10.1.${Math.floor(n / 250)}.${(n % 250) + 2}`,
    pool: '10.1.0.0/16',
    network: 'podnet',
    containerID: `${n.toString(16).padStart(8, '0')}${'c0ffee'.repeat(9)}`,
    ifname: 'eth0',
    ...over,
  };
}

/** A busy node: `pools` ranges, `releases` releases across the sources (for measuring the page). */
export function busyDashboard(pools: number, releases: number): DashboardData {
  return dashboardData(
    {
      pools: Array.from({ length: pools }, (_, i) =>
        range(`10.${i}.0.0/24@net-${i}`, (i * 37) % 254, '254', {
          first: `10.${i}.0.1`,
          last: `10.${i}.0.254`,
          resting: i % 5,
        }),
      ),
      releases: Array.from({ length: releases }, (_, i) =>
        release(i, {
          source: RELEASE_SOURCES[i % RELEASE_SOURCES.length] as ReleaseSource,
          reason: `released for test reason number ${i}: network namespace /run/netns/cni-${i} is gone`,
        }),
      ),
      releasesBySource: bySource(Object.fromEntries(RELEASE_SOURCES.map((s, i) => [s, i * 3]))),
    },
    { pools, allocations: 1234 },
  );
}
