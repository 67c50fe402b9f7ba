/**
 * Releases on the dashboard: how many addresses each source released since the agent started (all
 * sources listed, in the protocol's order, so a zero is visible as a zero), and the latest
 * releases, newest first, each with its source and the reason in words.
 *
 * Every field of a release record comes from a caller or a runtime the agent does not trust
 * (container IDs, network names, reasons that quote paths); the `html` template escapes them.
 * Container IDs are shortened to the 12 characters runtimes show, the whole ID on hover.
 */
import { type DashboardData, RELEASE_SOURCES, type ReleaseRecord } from '../../api/dashboard.ts';
import { type Html, html } from './html.ts';
import { shortId } from './figures.ts';
import { emptyState, section, timeOf } from './widgets.ts';

function countsBySource(data: DashboardData): Html {
  const total = RELEASE_SOURCES.reduce((sum, source) => sum + (data.releasesBySource[source] ?? 0), 0);
  const chips = RELEASE_SOURCES.map((source) => {
    const n = data.releasesBySource[source] ?? 0;
    return html`<li class="chip${n === 0 ? ' zero' : ''}" data-testid="release-count" data-source="${
      source
    }"><span>${source}</span><b>${n}</b></li>`;
  });
  return html`<ul class="chips" data-testid="releases-by-source">${
    chips
  }<li class="chip total"><span>total</span><b data-testid="releases-total">${total}</b></li></ul>`;
}

function releaseRow(r: ReleaseRecord, now: string): Html {
  const source = r.adapter === undefined ? r.source : `${r.source} · ${r.adapter}`;
  return html`<tr data-testid="release-row" data-source="${r.source}">
<td>${timeOf(r.at, now)}</td><td><span class="source ${r.source}">${source}</span></td><td class="reason">${
    r.reason
  }</td>
<td class="mono" title="pool ${r.pool}">${r.address}</td><td>${r.network}</td>
<td class="mono" title="${r.containerID}">${shortId(r.containerID)}</td><td class="mono">${r.ifname}</td></tr>`;
}

export function releasesSection(data: DashboardData): Html {
  const list =
    data.releases.length === 0
      ? emptyState('No address released since the agent started.', 'releases-empty')
      : html`<table class="grid releases">
<thead><tr><th>Time (UTC)</th><th>Source</th><th>Reason</th><th>Address</th><th>Network</th><th>Container</th>
<th>Interface</th></tr></thead>
<tbody>${data.releases.map((r) => releaseRow(r, data.generatedAt))}</tbody></table>`;
  const aside = data.releases.length === 0 ? undefined : `the latest ${data.releases.length}, newest first`;
  return section('Releases', 'releases', html`${countsBySource(data)}${list}`, aside);
}
