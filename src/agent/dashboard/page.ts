/**
 * The agent's web dashboard (docs/operator.md), served on the metrics address:
 * `renderDashboardPage` is the whole document for `GET /`, `renderDashboardBody` the content of
 * its `<main>` for `GET /fragment`, which the page's script fetches to refresh itself.
 *
 * Guarantees:
 * - Server-rendered: the page is complete without its script; the script only swaps `<main>`'s
 *   content for a fresh fragment every few seconds (paused while the tab is hidden). When the agent
 *   does not answer, the last content stays and the header says since when.
 * - No request leaves the agent's own origin: the style sheet and the script are the agent's own
 *   resources (DASHBOARD_ASSETS, served beside the page), there are no fonts, images or links to
 *   elsewhere, and the icon is an empty data URL (so the browser does not ask for /favicon.ico).
 *   Nothing is inline — no `<style>`, no style attribute, no inline script — so it fits the
 *   server's Content-Security-Policy (`default-src 'none'`, style and script from 'self' only,
 *   `connect-src 'self'`), which refuses injected markup's style and script.
 * - Every value from the data is escaped (html.ts): container IDs, network names and reasons come
 *   from callers the agent does not trust, and render as text.
 * - A pure function of the data: the same data gives the same page (times relative to
 *   `generatedAt`, never to the clock).
 */
import type { DashboardData } from '../../api/dashboard.ts';
import { type Html, html } from './html.ts';
import { healthSection } from './health.ts';
import { nodesSection, poolsSection } from './pools.ts';
import { warrenPoolsSection } from './warren-pools.ts';
import { releasesSection } from './releases.ts';
import { failuresSection } from './failures.ts';
import { sourcesSection } from './sources.ts';
import { REFRESH_SCRIPT, REFRESH_SCRIPT_PATH, refreshScriptTag } from './refresh-script.ts';
import { STYLE, STYLE_PATH } from './style.ts';
import { timeOf } from './widgets.ts';

export interface DashboardPageOptions {
  /** Seconds between refreshes; default 5. Zero or less: the page does not refresh itself. */
  readonly refreshSeconds?: number;
}

export const DEFAULT_REFRESH_SECONDS = 5;

/** The page's own resources by path, as the server answers them (the page names them relatively). */
export const DASHBOARD_ASSETS: ReadonlyMap<string, { readonly contentType: string; readonly body: string }> = new Map([
  [`/${STYLE_PATH}`, { contentType: 'text/css; charset=utf-8', body: STYLE }],
  [`/${REFRESH_SCRIPT_PATH}`, { contentType: 'text/javascript; charset=utf-8', body: REFRESH_SCRIPT }],
]);

/** The content of `<main>`: what `/fragment` answers and the refresh swaps in. */
export function renderDashboardBody(data: DashboardData): string {
  return dashboardBody(data).toString();
}

/** The whole HTML document for `GET /`. */
export function renderDashboardPage(data: DashboardData, options: DashboardPageOptions = {}): string {
  const every = options.refreshSeconds ?? DEFAULT_REFRESH_SECONDS;
  const refreshes = Number.isFinite(every) && every > 0;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="color-scheme" content="light dark">
<title>Warren · ${data.status.node}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${STYLE_PATH}">
</head>
<body>
<header class="top"><h1>Warren</h1><span class="node">${data.status.node}</span>
<span id="refresh-state" class="refresh" data-testid="refresh-state">${
    refreshes ? `refreshes every ${every}s` : 'does not refresh'
  }</span></header>
<main id="dashboard">${dashboardBody(data)}</main>
${refreshes ? refreshScriptTag(Math.round(every * 1000)) : ''}
</body>
</html>
`.toString();
}

function dashboardBody(data: DashboardData): Html {
  return html`<p class="generated" data-testid="generated-at" data-at="${data.generatedAt}">as of ${timeOf(
    data.generatedAt,
    data.generatedAt,
  )} UTC</p>
${healthSection(data)}
${poolsSection(data)}
${warrenPoolsSection(data)}
${nodesSection(data)}
${releasesSection(data)}
${failuresSection(data)}
${sourcesSection(data)}`;
}
