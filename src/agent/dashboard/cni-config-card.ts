/**
 * The CNI config manager on the dashboard (agent/node/cni-config-manager.ts): one card, shown only
 * while the manager runs, saying whether the file the runtime reads is Warren's and current, and
 * if not why (waiting for a primary, shadowed by a file that sorts first, the readiness file
 * missing, handed back). It is no source of releases; the Sources section shows it beside them.
 *
 * Each state maps to a tone in an exhaustive switch: a state added to the protocol fails the
 * typecheck here until the page knows what it means.
 */
import type { CniConfigStatus } from '../../api/status.ts';
import { type Html, html } from './html.ts';
import { type Tone, badge, card, errorText, facts, timeOf } from './widgets.ts';

function cniConfigTone(state: CniConfigStatus['state']): Tone {
  switch (state) {
    case 'current':
    case 'beside-multus':
      return 'good';
    case 'waiting':
    case 'stale':
    case 'handed-back':
      return 'warn';
    case 'not-ready':
    case 'failed':
      return 'bad';
    default: {
      const never: never = state;
      return never;
    }
  }
}

export function cniConfigCard(c: CniConfigStatus, at: string): Html {
  return card(
    'CNI config',
    'source-cni-config',
    { tone: cniConfigTone(c.state), text: c.state },
    facts([
      ['File', html`<span class="mono">${c.output}</span> · written ${c.writes} ${c.writes === 1 ? 'time' : 'times'}`],
      [
        'Primary',
        c.primary === undefined ? html`<span class="muted">none</span>` : html`<span class="mono">${c.primary}</span>`,
      ],
      ['Network', c.network],
      ['Problem', errorText(c.problem)],
      [
        'Shadowed by',
        c.shadowedBy === undefined
          ? undefined
          : html`<span class="error mono">${c.shadowedBy}</span> sorts first: the runtime uses it, not Warren's`,
      ],
      [
        'Last write',
        c.lastWrite === undefined
          ? undefined
          : html`${timeOf(c.lastWrite.at, at, { relative: true })} from <span class="mono">${c.lastWrite.from}</span>`,
      ],
      [
        'Readiness file',
        c.readinessIndicator === undefined
          ? undefined
          : html`<span class="mono">${c.readinessIndicator.path}</span> ${
              c.readinessIndicator.present ? badge('good', 'present') : badge('bad', 'missing')
            }`,
      ],
      ['Dropped', c.notes === undefined || c.notes.length === 0 ? undefined : c.notes.join('; ')],
      ['CNI versions up to', c.cniVersionMax],
    ]),
  );
}
