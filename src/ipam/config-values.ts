/**
 * Reading the values of a config object, for the IPAM parsers: each reader checks one value's type
 * and form and throws INVALID_CONFIG whose message starts with the value's path; unknown keys are
 * refused all at once, each named, with a hint when it looks like a known key mistyped.
 */
import { WarrenError } from '../core/errors.ts';
import { type Cidr, type IPAddress, bitsOf, networkOf, parseCidr, parseIP } from './address.ts';

export function invalid(path: string, message: string): WarrenError {
  return new WarrenError('INVALID_CONFIG', `${path}: ${message}`);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Quoted text for a message: JSON escapes keep control characters out of logs. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return quoted(value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

/** A key that can follow a dot in a path without confusing the reader. */
const PLAIN_KEY = /^[A-Za-z0-9_-]{1,64}$/;
/** Unknown keys named in one message; the rest are counted. */
const MAX_KEYS_NAMED = 20;

/** Refuses every key of `object` not in `allowed`, naming all of them in one error. */
export function refuseUnknownKeys(object: Record<string, unknown>, allowed: ReadonlySet<string>, path: string): void {
  const unknown = Object.keys(object).filter((key) => !allowed.has(key));
  if (unknown.length === 0) return;
  const hintFor = (key: string): string => {
    const near = nearestKey(key, allowed);
    return near === undefined ? '' : ` (did you mean ${quoted(near)}?)`;
  };
  const [only] = unknown;
  if (unknown.length === 1 && only !== undefined && PLAIN_KEY.test(only)) throw invalid(`${path}.${only}`, `unknown key${hintFor(only)}`);
  const named = unknown.slice(0, MAX_KEYS_NAMED).map((key) => `${quoted(key)}${hintFor(key)}`);
  const more = unknown.length > MAX_KEYS_NAMED ? ` and ${unknown.length - MAX_KEYS_NAMED} more` : '';
  throw invalid(path, `unknown key${unknown.length === 1 ? '' : 's'} ${named.join(', ')}${more}`);
}

/** The allowed key `key` was probably meant to be: same letters in another case, or two edits away. */
function nearestKey(key: string, allowed: ReadonlySet<string>): string | undefined {
  if (key.length > 64) return undefined;
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of allowed) {
    if (candidate.toLowerCase() === key.toLowerCase()) return candidate;
    const d = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance && d < candidate.length / 2) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance, with a swap of neighbours counting as one edit. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}

export function stringAt(value: unknown, path: string): string {
  if (typeof value !== 'string') throw invalid(path, `must be a string, got ${describe(value)}`);
  return value;
}

export function optionalString(value: unknown, path: string): string | undefined {
  return value === undefined ? undefined : stringAt(value, path);
}

export function optionalBoolean(value: unknown, path: string): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') throw invalid(path, `must be a boolean, got ${describe(value)}`);
  return value as boolean | undefined;
}

export function stringListAt(value: unknown, path: string): string[] {
  if (!Array.isArray(value)) throw invalid(path, `must be a list of strings, got ${describe(value)}`);
  return value.map((item, i) => stringAt(item, `${path}[${i}]`));
}

export function ipAt(value: unknown, path: string): IPAddress {
  const text = stringAt(value, path);
  const ip = parseIP(text);
  if (ip === undefined) throw invalid(path, `${quoted(text)} is not an IP address`);
  return ip;
}

/**
 * A CIDR as whereabouts reads one: the network it names, host bits masked off (Go's
 * net.ParseCIDR), so `192.168.2.229/30` is 192.168.2.228/30. A bare address is a /32 or /128
 * where `allowBareAddress` says so (exclude lists).
 */
export function subnetAt(value: unknown, path: string, allowBareAddress: boolean): Cidr {
  const text = stringAt(value, path);
  let cidr = parseCidr(text);
  if (cidr === undefined && allowBareAddress && !text.includes('/')) {
    const ip = parseIP(text);
    if (ip !== undefined) cidr = { address: ip, length: bitsOf(ip.family) };
  }
  if (cidr === undefined) throw invalid(path, `${quoted(text)} is not a CIDR`);
  return { address: { family: cidr.address.family, value: networkOf(cidr) }, length: cidr.length };
}
