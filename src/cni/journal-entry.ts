/**
 * One missed-delete intent: what a release needs (the owner of the addresses), written by the
 * plugin when it cannot reach the agent on DEL, and the name of the file that holds it.
 *
 * Guarantees of the file name (journalFileName):
 * - Injective: two different owners (network, container ID, ifname) never share a name, so one
 *   DEL never overwrites another's intent. Where the owner fits in 255 bytes the name is a
 *   reversible encoding of it, `<containerID>~<ifname, percent-encoded>~<network>.release`: the
 *   container ID and network name are drawn from [A-Za-z0-9_.-] and so contain no "~", and the
 *   percent-encoded ifname contains none either, so splitting on "~" gives the owner back. An owner
 *   too long for that is named `<first 64 of the ID>~<ifname>~~<sha256 of the exact owner>.release`:
 *   the empty field ("~~") sets these apart from the reversible names (whose fields are never
 *   empty), and sha256 keeps them apart from each other (a collision-resistant digest of the whole
 *   owner; the readable prefix is for operators only).
 * - One safe path component of at most 255 bytes, starting with a letter or digit, for every owner
 *   ownerProblem accepts; an owner it refuses is never named.
 * - decodeEntry accepts a file only under the name its content implies, so a name and a content
 *   never disagree about whose DEL it is. Names written by older plugins
 *   (`<id>_<ifname>_<32-bit hash of network>.release`, which could collide) are still accepted, so
 *   intents recorded before an upgrade are released; they are never written any more. The two
 *   schemes cannot be mistaken for each other: new names hold at least two "~", old ones at most one.
 */
import { createHash } from 'node:crypto';
import type { BootStamp } from '../core/moment.ts';
import { isPlainObject, unknownKeys } from '../core/validate.ts';
import { type Owner, ownerKey } from '../ipam/allocation.ts';
import { isValidContainerID, isValidIfname, isValidNetworkName } from './args.ts';

export const JOURNAL_FORMAT = 1;
export const JOURNAL_SUFFIX = '.release';
/** An intent is a few hundred bytes; anything much larger is not one. */
export const MAX_ENTRY_BYTES = 16 * 1024;
/** The longest file name Linux file systems take (NAME_MAX). */
export const MAX_NAME_BYTES = 255;

export interface JournalEntry {
  readonly format: typeof JOURNAL_FORMAT;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  readonly netns?: string;
  /** Milliseconds since the epoch, when the plugin wrote it (wall clock: for people, and the last resort). */
  readonly recordedAt: number;
  /**
   * The boot's monotonic clock when the plugin wrote it: what orders the DEL against the agent's
   * allocations (core/moment.ts). Absent in entries of older plugins and on hosts without a boot ID;
   * those are ordered by `recordedAt`, as they always were.
   */
  readonly stamp?: BootStamp;
  /** Why the plugin fell back to the journal. */
  readonly reason: string;
}

export type Decoded =
  | { readonly kind: 'entry'; readonly entry: JournalEntry }
  | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Every name either scheme makes: a letter or digit first (never a dot-file, never "." or ".."),
 * then only characters that are safe in a path component, 255 bytes in all.
 */
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.~%-]{0,246}\.release$/;
/** Where a long container ID is cut in a digest name: a Docker or CRI ID (64 hex digits) stays whole. */
const ID_PREFIX = 64;

/** UTF-8 bytes outside [A-Za-z0-9_.-] as %xx (lower case): one spelling per text, so injective. */
function percentEncode(text: string): string {
  return Array.from(Buffer.from(text, 'utf8'), (b) => {
    const c = String.fromCharCode(b);
    return /[A-Za-z0-9_.-]/.test(c) ? c : `%${b.toString(16).padStart(2, '0')}`;
  }).join('');
}

/** Why an owner cannot be journaled, or undefined when it can. */
export function ownerProblem(owner: Owner): string | undefined {
  if (!isValidContainerID(owner.containerID))
    return 'container ID is not 1-255 letters, digits, "_", "." or "-" starting with a letter or digit';
  if (!isValidNetworkName(owner.network)) return 'network name is not valid';
  // A lone surrogate has no UTF-8 spelling (it would encode as U+FFFD, the same as U+FFFD itself),
  // and no runtime can pass one: environment variables are bytes.
  if (!isValidIfname(owner.ifname) || !owner.ifname.isWellFormed()) return 'interface name is not valid';
  return undefined;
}

