/**
 * The WarrenPools section of the dashboard (issue 27): each pool the agent watches with its use as
 * its status says it, its selectors, sticky and unusable pools marked, untrusted names inert; the
 * IPAMClaims the agent follows; nothing at all where the agent watches neither.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentStatus, IpamClaimsReport, WarrenPoolReport } from '../../../src/api/status.ts';
import { renderDashboardBody } from '../../../src/agent/dashboard/page.ts';
import { NOW, dashboardData } from './fixtures.ts';

const watch = { state: 'watching' } as unknown as IpamClaimsReport['watch'];

type KubernetesStatus = NonNullable<AgentStatus['kubernetes']>;

function kubernetes(pools: readonly WarrenPoolReport[] | undefined, claims?: IpamClaimsReport): KubernetesStatus {
  return {
    pods: { state: 'watching', since: NOW, relists: 0, reconnects: 0 },
    releases: {
      tracked: 0,
      waiting: [],
      released: 0,
      gaveUp: 0,
      resyncs: 0,
      queue: { depth: 0, processing: 0, delayed: 0, retries: 0 },
    },
    events: { sent: 0, aggregated: 0, dropped: 0, refused: 0 },
    forbidden: [],
    planning: {
      directory: { pods: 0, namespaces: 0, namespacesListed: true, podGets: 0, namespaceGets: 0 },
      namespaces: watch,
      ...(pools === undefined ? {} : { pools: { ...watch, listed: true, list: pools, nodeLabelsRead: true } }),
    },
    ...(claims === undefined ? {} : { ipamClaims: claims }),
  } as unknown as KubernetesStatus;
}

const gold: WarrenPoolReport = {
  name: 'gold',
  ranges: ['10.40.0.0/24', 'fd00:40::/120'],
  capacity: '508',
  used: 127,
  blocks: 3,
  nodes: 2,
  nodeSelector: 'rack=r1',
  sticky: true,
};

describe('dashboard: WarrenPools and claims', () => {
  it("shows each pool's use as its status says, its selectors, sticky and unusable pools marked", () => {
    const page = renderDashboardBody(
      dashboardData(
        {},
        {
          kubernetes: kubernetes([
            gold,
            { name: 'broken', ranges: [], sticky: false, problem: 'ranges[0].range is not a CIDR' },
            { name: 'new', ranges: ['10.41.0.0/24'], sticky: false },
          ]),
        },
      ),
    );
    assert.match(page, /data-testid="warrenpools"/);
    const row = (name: string) =>
      new RegExp(`data-testid="warrenpool-row" data-pool="${name}">([\\s\\S]*?)</tr>`).exec(page)?.[1] ?? '';
    assert.match(row('gold'), /127 \/ 508 \(25\.0%\)/);
    assert.match(row('gold'), /sticky/);
    assert.match(row('gold'), /nodes rack=r1 · every namespace/);
    assert.match(row('gold'), /3 \/ 2/);
    assert.match(row('broken'), /unusable.*ranges\[0\]\.range is not a CIDR/s);
    assert.match(row('new'), /no status yet/);
    assert.doesNotMatch(row('new'), /sticky/);
  });

  it('renders a hostile pool name inert', () => {
    const page = renderDashboardBody(
      dashboardData({}, { kubernetes: kubernetes([{ ...gold, name: '<img src=x onerror=alert(1)>' }]) }),
    );
    assert.doesNotMatch(page, /<img src=x/);
    assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/);
  });

  it('says when no WarrenPool exists, and shows the IPAMClaims the agent follows', () => {
    const claims = {
      served: true,
      watch,
      cache: { claims: 4, listed: true, gets: 0 },
      statusWrites: { pending: 1, written: 6, gaveUp: 0 },
      upkeep: { ended: 2, pending: 0, lastError: 'claim vm1.blue: 503' },
    } as IpamClaimsReport;
    const page = renderDashboardBody(dashboardData({}, { kubernetes: kubernetes([], claims) }));
    assert.match(page, /data-testid="warrenpools-empty"/);
    assert.match(page, /data-testid="ipamclaims-count">4</);
    assert.match(page, /6, 1 pending/);
    assert.match(page, /claim vm1\.blue: 503/);
    const unserved = renderDashboardBody(
      dashboardData({}, { kubernetes: kubernetes(undefined, { ...claims, served: false }) }),
    );
    assert.match(unserved, /IPAMClaims are not served here \(no CRD\)/);
  });

  it('shows nothing where the agent watches neither pools nor claims', () => {
    assert.doesNotMatch(renderDashboardBody(dashboardData()), /warrenpools/);
    assert.doesNotMatch(renderDashboardBody(dashboardData({}, { kubernetes: kubernetes(undefined) })), /warrenpools/);
  });
});
