/**
 * HTML for the dashboard, escaped by construction. Everything the page shows comes from the
 * agent's state, and much of that from callers the agent does not trust (container IDs, network
 * names, CNI_ARGS, release reasons quoting paths): one tagged template, `html`, escapes every
 * interpolated value unless it is itself the output of `html` (`Html`). There is no other way to
 * put text into the page, so a value cannot reach it raw by forgetting to escape it.
 *
 * Guarantees: `escapeHtml` output contains none of `& < > " '` unescaped, so it is inert both as
 * element text and inside a double- or single-quoted attribute value. Templates here only ever
 * place values in text or in quoted attributes, never in an unquoted attribute, a tag name, a
 * `<script>` or a `<style>`.
 */

/** Only this module holds it, so only `html` and `joinHtml` can make an `Html`. */
const MINT: unique symbol = Symbol('Html');

/** Markup that is safe to place as is. */
export class Html {
  readonly #text: string;

  constructor(mint: typeof MINT, text: string) {
    if (mint !== MINT) throw new TypeError('Html is made by the html template, never from a string');
    this.#text = text;
  }

  toString(): string {
    return this.#text;
  }
}

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] as string);
}

/** What a template may interpolate: markup, text (escaped), or nothing (absent values render as ''). */
export type HtmlValue = Html | string | number | bigint | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.toString();
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** The tagged template: literal parts are markup, every `${value}` is escaped unless it is `Html`. */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Html(MINT, out);
}

/** Parts joined by a separator (itself markup). */
export function joinHtml(parts: readonly HtmlValue[], separator: Html = html``): Html {
  return new Html(MINT, parts.map(render).join(separator.toString()));
}