export function journalFileName(owner: Owner): string {
  const problem = ownerProblem(owner);
  if (problem !== undefined) throw new Error(`cannot journal this release: ${problem}`);
  const ifname = percentEncode(owner.ifname);
  // Every character is ASCII here, so length is bytes.
  const reversible = `${owner.containerID}~${ifname}~${owner.network}${JOURNAL_SUFFIX}`;
  if (reversible.length <= MAX_NAME_BYTES) return reversible;
  // The owner key (JSON of the triple) is injective: the digest covers exactly the owner, nothing
  // cut. The names are on disk, so the key's encoding is fixed; journal-entry.test.ts pins it.
  const digest = createHash('sha256').update(ownerKey(owner)).digest('hex');
  return `${owner.containerID.slice(0, ID_PREFIX)}~${ifname}~~${digest}${JOURNAL_SUFFIX}`;
}

/** 32-bit FNV-1a, hex: what plugins before the injective names used. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/**
 * The name an older plugin gave this owner. Accepted when reading, so intents written before an
 * upgrade are not stranded; never written: different owners could share it.
 */
export function legacyJournalFileName(owner: Owner): string {
  const problem = ownerProblem(owner);
  if (problem !== undefined) throw new Error(`cannot journal this release: ${problem}`);
  const id =
    owner.containerID.length <= 100
      ? owner.containerID
      : `${owner.containerID.slice(0, 64)}~${fnv1a(owner.containerID)}`;
  return `${id}_${percentEncode(owner.ifname)}_${fnv1a(owner.network)}${JOURNAL_SUFFIX}`;
}

export function encodeEntry(entry: JournalEntry): string {
  return `${JSON.stringify(entry)}\n`;
}

/** The fields of an entry: JournalEntry's, and no others. */
const ENTRY_FIELDS: ReadonlySet<string> = new Set([
  'format',
  'network',
  'containerID',
  'ifname',
  'netns',
  'recordedAt',
  'stamp',
  'reason',
]);
/** A boot ID as Linux draws it (a UUID), or what a test clock names its boot: short, printable. */
const BOOT = /^[A-Za-z0-9-]{1,64}$/;

/** Why a `stamp` field is not one, or undefined when it is. */
function stampProblem(stamp: unknown): string | undefined {
  if (!isPlainObject(stamp)) return 'stamp is not an object';
  const s = stamp as Record<string, unknown>;
  const [unknown] = unknownKeys(s, new Set(['boot', 'at']));
  if (unknown !== undefined) return `unknown field "stamp.${unknown.slice(0, 40)}"`;
  if (typeof s.boot !== 'string' || !BOOT.test(s.boot)) return 'stamp.boot is not a boot ID';
  if (typeof s.at !== 'number' || !Number.isFinite(s.at) || s.at < 0) return 'stamp.at is not a non-negative number';
  return undefined;
}

/** Validates a journal file: its content, and that its name is the one its content implies. */
export function decodeEntry(name: string, text: string): Decoded {
  if (!FILE_NAME.test(name)) return { kind: 'invalid', reason: 'file name is not a journal entry name' };
  if (text.trim() === '') return { kind: 'invalid', reason: 'file is empty' };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return { kind: 'invalid', reason: `not valid JSON (${(error as Error).message})` };
  }
  if (!isPlainObject(raw)) return { kind: 'invalid', reason: 'not a JSON object' };
  const r = raw as Record<string, unknown>;
  if (r.format !== JOURNAL_FORMAT) return { kind: 'invalid', reason: `format is not ${JOURNAL_FORMAT}` };
  const [unknown] = unknownKeys(r, ENTRY_FIELDS);
  if (unknown !== undefined) return { kind: 'invalid', reason: `unknown field "${unknown.slice(0, 40)}"` };
  for (const key of ['network', 'containerID', 'ifname', 'reason'] as const) {
    if (typeof r[key] !== 'string') return { kind: 'invalid', reason: `${key} is missing or not a string` };
  }
  if (r.netns !== undefined && typeof r.netns !== 'string') return { kind: 'invalid', reason: 'netns is not a string' };
  if (typeof r.recordedAt !== 'number' || !Number.isFinite(r.recordedAt))
    return { kind: 'invalid', reason: 'recordedAt is not a number' };
  const badStamp = r.stamp === undefined ? undefined : stampProblem(r.stamp);
  if (badStamp !== undefined) return { kind: 'invalid', reason: badStamp };
  const owner = { network: r.network as string, containerID: r.containerID as string, ifname: r.ifname as string };
  const problem = ownerProblem(owner);
  if (problem !== undefined) return { kind: 'invalid', reason: problem };
  if (journalFileName(owner) !== name && legacyJournalFileName(owner) !== name)
    return { kind: 'invalid', reason: 'file name does not match its content' };
  return { kind: 'entry', entry: r as unknown as JournalEntry };
}
