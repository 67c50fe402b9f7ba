/**
 * Where releases come from, on the dashboard (the config manager's card beside them is
 * cni-config-card.ts): one card each, with its state as a coloured badge and the facts an operator
 * looks for when addresses are not coming back (what is pending and why, the last error, when it
 * last worked). The journal is always there; the others only when their source is on (their status
 * present), so an absent card means "off", never "broken".
 *
 * Each state maps to a tone in an exhaustive switch: a state added to the protocol fails the
 * typecheck here until the page knows what it means.
 */
import type {
  ContainerdState,
  ContainerdStatus,
  KubernetesStatus,
  ListWatchStatus,
  PluginEntry,
  PluginState,
  PluginsStatus,
  ReconcilerStatus,
} from '../../api/status.ts';
import type { DashboardData } from '../../api/dashboard.ts';
import { type Html, html } from './html.ts';
import { shortId } from './figures.ts';
import { type Tone, badge, card, errorText, facts, firstOf, section, timeOf } from './widgets.ts';
import { cniConfigCard } from './cni-config-card.ts';

function containerdTone(state: ContainerdState): Tone {
  switch (state) {
    case 'subscribed':
      return 'good';
    case 'waiting-for-socket':
    case 'connecting':
    case 'reconnecting':
      return 'warn';
    case 'stopped':
      return 'idle';
    default: {
      const never: never = state;
      return never;
    }
  }
}

function listWatchTone(state: ListWatchStatus['state']): Tone {
  switch (state) {
    case 'watching':
      return 'good';
    case 'listing':
      return 'warn';
    case 'backing-off':
      return 'bad';
    case 'stopped':
      return 'idle';
    default: {
      const never: never = state;
      return never;
    }
  }
}

function pluginTone(state: PluginState): Tone {
  switch (state) {
    case 'registered':
      return 'good';
    case 'registering':
    case 'unregistering':
    case 'retrying':
      return 'warn';
    case 'refused':
      return 'bad';
    default: {
      const never: never = state;
      return never;
    }
  }
}

const now = (data: DashboardData): string => data.generatedAt;
const count = (n: number, tone: Tone): Html => (n === 0 ? html`0` : badge(tone, String(n)));

function journalCard(r: ReconcilerStatus, now: string): Html {
  const state = !r.listed
    ? { tone: 'warn' as const, text: 'listing' }
    : r.rejected.length > 0
      ? { tone: 'bad' as const, text: 'set aside' }
      : r.pending.length > 0
        ? { tone: 'warn' as const, text: 'pending' }
        : { tone: 'good' as const, text: 'drained' };
  const last = r.lastReconcile;
  const pending =
    r.pending.length === 0
      ? ''
      : html`<h4>Pending</h4><ul class="list">${firstOf(
          r.pending,
          10,
          (p) =>
            html`<li data-testid="journal-pending"><span class="mono" title="${p.containerID}">${shortId(
              p.containerID,
            )}</span> ${p.network}/${p.ifname} · ${p.failures} ${p.failures === 1 ? 'failure' : 'failures'}${
              p.nextAttemptAt === undefined ? '' : html` · next ${timeOf(p.nextAttemptAt, now, { relative: true })}`
            }${p.lastError === undefined ? '' : html` <span class="error">${p.lastError}</span>`}</li>`,
        )}</ul>`;
  const rejected =
    r.rejected.length === 0
      ? ''
      : html`<h4>Set aside in rejected/</h4><ul class="list">${firstOf(
          r.rejected,
          10,
          (x) => html`<li><span class="mono">${x.name}</span> <span class="error">${x.reason}</span></li>`,
        )}</ul>`;
  const errors =
    r.recentErrors.length === 0
      ? ''
      : html`<h4>Recent errors</h4><ul class="list">${firstOf(
          [...r.recentErrors].reverse(),
          3,
          (e) => html`<li>${timeOf(e.at, now)} <span class="error">${e.message}</span></li>`,
        )}</ul>`;
  return card(
    'Journal',
    'source-journal',
    state,
    html`${facts([
      ['Directory', html`<span class="mono">${r.journalDir}</span>`],
      ['Pending', html`<span data-testid="journal-pending-count">${count(r.pending.length, 'warn')}</span>`],
      ['Set aside', html`<span data-testid="journal-rejected-count">${count(r.rejected.length, 'bad')}</span>`],
      ['Released from it', r.releasedFromJournal],
      [
        'Last reconcile',
        last === undefined
          ? html`<span class="muted">not yet</span>`
          : html`${timeOf(last.at, now, { relative: true })} · ${last.durationMs} ms · released ${
              last.journalReleased
            } from the journal, ${last.netnsReleased} by the namespace sweep${
              last.journalFailed > 0 ? html` · <span class="error">${last.journalFailed} failed</span>` : ''
            }`,
      ],
      [
        'Sweep could not look',
        last === undefined || last.unobservable.length === 0
          ? undefined
          : html`<span class="error">${last.unobservable.join('; ')}</span>`,
      ],
    ])}${pending}${rejected}${errors}`,
  );
}

