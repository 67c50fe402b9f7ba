/**
 * The dashboard's first section: is the agent well. Whether it serves ADD now (and why not), its
 * store's health, how long it has run, and what it holds; on a store shared by nodes, the cluster
 * as this agent sees it. Red means an ADD would fail now; nothing else on the page is red for that.
 */
import type { DashboardData } from '../../api/dashboard.ts';
import { type Html, html } from './html.ts';
import { formatDuration } from './figures.ts';
import { badge, facts, section, timeOf } from './widgets.ts';

export function healthSection(data: DashboardData): Html {
  const s = data.status;
  const now = data.generatedAt;
  const ready = html`<div class="tile" data-testid="ready" data-ready="${String(s.ready)}">
<span class="label">Serving ADD</span>${s.ready ? badge('good', 'ready') : badge('bad', 'not ready')}${
    s.notReady === undefined ? '' : html`<span class="why">${s.notReady}</span>`
  }</div>`;
  const store = html`<div class="tile" data-testid="store-health" data-healthy="${String(s.store.healthy)}">
<span class="label">Store</span>${
    s.store.healthy ? badge('good', 'healthy') : badge('bad', 'unhealthy')
  }<span class="why">${s.store.description}</span>${
    s.store.error === undefined ? '' : html`<span class="why error">${s.store.error}</span>`
  }</div>`;
  const upFor = html`<span class="figure">${formatDuration(s.uptimeSeconds)}</span>`;
  const since = html`<span class="why">since ${timeOf(s.startedAt, now)}</span>`;
  const uptime = html`<div class="tile" data-testid="uptime"><span class="label">Up</span>${upFor}${since}</div>`;
  const held = html`<span class="figure" data-testid="allocations-total">${s.allocations}</span>`;
  const inPools = html`<span class="why">allocations in ${s.pools} ${s.pools === 1 ? 'range' : 'ranges'}</span>`;
  // Addresses kept for no container (ipam/bookkeeping.ts) are told apart, not counted as allocations.
  const lent = s.bookkeeping?.lent;
  const lentOut =
    lent === undefined ? '' : html`<span class="why" data-testid="lent-total">${lent} lent to other nodes</span>`;
  const holds = html`<div class="tile"><span class="label">Holds</span>${held}${inPools}${lentOut}</div>`;
  const cluster =
    s.cluster === undefined
      ? ''
      : facts([
          [
            'Live nodes',
            s.cluster.liveNodes.length === 0 ? html`<span class="muted">none</span>` : s.cluster.liveNodes.join(', '),
          ],
          ['Blocks held here', s.cluster.ownBlocks],
          ['Announced', s.cluster.thisNodeAnnounced ? badge('good', 'yes') : badge('warn', 'not yet')],
          // What the cluster store could not tell now: the figures above are as last read.
          ...(s.cluster.unread === undefined
            ? []
            : ([['Not read now', html`<span class="why error">${s.cluster.unread}</span>`]] as const)),
        ]);
  const metrics =
    s.metrics?.error === undefined ? '' : html`<p class="why error">metrics endpoint: ${s.metrics.error}</p>`;
  return section(
    'Agent',
    'health',
    html`<div class="tiles">${ready}${store}${uptime}${holds}</div>${cluster}${metrics}`,
    html`node <b data-testid="node-name">${s.node}</b> · version ${s.version} · pid ${s.pid}`,
  );
}
