/**
 * WarrenPools on the dashboard (the kubernetes store): each pool the agent watches, with its use
 * as its status says it (capacity, addresses handed out on every node, the blocks and nodes they
 * are in), its selectors, whether its StatefulSet addresses are sticky, and why it cannot serve
 * when its spec does not parse; then KubeVirt's IPAMClaims as the agent follows them. Nothing is
 * read for it: the agent's status already carries both (its pool and claim watches). Shown only
 * where the agent watches WarrenPools or IPAMClaims.
 */
import type { DashboardData } from '../../api/dashboard.ts';
import type { IpamClaimsReport, WarrenPoolReport } from '../../api/status.ts';
import { utilisationOf } from './figures.ts';
import { type Html, html } from './html.ts';
import { badge, emptyState, facts, section, utilisationBar } from './widgets.ts';

function poolRow(p: WarrenPoolReport): Html {
  const used = p.used ?? 0;
  const use =
    p.capacity === undefined
      ? html`<span class="muted">no status yet</span>`
      : html`${used} / ${p.capacity} (${utilisationOf(used, p.capacity)?.text ?? '—'})`;
  const where = [
    p.nodeSelector === undefined ? 'every node' : `nodes ${p.nodeSelector}`,
    p.namespaceSelector === undefined ? 'every namespace' : `namespaces ${p.namespaceSelector}`,
  ].join(' · ');
  const problem = p.problem === undefined ? '' : html` ${badge('bad', 'unusable', 'warrenpool-problem')} ${p.problem}`;
  return html`<tr data-testid="warrenpool-row" data-pool="${p.name}">
<th scope="row">${p.name}${p.sticky ? html` ${badge('good', 'sticky')}` : ''}</th>
<td class="mono">${p.ranges.join(', ')}</td>
<td class="bar-cell">${utilisationBar(p.capacity === undefined ? undefined : utilisationOf(used, p.capacity))}</td>
<td class="num" data-testid="warrenpool-use">${use}</td>
<td class="num">${p.blocks ?? '—'} / ${p.nodes ?? '—'}</td>
<td>${where}${problem}</td></tr>`;
}

function claimsFacts(c: IpamClaimsReport): Html {
  if (c.served === false)
    return html`<p class="muted" data-testid="ipamclaims-state">IPAMClaims are not served here (no CRD)</p>`;
  const errors = [c.statusWrites.lastError, c.upkeep.lastError].filter((e): e is string => e !== undefined);
  return facts([
    [
      'Claims watched',
      html`<span data-testid="ipamclaims-count">${c.cache.claims}</span>${c.cache.listed ? '' : ' (not listed yet)'}`,
    ],
    [
      'Statuses written',
      `${c.statusWrites.written}${c.statusWrites.pending > 0 ? `, ${c.statusWrites.pending} pending` : ''}`,
    ],
    ['Holdings ended', `${c.upkeep.ended}${c.upkeep.pending > 0 ? `, ${c.upkeep.pending} to end` : ''}`],
    ...(errors.length === 0 ? [] : ([['Last error', html`<span class="error">${errors.join('; ')}</span>`]] as const)),
  ]);
}

export function warrenPoolsSection(data: DashboardData): Html {
  const kube = data.status.kubernetes;
  const pools = kube?.planning?.pools;
  const claims = kube?.ipamClaims;
  if (pools === undefined && claims === undefined) return html``;
  const table =
    pools === undefined
      ? html``
      : pools.list.length === 0
        ? emptyState('No WarrenPool: configs name their ranges inline.', 'warrenpools-empty')
        : html`<table class="grid">
<thead><tr><th>WarrenPool</th><th>Ranges</th><th>Utilisation</th><th class="num">Used / capacity</th>
<th class="num">Blocks / nodes</th><th>Serves</th></tr></thead>
<tbody>${pools.list.map(poolRow)}</tbody></table>`;
  return section(
    'WarrenPools and claims',
    'warrenpools',
    html`${table}${claims === undefined ? '' : claimsFacts(claims)}`,
    "as their status says: every node's use",
  );
}