function containerdCard(c: ContainerdStatus, now: string): Html {
  const q = c.releases.queue;
  return card(
    'containerd',
    'source-containerd',
    { tone: containerdTone(c.state), text: c.state },
    facts([
      ['Since', timeOf(c.since, now, { relative: true })],
      ['Socket', html`<span class="mono">${c.socket}</span>`],
      ['Namespaces', c.namespaces.join(', ')],
      ['Events', html`${c.events} read · ${c.skipped} skipped · ${c.malformed} malformed`],
      ['Released', c.releases.released],
      [
        'Exited, waiting',
        c.releases.exited.length === 0
          ? undefined
          : html`${c.releases.exited.length} (e.g. <span class="mono" title="${
              c.releases.exited[0]?.containerID
            }">${shortId(c.releases.exited[0]?.containerID ?? '')}</span>: ${c.releases.exited[0]?.waitingFor})`,
      ],
      [
        'Queued',
        q.length === 0
          ? undefined
          : html`${q.length} ${q.length === 1 ? 'container' : 'containers'}${
              q.some((k) => k.lastError !== undefined)
                ? html` · <span class="error">${q.find((k) => k.lastError !== undefined)?.lastError}</span>`
                : ''
            }`,
      ],
      [
        'Last resync',
        c.lastResync === undefined
          ? undefined
          : html`${timeOf(c.lastResync.at, now, { relative: true })} · ${c.lastResync.containers} containers`,
      ],
      ['Last error', errorText(c.lastError)],
    ]),
  );
}

function listWatchFacts(
  prefix: string,
  lw: ListWatchStatus,
  now: string,
): Array<readonly [string, Html | string | number | undefined]> {
  return [
    [`${prefix} since`, timeOf(lw.since, now, { relative: true })],
    [
      `${prefix} listed`,
      lw.lastListedAt === undefined
        ? undefined
        : html`${timeOf(lw.lastListedAt, now, { relative: true })} · ${lw.relists} relists · ${
            lw.reconnects
          } reconnects`,
    ],
    [`${prefix} refused`, errorText(lw.forbidden)],
    [`${prefix} last error`, errorText(lw.lastError)],
  ];
}

