/**
 * Lists of custom resources and Leases as etcd serves them: in key order, paged by `limit` with
 * opaque `continue` tokens in the apiserver's format (base64url of `{"v","rv","start"}`) that page
 * over the snapshot of the first page — later pages show the objects as they were at its RV, read
 * back through the change history. `remainingItemCount` only without selectors; `continue` is ""
 * on the last page; a token older than the history is a 410 with a fresh token.
 * `resourceVersion=0` is served like the watch cache (no paging); `resourceVersion=N` (and
 * `resourceVersionMatch=NotOlderThan`) with N not newer than the store answer the current state, as
 * the watch cache does. Not implemented, refused with a 400 naming the fake: `resourceVersionMatch=
 * Exact` (an old snapshot) and an RV newer than the store's (the real server waits, then 504s).
 */
import { ObjectStore } from './objects.ts';
import type { Served } from './served.ts';
import { failure, badRequest, invalid, unsupportedByFake } from './status.ts';
import type { Selection } from './selectors.ts';
import type { KubeObject } from './types.ts';

interface Token {
  readonly rv: number;
  readonly start: string;
}

const encodeToken = (rv: number, start: string): string =>
  Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start })).toString('base64url');

/** json.Unmarshal's complaint about the first byte of a bad token, as Go quotes it. */
function quoteByte(byte: number): string {
  if (byte >= 0x20 && byte < 0x7f && byte !== 0x27) return `'${String.fromCharCode(byte)}'`;
  return `'\\u${byte.toString(16).padStart(4, '0')}'`;
}

function decodeToken(text: string): Token {
  const bytes = Buffer.from(text, 'base64url');
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    const first = bytes.find((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
    throw badRequest(
      `invalid continue token: continue key is not valid: invalid character ${quoteByte(first ?? 0)} looking for beginning of value`,
    );
  }
  const token = parsed as { v?: unknown; rv?: unknown; start?: unknown };
  if (token.v !== 'meta.k8s.io/v1')
    throw badRequest(
      'invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    );
  if (typeof token.rv !== 'number' || typeof token.start !== 'string' || token.start === '')
    throw badRequest(
      'invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    );
  return { rv: token.rv, start: token.start };
}

function forbiddenMatch(message: string) {
  return invalid(
    'ListOptions.meta.k8s.io',
    '',
    [{ reason: 'FieldValueForbidden', field: 'resourceVersionMatch', message: `Forbidden: ${message}` }],
    {
      group: 'meta.k8s.io',
      kind: 'ListOptions',
      withName: false,
    },
  );
}

export function list(
  store: ObjectStore,
  served: Served,
  namespace: string | undefined,
  query: URLSearchParams,
  sel: Selection,
): unknown {
  const rvText = query.get('resourceVersion') ?? '';
  const match = query.get('resourceVersionMatch') ?? '';
  const continueText = query.get('continue') ?? '';
  if (match !== '') {
    if (rvText === '') throw forbiddenMatch('resourceVersionMatch is forbidden unless resourceVersion is provided');
    if (match === 'Exact' && rvText === '0')
      throw forbiddenMatch('resourceVersionMatch "exact" is forbidden for resourceVersion "0"');
    if (match !== 'NotOlderThan' || (rvText !== '0' && Number(rvText) > store.rv))
      throw unsupportedByFake(`resourceVersionMatch=${match} with resourceVersion=${rvText}`);
  }
  if (continueText !== '' && rvText !== '')
    throw badRequest('specifying resource version is not allowed when using continue');
  if (rvText !== '' && !/^\d+$/.test(rvText))
    throw failure(500, '', `strconv.ParseUint: parsing ${JSON.stringify(rvText)}: invalid syntax`);
  if (rvText !== '' && rvText !== '0' && Number(rvText) > store.rv)
    throw unsupportedByFake(`a resourceVersion newer than the store's (${rvText} > ${store.rv})`);
  const limitText = query.get('limit') ?? '';
  const limit = rvText === '0' || !/^-?\d+$/.test(limitText) ? 0 : Math.max(0, Number(limitText));

  const prefix = served.namespaced && namespace !== undefined ? `${namespace}/` : '';
  let snapshot = store.rv;
  let from = prefix;
  if (continueText !== '') {
    const token = decodeToken(continueText);
    if (token.rv < store.compactedThrough || token.rv > store.rv) {
      const fresh = encodeToken(-1, token.start);
      throw failure(
        410,
        'Expired',
        'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.',
        undefined,
        { continue: fresh },
      );
    }
    snapshot = token.rv;
    from = prefix + token.start;
  }
  // The state at the snapshot: the current objects, except those changed since, which read as before.
  const overlay = new Map<string, KubeObject | undefined>();
  if (snapshot < store.rv)
    for (const change of store.history)
      if (change.rv > snapshot && change.resource === served.plural) {
        const key = ObjectStore.keyOf(change.object, served.namespaced);
        if (!overlay.has(key)) overlay.set(key, change.previous);
      }
  const map = store.map(served.plural);
  const keys = store.keys(served.plural);
  const extra = [...overlay.keys()].filter((k) => !map.has(k)).sort();
  const at = (key: string) => (overlay.has(key) ? overlay.get(key) : map.get(key));
  const inScope = (key: string) => key.startsWith(prefix);

  const items: KubeObject[] = [];
  let i = store.seek(served.plural, from);
  let j = extra.findIndex((k) => k >= from);
  if (j === -1) j = extra.length;
  let last: string | undefined;
  let more = false;
  while (i < keys.length || j < extra.length) {
    const a = keys[i];
    const b = extra[j];
    const key = (b === undefined || (a !== undefined && a < b) ? a : b) as string;
    if (key === a) i++;
    else j++;
    if (!inScope(key)) break;
    const object = at(key);
    if (object === undefined) continue;
    if (limit > 0 && items.length === limit) {
      more = true;
      break;
    }
    if (sel.matches(object)) {
      items.push(object);
      last = key;
    }
  }
  const meta: { resourceVersion: string; continue: string; remainingItemCount?: number } = {
    continue: '',
    resourceVersion: String(snapshot),
  };
  if (more && last !== undefined) {
    meta.continue = encodeToken(snapshot, `${last.slice(prefix.length)}\u0000`);
    if (!sel.selective) meta.remainingItemCount = remaining(store, served.plural, prefix, last, overlay, map);
  }
  return served.encodeList(items, meta);
}

/** Objects of the snapshot after `last` in the scope, without walking them. */
function remaining(
  store: ObjectStore,
  plural: string,
  prefix: string,
  last: string,
  overlay: ReadonlyMap<string, KubeObject | undefined>,
  map: ReadonlyMap<string, KubeObject>,
): number {
  const end = prefix === '' ? store.keys(plural).length : store.seek(plural, `${prefix.slice(0, -1)}0`);
  let count = end - store.seek(plural, `${last}\u0000`);
  for (const [key, before] of overlay) {
    if (key <= last || !key.startsWith(prefix)) continue;
    if (before === undefined && map.has(key)) count--;
    if (before !== undefined && !map.has(key)) count++;
  }
  return count;
}
