/**
 * Checking JSON that came from outside (a network config, a request body, a journal file) before
 * anything trusts its shape: one way to say what a value is, one way to find unknown keys, and
 * typed readers that refuse with the error the caller's layer speaks.
 *
 * Guarantees: a value is shown quoted, escaped and cut, never through String() (a JSON object
 * with its own "toString" key would make that throw); unknown keys are found all at once, in the
 * order written; a reader's refusal is made by the caller's factory from a message that starts
 * with the path of the offending value. Nothing here knows what the values mean.
 */

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Quoted text for a message: JSON escapes keep control characters out of logs. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text);
}

/** What a value is, for "must be X, got Y": strings quoted, objects and lists by kind only. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return quoted(value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

/**
 * A value as its JSON text (a string as itself); its type when it has none. Not String(): a JSON
 * object with its own "toString" key makes String() throw, which would turn a mistake in the input
 * into an internal error.
 */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

/** The keys of `object` not in `allowed`, in the order written. */
export function unknownKeys(object: Record<string, unknown>, allowed: ReadonlySet<string>): string[] {
  return Object.keys(object).filter((key) => !allowed.has(key));
}

/** A key that can follow a dot in a path without confusing the reader. */
const PLAIN_KEY = /^[A-Za-z0-9_-]{1,64}$/;
/** Unknown keys named in one message; the rest are counted. */
const MAX_KEYS_NAMED = 20;

/** The readers, each throwing what the caller's factory makes of `${path}: ${message}`. */
export interface Validator<E extends Error> {
  /** The refusal of the value at `path`. */
  readonly invalid: (path: string, message: string) => E;
  /**
   * Refuses every key of `object` not in `allowed`, naming all of them in one error, with a hint
   * when one looks like a known key mistyped.
   */
  readonly refuseUnknownKeys: (object: Record<string, unknown>, allowed: ReadonlySet<string>, path: string) => void;
  /**
   * The same for the fields of a request body, refused as `${what}: unknown field "x"`: a body is
   * one level deep, so its fields are named in the message rather than in a path.
   */
  readonly refuseUnknownFields: (object: Record<string, unknown>, allowed: ReadonlySet<string>, what: string) => void;
  readonly stringAt: (value: unknown, path: string) => string;
  readonly optionalString: (value: unknown, path: string) => string | undefined;
  readonly optionalBoolean: (value: unknown, path: string) => boolean | undefined;
  readonly stringListAt: (value: unknown, path: string) => string[];
}

/** The readers for one kind of input; `refuse` turns a message into the error its layer throws. */
export function validator<E extends Error>(refuse: (message: string) => E): Validator<E> {
  const invalid = (path: string, message: string): E => refuse(`${path}: ${message}`);

  const refuseUnknownKeys = (object: Record<string, unknown>, allowed: ReadonlySet<string>, path: string): void => {
    const unknown = unknownKeys(object, allowed);
    if (unknown.length === 0) return;
    const [only] = unknown;
    if (unknown.length === 1 && only !== undefined && PLAIN_KEY.test(only))
      throw invalid(`${path}.${only}`, `unknown key${hintFor(only, allowed)}`);
    throw invalid(path, unknownNamed(unknown, allowed, 'key'));
  };

  const refuseUnknownFields = (object: Record<string, unknown>, allowed: ReadonlySet<string>, what: string): void => {
    const unknown = unknownKeys(object, allowed);
    if (unknown.length > 0) throw invalid(what, unknownNamed(unknown, allowed, 'field'));
  };

  const stringAt = (value: unknown, path: string): string => {
    if (typeof value !== 'string') throw invalid(path, `must be a string, got ${describe(value)}`);
    return value;
  };

  const optionalString = (value: unknown, path: string): string | undefined =>
    value === undefined ? undefined : stringAt(value, path);

  const optionalBoolean = (value: unknown, path: string): boolean | undefined => {
    if (value !== undefined && typeof value !== 'boolean')
      throw invalid(path, `must be a boolean, got ${describe(value)}`);
    return value as boolean | undefined;
  };

  const stringListAt = (value: unknown, path: string): string[] => {
    if (!Array.isArray(value)) throw invalid(path, `must be a list of strings, got ${describe(value)}`);
    return value.map((item, i) => stringAt(item, `${path}[${i}]`));
  };

  return { invalid, refuseUnknownKeys, refuseUnknownFields, stringAt, optionalString, optionalBoolean, stringListAt };
}

/** `unknown key "a", "b" (did you mean "c"?)`: the first MAX_KEYS_NAMED named, each with its hint, the rest counted. */
function unknownNamed(unknown: readonly string[], allowed: ReadonlySet<string>, noun: string): string {
  const named = unknown.slice(0, MAX_KEYS_NAMED).map((key) => `${quoted(key)}${hintFor(key, allowed)}`);
  const more = unknown.length > MAX_KEYS_NAMED ? ` and ${unknown.length - MAX_KEYS_NAMED} more` : '';
  return `unknown ${noun}${unknown.length === 1 ? '' : 's'} ${named.join(', ')}${more}`;
}

/** ` (did you mean "x"?)` when `key` looks like an allowed key mistyped; empty otherwise. */
function hintFor(key: string, allowed: ReadonlySet<string>): string {
  const near = nearestKey(key, allowed);
  return near === undefined ? '' : ` (did you mean ${quoted(near)}?)`;
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
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}