function kubernetesCard(k: KubernetesStatus, now: string): Html {
  const r = k.releases;
  const nodes = k.nodes;
  return card(
    'Kubernetes',
    'source-kubernetes',
    { tone: listWatchTone(k.pods.state), text: `pods ${k.pods.state}` },
    html`${facts([
      ...listWatchFacts('Pods', k.pods, now),
      [
        'Releases',
        html`${r.released} released · ${r.tracked} tracked · ${r.waiting.length} waiting${
          r.gaveUp > 0 ? html` · <span class="error">${r.gaveUp} gave up</span>` : ''
        }`,
      ],
      [
        'Queue',
        html`${r.queue.depth} queued · ${r.queue.processing} processing · ${r.queue.delayed} delayed · ${
          r.queue.retries
        } retries`,
      ],
      [
        'Nodes',
        nodes === undefined
          ? undefined
          : html`${
              nodes.watcher ? badge(listWatchTone(nodes.state), nodes.state) : badge('idle', 'watched elsewhere')
            } · ${nodes.gone.length} gone · ${nodes.forgotten.length} forgotten${
              nodes.forgetError === undefined ? '' : html` · <span class="error">${nodes.forgetError}</span>`
            }`,
      ],
      ['Events', html`${k.events.sent} sent · ${k.events.aggregated} aggregated · ${k.events.dropped} dropped`],
      ['Forbidden', k.forbidden.length === 0 ? undefined : html`<span class="error">${k.forbidden.join(', ')}</span>`],
    ])}${
      r.waiting.length === 0
        ? ''
        : html`<h4>Waiting</h4><ul class="list">${firstOf(
            r.waiting,
            10,
            (w) => html`<li>${w.pod} · ${w.because} · until ${timeOf(w.until, now)}</li>`,
          )}</ul>`
    }`,
  );
}

function pluginRow(p: PluginEntry, now: string): Html {
  return html`<tr data-testid="plugin-row" data-state="${p.state}"><td class="mono">${p.socket}</td><td>${badge(
    pluginTone(p.state),
    p.state,
  )}</td>
<td>${p.name ?? ''}${p.type === undefined ? '' : html` <span class="muted">(${p.type})</span>`}</td><td>${timeOf(
    p.since,
    now,
    { relative: true },
  )}</td>
<td>${p.error === undefined ? '' : html`<span class="error">${p.error}</span>`}${
    p.retryAt === undefined ? '' : html` · retry ${timeOf(p.retryAt, now, { relative: true })}`
  }</td></tr>`;
}

/** The full list when the dashboard has it, else the status' counts. */
function pluginsCard(data: DashboardData): Html | undefined {
  const counts = data.plugins ?? data.status.plugins;
  if (counts === undefined) return undefined;
  const list: PluginsStatus | undefined = data.plugins;
  // The badge names the worst there is: one refused socket matters more than ten registered.
  const { tone, text }: { tone: Tone; text: string } =
    counts.refused > 0
      ? { tone: 'bad', text: `${counts.refused} refused` }
      : counts.retrying > 0
        ? { tone: 'warn', text: `${counts.retrying} retrying` }
        : { tone: counts.registered > 0 ? 'good' : 'idle', text: `${counts.registered} registered` };
  const table =
    list === undefined || list.plugins.length === 0
      ? ''
      : html`<table class="grid compact">
<thead><tr><th>Socket</th><th>State</th><th>Name</th><th>Since</th><th>Problem</th></tr></thead>
<tbody>${list.plugins.map((p) => pluginRow(p, now(data)))}</tbody></table>`;
  return card(
    'Plugins',
    'source-plugins',
    { tone, text },
    html`${facts([
      ['Directory', list === undefined ? undefined : html`<span class="mono">${list.dir}</span>`],
      ['Watcher', list?.watcher],
      ['Sockets', html`${counts.registered} registered · ${counts.retrying} retrying · ${counts.refused} refused`],
    ])}${table}`,
  );
}

export function sourcesSection(data: DashboardData): Html {
  const s = data.status;
  const at = now(data);
  const cards = [
    journalCard(s.reconciler, at),
    s.containerd === undefined ? undefined : containerdCard(s.containerd, at),
    s.kubernetes === undefined ? undefined : kubernetesCard(s.kubernetes, at),
    pluginsCard(data),
    s.cniConfig === undefined ? undefined : cniConfigCard(s.cniConfig, at),
  ];
  return section('Sources', 'sources', html`<div class="cards">${cards}</div>`, 'where releases come from');
}
