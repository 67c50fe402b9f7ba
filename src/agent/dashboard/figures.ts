/**
 * The dashboard's figures as text: utilisation, durations, times. Pure functions of their inputs
 * (the page's "now" is the data's `generatedAt`, never the clock), so a page renders the same from
 * the same data.
 *
 * Utilisation is computed in bigint from the capacity's decimal string: an IPv6 /64 holds 2^64
 * addresses, past what a double keeps exactly, and a percentage of it must neither read 0% while
 * something is allocated nor 100% while something is free. Times are shown in UTC, as the agent
 * logs them.
 */

/** How full a pool is, as the page shows it. */
export interface Utilisation {
  /**
   * One decimal, rounded half up: "1.2%"; "<0.1%" when something but not 0.1% is allocated,
   * ">99.9%" when not quite full.
   */
  readonly text: string;
  /** The bar's width in percent, two decimals, at most 100. */
  readonly width: string;
  readonly level: UtilisationLevel;
}

/** `low` below 80%, `high` from 80%, `full` from 95% (an ADD may soon find no address). */
export type UtilisationLevel = 'low' | 'high' | 'full';

/** Undefined when the capacity is unknown, not a whole decimal number, or zero. */
export function utilisationOf(allocated: number, capacity: string | undefined): Utilisation | undefined {
  if (capacity === undefined || !/^\d+$/.test(capacity) || !Number.isSafeInteger(allocated) || allocated < 0)
    return undefined;
  const total = BigInt(capacity);
  if (total === 0n) return undefined;
  const used = BigInt(allocated);
  const tenths = (used * 2000n + total) / (2n * total);
  let text = `${tenths / 10n}.${tenths % 10n}%`;
  if (used > 0n && tenths === 0n) text = '<0.1%';
  else if (used < total && tenths >= 1000n) text = '>99.9%';
  const hundredths = used >= total ? 10_000n : (used * 10_000n) / total;
  const width = `${hundredths / 100n}.${String(hundredths % 100n).padStart(2, '0')}`;
  const level: UtilisationLevel = hundredths >= 9_500n ? 'full' : hundredths >= 8_000n ? 'high' : 'low';
  return { text, width, level };
}

/** "45s", "12m 5s", "3h 4m", "2d 3h": the two largest units. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.floor(seconds);
  const units: ReadonlyArray<[string, number]> = [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ];
  const parts: string[] = [];
  let rest = s;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0 || (parts.length > 0 && parts.length < 2)) parts.push(`${n}${name}`);
    if (parts.length === 2) break;
  }
  return parts.length === 0 ? '0s' : parts.join(' ');
}

/**
 * "HH:MM:SS" (UTC) when `at` is on the same UTC day as `now`, else "YYYY-MM-DD HH:MM:SS"; the text
 * as given when it is no time.
 */
export function clockTime(at: string, now: string): string {
  const t = new Date(at);
  if (Number.isNaN(t.getTime())) return at;
  const iso = t.toISOString();
  const reference = new Date(now);
  const sameDay = !Number.isNaN(reference.getTime()) && iso.slice(0, 10) === reference.toISOString().slice(0, 10);
  return sameDay ? iso.slice(11, 19) : `${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
}

/** "5m ago" from `now`; "in 5m" for a time after it; '' when either is no time. */
export function relativeTime(at: string, now: string): string {
  const ms = new Date(now).getTime() - new Date(at).getTime();
  if (Number.isNaN(ms)) return '';
  if (Math.abs(ms) < 1_000) return 'just now';
  return ms > 0 ? `${formatDuration(ms / 1_000)} ago` : `in ${formatDuration(-ms / 1_000)}`;
}

/** The first 12 characters of a container ID, as runtimes show them. */
export function shortId(id: string): string {
  return id.length > 12 ? id.slice(0, 12) : id;
}
