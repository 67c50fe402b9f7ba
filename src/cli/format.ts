/**
 * Plain text for humans; --json output bypasses this entirely. Every recorded string shown here
 * (pod names come from CNI_ARGS, which anyone who can start a pod chooses) goes through
 * `printable`, so it cannot move the cursor, recolour the terminal or start a line of its own.
 */

/**
 * Text with control characters shown as escapes (`\x1b`, `\u202e`): C0 and C1 controls, DEL,
 * and the Unicode line separators and bidirectional overrides that reorder what a terminal shows.
 * Idempotent: what it returns has nothing left to escape.
 */
export function printable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters to escape is the point
  return text.replace(/[\x00-\x1f\x7f-\x9f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** A template literal whose every interpolated value is `printable`: safe`released ${a.address}`. */
export function safe(strings: TemplateStringsArray, ...values: unknown[]): string {
  return strings.reduce((out, part, i) => out + printable(String(values[i - 1])) + part);
}

/** Lines of `--flag  ENV  help` for the agent's settings, as `warren --help` and `warren agent --help` show them. */
export function settingsHelp(
  settings: ReadonlyArray<{ readonly flag: string; readonly env: string; readonly help: string }>,
): string {
  return settings.map((s) => `  --${s.flag.padEnd(12)} ${s.env.padEnd(18)} ${s.help}`).join('\n');
}

/** Columns padded to their widest cell, each cell `printable`. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  if (rows.length === 0) return '';
  const shown = rows.map((r) => r.map(printable));
  const widths = headers.map((h, i) => Math.max(h.length, ...shown.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...shown.map(line)].join('\n')}\n`;
}

export function percent(ratio: number | undefined): string {
  return ratio === undefined ? '-' : `${(ratio * 100).toFixed(1)}%`;
}

export function age(fromMs: number, nowMs: number): string {
  const s = Math.max(0, Math.round((nowMs - fromMs) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/**
 * `--json` output: the value as JSON, every timestamp in one format, RFC 3339 in UTC with
 * milliseconds (`2026-11-27T05:14:10.123Z`). The agent's API keeps some as milliseconds since the
 * epoch (an allocation's `createdAt`, a queue's `retryAt`); a field named like a moment (`...At`)
 * holding such a number is written as the same moment in text, so scripts parse one format.
 */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, momentsAsText, 2)}\n`;
}

/** The replacer of jsonText, for output built a piece at a time (cluster-listing.ts). */
export function momentsAsText(key: string, v: unknown): unknown {
  return isMomentKey(key) && isEpochMs(v) ? new Date(v).toISOString() : v;
}

const isMomentKey = (key: string): boolean => /^[a-z][A-Za-z]*At$/.test(key);
const isEpochMs = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v < 8.64e15;
