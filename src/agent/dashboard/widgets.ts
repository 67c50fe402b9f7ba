/**
 * The dashboard's small parts, shared by its sections: a state badge, a time, a list of facts, a
 * utilisation bar, an empty-state line. Each is markup from `html`, so whatever it is given is
 * escaped. Colours are classes (the page's style sheet says what they look like); a section says
 * only what a state means: good, warn, bad, or idle (off, stopped: neither good nor a problem).
 */
import { type Html, type HtmlValue, html } from './html.ts';
import { type Utilisation, clockTime, relativeTime } from './figures.ts';

export type Tone = 'good' | 'warn' | 'bad' | 'idle';

/** A coloured label: `<span class="badge good">ready</span>`. */
export function badge(tone: Tone, text: HtmlValue, testid?: string): Html {
  return html`<span class="badge ${tone}"${testid === undefined ? '' : html` data-testid="${testid}"`}>${text}</span>`;
}

/**
 * A time as the page shows it (UTC clock time, with the date when another day), machine-readable in
 * `datetime`; optionally how long ago.
 */
export function timeOf(at: string | undefined, now: string, options: { relative?: boolean } = {}): Html {
  if (at === undefined) return html`<span class="muted">never</span>`;
  const ago = options.relative === true ? relativeTime(at, now) : '';
  return html`<time datetime="${at}">${clockTime(at, now)}</time>${
    ago === '' ? '' : html` <span class="muted">(${ago})</span>`
  }`;
}

/** Label/value rows; rows whose value is undefined are left out (a field the agent did not report). */
export function facts(rows: ReadonlyArray<readonly [string, HtmlValue]>): Html {
  const shown = rows.filter(([, value]) => value !== undefined);
  return html`<dl class="facts">${shown.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>`;
}

/** A horizontal bar filled to the utilisation, coloured by its level; an empty track when unknown. */
export function utilisationBar(u: Utilisation | undefined): Html {
  if (u === undefined) return html`<div class="bar unknown" title="capacity unknown"></div>`;
  // No fill at all when nothing is allocated; otherwise at least 3 px, so "some" never looks like
  // "none". An SVG's width attributes, not a style attribute: the page allows no inline style.
  const fill =
    u.width === '0.00'
      ? ''
      : html`<svg aria-hidden="true"><rect class="fill ${u.level}" width="${
          u.width
        }%" height="100%"/><rect class="fill ${u.level}" width="3" height="100%"/></svg>`;
  return html`<div class="bar" role="img" aria-label="${u.text} used">${fill}</div>`;
}

/** A failure's text in the error style; nothing when there is none. */
export function errorText(text: string | undefined): Html | undefined {
  return text === undefined ? undefined : html`<span class="error">${text}</span>`;
}

/** What a section says when it has nothing to show. */
export function emptyState(text: string, testid: string): Html {
  return html`<p class="empty" data-testid="${testid}">${text}</p>`;
}

/** A section of the page: a heading and its content. */
export function section(title: string, testid: string, content: HtmlValue, aside?: HtmlValue): Html {
  return html`<section class="panel" data-testid="${testid}"><h2>${title}${
    aside === undefined ? '' : html` <span class="aside">${aside}</span>`
  }</h2>${content}</section>`;
}

/** A card within a section (one per event source): a title, its state badge, its facts. */
export function card(title: string, testid: string, state: { tone: Tone; text: string }, content: HtmlValue): Html {
  return html`<article class="card ${state.tone}" data-testid="${testid}" data-state="${state.text}"><h3>${
    title
  } ${badge(state.tone, state.text)}</h3>${content}</article>`;
}

/** At most `max` items, then "and N more". */
export function firstOf<T>(items: readonly T[], max: number, each: (item: T) => HtmlValue): Html {
  const more = items.length - max;
  return html`${items.slice(0, max).map(each)}${more > 0 ? html`<li class="muted">and ${more} more</li>` : ''}`;
}
