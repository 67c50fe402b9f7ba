/**
 * The decoder of `podman events --format json`: one line, one JSON object (podman 4.3 writes
 * `{"ID":"<64 hex>","Image":…,"Name":…,"Status":"create","Time":"2026-11-22T13:58:14.276346613Z",
 * "Type":"container","Attributes":{…}}`; a `died` line also carries `ContainerExitCode`).
 *
 * Guarantees:
 * - Never throws, whatever the line: every line comes back as an `event`, `ignored` (well formed,
 *   but nothing Warren acts on: another event type, another status) or `malformed` (with what is
 *   wrong), so one bad line cannot stop a stream.
 * - Only three container statuses become events: `create` → created, `died` → exited,
 *   `remove` → deleted. The container ID must be the full 64-hex ID — the one podman passes to CNI
 *   as CNI_CONTAINERID — and the time must parse and be after 1970 (the wire's positive
 *   milliseconds); otherwise the line is malformed.
 * - The decoder knows no network namespace: podman's events do not carry it (see podman-feed.ts).
 */
import type { RuntimeEvent } from '../../../api/plugins/wire.ts';

export type DecodedPodmanEvent =
  | { readonly kind: 'event'; readonly event: RuntimeEvent }
  /** Well formed, not acted on; `time` when the line had a readable one (a follower's position). */
  | { readonly kind: 'ignored'; readonly reason: string; readonly time?: number }
  | { readonly kind: 'malformed'; readonly reason: string };

/** A container ID as podman gives it to CNI: 64 lowercase hex digits. */
export const CONTAINER_ID = /^[0-9a-f]{64}$/;

/** How much of an offending line a reason quotes. */
const QUOTE_LIMIT = 120;

function quote(text: string): string {
  return JSON.stringify(text.length > QUOTE_LIMIT ? `${text.slice(0, QUOTE_LIMIT)}…` : text);
}

/** The podman statuses Warren acts on, and what they mean to it. */
function kindOf(status: string): RuntimeEvent['kind'] | undefined {
  switch (status) {
    case 'create':
      return 'created';
    case 'died':
      return 'exited';
    case 'remove':
      return 'deleted';
    default:
      return undefined;
  }
}

// RFC 3339 as Go's time.RFC3339Nano writes it (any number of fraction digits, Z or an offset).
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Milliseconds since the epoch of an RFC 3339 time (fraction truncated to ms), or undefined. */
export function parseRfc3339(text: string): number | undefined {
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, fraction = '', zulu, sign, oh, om] = m;
  const n = (v: string | undefined): number => Number(v ?? '0');
  if (n(mo) < 1 || n(mo) > 12 || n(d) < 1 || n(d) > 31 || n(h) > 23 || n(mi) > 59 || n(s) > 59) return undefined;
  if (zulu === undefined && (n(oh) > 23 || n(om) > 59)) return undefined;
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999 (Go's zero time is year 1).
  const date = new Date(0);
  date.setUTCFullYear(n(y), n(mo) - 1, n(d));
  // An impossible day (Feb 31) rolls into the next month: refuse it instead.
  if (date.getUTCDate() !== n(d)) return undefined;
  date.setUTCHours(n(h), n(mi), n(s), Number(fraction.padEnd(3, '0').slice(0, 3)));
  const offset = zulu === undefined ? (sign === '-' ? -1 : 1) * (n(oh) * 60 + n(om)) * 60_000 : 0;
  const time = date.getTime() - offset;
  return Number.isFinite(time) ? time : undefined;
}

/** The event's time: podman 4's `Time` string; a numeric `timeNano`/`time` (unix) is accepted too. */
function timeOf(o: Record<string, unknown>): number | string {
  const t = o.Time;
  if (typeof t === 'string') return parseRfc3339(t) ?? `Time ${quote(t)} is not an RFC 3339 time`;
  if (typeof o.timeNano === 'number' && Number.isSafeInteger(Math.floor(o.timeNano / 1e6)) && o.timeNano >= 0)
    return Math.floor(o.timeNano / 1e6);
  if (
    typeof o.time === 'number' &&
    Number.isFinite(o.time) &&
    o.time >= 0 &&
    Number.isSafeInteger(Math.floor(o.time * 1000))
  )
    return Math.floor(o.time * 1000);
  return t === undefined ? 'no Time' : `Time is a ${typeof t}, not a string`;
}

/** Decodes one line of `podman events --format json`. Never throws. */
export function decodePodmanEvent(line: string): DecodedPodmanEvent {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { kind: 'malformed', reason: `not JSON: ${quote(line)}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { kind: 'malformed', reason: `not a JSON object: ${quote(line)}` };
  const o = value as Record<string, unknown>;
  if (typeof o.Type !== 'string') return { kind: 'malformed', reason: `no Type: ${quote(line)}` };
  const time = timeOf(o);
  const at = typeof time === 'number' ? { time } : {};
  if (o.Type !== 'container') return { kind: 'ignored', reason: `a ${quote(o.Type)} event`, ...at };
  if (typeof o.Status !== 'string')
    return { kind: 'malformed', reason: `a container event without a Status: ${quote(line)}` };
  const kind = kindOf(o.Status);
  if (kind === undefined) return { kind: 'ignored', reason: `container status ${quote(o.Status)}`, ...at };
  if (typeof o.ID !== 'string' || !CONTAINER_ID.test(o.ID))
    return {
      kind: 'malformed',
      reason: `container ${o.Status} event whose ID is not a full container ID: ${quote(line)}`,
    };
  if (typeof time === 'string')
    return { kind: 'malformed', reason: `container ${o.Status} event for ${o.ID}: ${time}` };
  // The wire carries positive milliseconds since the epoch (Go's zero time would be year 1).
  if (!(time > 0 && Number.isSafeInteger(time)))
    return { kind: 'malformed', reason: `container ${o.Status} event for ${o.ID}: time ${time} is not after 1970` };
  return { kind: 'event', event: { id: o.ID, kind, time } };
}
