/**
 * Failed CNI calls on the dashboard: how many since the agent started, by network, command and
 * code (the most first), and the latest ones, newest first, with the message the runtime was given.
 * Under Multus every code reaches the pod's events as 999, so the message is what names the cause
 * there (docs/error-codes.md): it is shown whole here, beside the code Warren answered.
 *
 * Every field comes from a caller the agent does not trust (network names, container IDs, messages
 * quoting them); the `html` template escapes them.
 */
import type { CniFailure, CniFailureCount, DashboardData } from '../../api/dashboard.ts';
import { type Html, html } from './html.ts';
import { shortId } from './figures.ts';
import { emptyState, section, timeOf } from './widgets.ts';

/** The network as shown: `(none)` for a config without a name. */
function networkText(network: string): Html {
  return network === '' ? html`<span class="muted">(none)</span>` : html`${network}`;
}

function countRow(c: CniFailureCount): Html {
  const data = html`data-network="${c.network}" data-command="${c.command}" data-code="${String(c.code)}"`;
  return html`<tr data-testid="failure-count" ${data}><td>${networkText(c.network)}</td><td>${c.command}</td>
<td class="num">${c.code}</td><td class="num">${c.count}</td></tr>`;
}

function failureRow(f: CniFailure, now: string): Html {
  return html`<tr data-testid="failure-row" data-code="${String(f.code)}">
<td>${timeOf(f.at, now)}</td><td>${networkText(f.network)}</td><td>${f.command}</td><td class="num">${f.code}</td>
<td class="reason">${f.message}</td><td class="mono" title="${f.containerID}">${shortId(f.containerID)}</td></tr>`;
}

/** Absent from an older agent's data: then nothing is shown. */
export function failuresSection(data: DashboardData): Html {
  const counts = data.failuresByCode;
  const recent = data.failures;
  if (counts === undefined || recent === undefined) return html``;
  if (counts.length === 0)
    return section(
      'Failed calls',
      'failures',
      emptyState('No CNI call failed since the agent started.', 'failures-empty'),
    );
  const total = counts.reduce((n, c) => n + c.count, 0);
  const byCode = html`<table class="grid failures-by-code">
<thead><tr><th>Network</th><th>Command</th><th class="num">Code</th><th class="num">Calls</th></tr></thead>
<tbody>${counts.map(countRow)}</tbody></table>`;
  const latest = html`<table class="grid failures">
<thead><tr><th>Time (UTC)</th><th>Network</th><th>Command</th><th class="num">Code</th><th>Message</th>
<th>Container</th></tr></thead>
<tbody>${recent.map((f) => failureRow(f, data.generatedAt))}</tbody></table>`;
  return section(
    'Failed calls',
    'failures',
    html`${byCode}${latest}`,
    html`<span data-testid="failures-total">${total}</span> since start; the latest ${recent.length}, newest first`,
  );
}
