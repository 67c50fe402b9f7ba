/**
 * The `warren.event-source` v1 messages as Warren trusts them: an adapter's `Event` and `ListResponse`
 * checked field by field before anything acts on them, and their encoders (for adapters and tests).
 *
 * Guarantees: the decoders never throw, whatever the bytes; a refusal names the field and what is
 * wrong with it (values quoted and cut, so they cannot break a log line). An event that decodes has
 * a printable id of 1..128 characters, one of the three lifecycle kinds, an absolute netns path
 * without NUL or `..` components (or none), and a time that is a positive safe integer. A listing
 * that decodes has only such ids, without duplicates, and netns prefixes that are absolute,
 * normalised and at least two components deep; a listing with one bad id or prefix is refused as a
 * whole, because a resync judges every allocation missing from it: dropping an id would read as
 * "that container is gone", and a prefix like "/" would claim every allocation on the node.
 */
import { quoted } from '../../core/validate.ts';
import { EVENT_KIND, MESSAGES, type RuntimeEvent, type RuntimeListing, decodeMessage, encode } from './wire.ts';

export type DecodedEvent =
  | { readonly kind: 'event'; readonly event: RuntimeEvent }
  /** The stream is alive; nothing happened. */
  | { readonly kind: 'heartbeat' }
  | { readonly kind: 'malformed'; readonly reason: string };

/** Container IDs as runtimes make them (64 hex digits for podman and containerd), and names. */
const ID = /^[A-Za-z0-9_.:-]{1,128}$/;
/** Linux's PATH_MAX: a longer netns path cannot be opened. */
const MAX_PATH = 4096;

const KIND_NAMES: Readonly<Record<number, RuntimeEvent['kind'] | 'heartbeat'>> = {
  [EVENT_KIND.CREATED]: 'created',
  [EVENT_KIND.EXITED]: 'exited',
  [EVENT_KIND.DELETED]: 'deleted',
  [EVENT_KIND.HEARTBEAT]: 'heartbeat',
};

const KIND_NUMBERS: Readonly<Record<RuntimeEvent['kind'] | 'heartbeat', number>> = {
  created: EVENT_KIND.CREATED,
  exited: EVENT_KIND.EXITED,
  deleted: EVENT_KIND.DELETED,
  heartbeat: EVENT_KIND.HEARTBEAT,
};

/** The message's fields, or what is wrong with the bytes. int64s come as decimal text, never rounded. */
function fields(type: typeof MESSAGES.Event, bytes: Uint8Array): Record<string, unknown> | string {
  try {
    return type.toObject(decodeMessage(type, bytes), {
      defaults: true,
      longs: String,
      enums: Number,
      arrays: true,
    }) as Record<string, unknown>;
  } catch (error) {
    return `not a protobuf ${type.name} message (${error instanceof Error ? error.message : String(error)})`;
  }
}

/** Why `id` is not a container ID, or undefined when it is one. */
function idProblem(id: string): string | undefined {
  if (id === '') return 'is empty';
  if (id.length > 128) return `is ${id.length} characters long (at most 128)`;
  if (!ID.test(id)) return `${quoted(id)} has characters other than letters, digits and _.:-`;
  return undefined;
}

/** Why `path` is not an absolute path Warren can compare, or undefined. */
function pathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return `${quoted(path)} is not absolute`;
  if (path.length > MAX_PATH) return `is ${path.length} characters long (at most ${MAX_PATH})`;
  if (path.includes('\0')) return `${quoted(path)} contains NUL`;
  if (path.split('/').includes('..')) return `${quoted(path)} has a ".." component`;
  return undefined;
}

/** Why `prefix` cannot scope an adapter's allocations, or undefined. */
function prefixProblem(prefix: string): string | undefined {
  const path = pathProblem(prefix);
  if (path !== undefined) return path;
  if (prefix.includes('//')) return `${quoted(prefix)} is not normalised (it has "//")`;
  const components = prefix.split('/').filter((c) => c !== '');
  if (components.includes('.')) return `${quoted(prefix)} is not normalised (it has a "." component)`;
  if (components.length < 2)
    return `${quoted(prefix)} has fewer than two components (it would claim too much of the node)`;
  return undefined;
}

function timeOf(value: unknown): number | string {
  const text = typeof value === 'string' ? value : String(value);
  let n: bigint;
  try {
    n = BigInt(text);
  } catch {
    return `time_unix_ms ${quoted(text)} is not an integer`;
  }
  if (n <= 0n || n > BigInt(Number.MAX_SAFE_INTEGER)) return `time_unix_ms ${text} is not a positive safe integer`;
  return Number(n);
}

/** One message of a Watch stream. Never throws. */
export function decodeEvent(bytes: Uint8Array): DecodedEvent {
  const m = fields(MESSAGES.Event, bytes);
  if (typeof m === 'string') return { kind: 'malformed', reason: m };
  const kindNumber = Number(m.kind);
  const kind = KIND_NAMES[kindNumber];
  if (kind === undefined) {
    return {
      kind: 'malformed',
      reason: kindNumber === EVENT_KIND.KIND_UNSPECIFIED ? 'kind is unspecified (0)' : `kind ${kindNumber} is unknown`,
    };
  }
  if (kind === 'heartbeat') return { kind: 'heartbeat' };
  const id = String(m.id);
  const badId = idProblem(id);
  if (badId !== undefined) return { kind: 'malformed', reason: `${kind} event: id ${badId}` };
  const where = `${kind} event for ${id}`;
  const netns = String(m.netns);
  if (netns !== '') {
    const badPath = pathProblem(netns);
    if (badPath !== undefined) return { kind: 'malformed', reason: `${where}: netns ${badPath}` };
  }
  const time = timeOf(m.time_unix_ms);
  if (typeof time === 'string') return { kind: 'malformed', reason: `${where}: ${time}` };
  return { kind: 'event', event: { id, kind, ...(netns === '' ? {} : { netns }), time } };
}

/** One message of a Watch stream, as an adapter sends it. Encodes what it is given, valid or not. */
export function encodeEvent(e: RuntimeEvent | { readonly kind: 'heartbeat' }): Buffer {
  if (e.kind === 'heartbeat') return encode(MESSAGES.Event, { kind: EVENT_KIND.HEARTBEAT });
  return encode(MESSAGES.Event, { id: e.id, kind: KIND_NUMBERS[e.kind], netns: e.netns ?? '', time_unix_ms: e.time });
}

/** A List answer, or why it cannot be trusted. Never throws. */
export function decodeListing(bytes: Uint8Array): RuntimeListing | string {
  const m = fields(MESSAGES.ListResponse, bytes);
  if (typeof m === 'string') return `listing: ${m}`;
  const ids = new Set<string>();
  for (const [i, value] of (m.ids as unknown[]).entries()) {
    const id = String(value);
    const bad = idProblem(id);
    if (bad !== undefined) return `listing: ids[${i}] ${bad}`;
    ids.add(id);
  }
  const prefixes = new Set<string>();
  for (const [i, value] of (m.netns_prefixes as unknown[]).entries()) {
    const prefix = String(value);
    const bad = prefixProblem(prefix);
    if (bad !== undefined) return `listing: netns_prefixes[${i}] ${bad}`;
    prefixes.add(prefix);
  }
  return { ids: [...ids], netnsPrefixes: [...prefixes] };
}

/** A List answer, as an adapter sends it. Encodes what it is given, valid or not. */
export function encodeListing(l: RuntimeListing): Buffer {
  return encode(MESSAGES.ListResponse, { ids: [...l.ids], netns_prefixes: [...l.netnsPrefixes] });
}
