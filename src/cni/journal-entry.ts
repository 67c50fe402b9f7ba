/**
 * One missed-delete intent: what a release needs (the owner of the addresses), written by the
 * plugin when it cannot reach the agent on DEL. The file name is derived from the owner and never
 * used as a path component as it comes from the runtime: the container ID must already pass the
 * CNI spec's character set, anything else in the name is percent-encoded, and an over-long ID is
 * shortened with a hash. The agent checks that a file's name matches its content.
 */
import type { Owner } from '../ipam/allocation.ts';
import { isValidContainerID, isValidIfname, isValidNetworkName } from './args.ts';

export const JOURNAL_FORMAT = 1;
export const JOURNAL_SUFFIX = '.release';
/** An intent is a few hundred bytes; anything much larger is not one. */
export const MAX_ENTRY_BYTES = 16 * 1024;

export interface JournalEntry {
  readonly format: typeof JOURNAL_FORMAT;
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  readonly netns?: string;
  /** Milliseconds since the epoch, when the plugin wrote it. */
  readonly recordedAt: number;
  /** Why the plugin fell back to the journal. */
  readonly reason: string;
}

export type Decoded = { readonly kind: 'entry'; readonly entry: JournalEntry } | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Long enough for every name journalFileName makes: an ID of up to 100, "_", an ifname of 15 UTF-16
 * units percent-encoded to up to 135, "_", an 8-digit hash: 245, plus ".release" is 253 (< 255).
 */
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.~%\-]{0,244}\.release$/;

/** 32-bit FNV-1a, hex: enough to keep names of different networks apart, and cheap to load. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

function encodeComponent(text: string): string {
  return Array.from(Buffer.from(text, 'utf8'), (b) => {
    const c = String.fromCharCode(b);
    return /[A-Za-z0-9_.\-]/.test(c) ? c : `%${b.toString(16).padStart(2, '0')}`;
  }).join('');
}

/** Why an owner cannot be journaled, or undefined when it can. */
export function ownerProblem(owner: Owner): string | undefined {
  if (!isValidContainerID(owner.containerID)) return 'container ID is not 1-255 letters, digits, "_", "." or "-" starting with a letter or digit';
  if (!isValidNetworkName(owner.network)) return 'network name is not valid';
  if (!isValidIfname(owner.ifname)) return 'interface name is not valid';
  return undefined;
}

export function journalFileName(owner: Owner): string {
  const problem = ownerProblem(owner);
  if (problem !== undefined) throw new Error(`cannot journal this release: ${problem}`);
  const id = owner.containerID.length <= 100 ? owner.containerID : `${owner.containerID.slice(0, 64)}~${fnv1a(owner.containerID)}`;
  return `${id}_${encodeComponent(owner.ifname)}_${fnv1a(owner.network)}${JOURNAL_SUFFIX}`;
}

export function encodeEntry(entry: JournalEntry): string {
  return `${JSON.stringify(entry)}\n`;
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
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { kind: 'invalid', reason: 'not a JSON object' };
  const r = raw as Record<string, unknown>;
  if (r.format !== JOURNAL_FORMAT) return { kind: 'invalid', reason: `format is not ${JOURNAL_FORMAT}` };
  for (const key of Object.keys(r)) {
    if (!['format', 'network', 'containerID', 'ifname', 'netns', 'recordedAt', 'reason'].includes(key)) return { kind: 'invalid', reason: `unknown field "${key.slice(0, 40)}"` };
  }
  for (const key of ['network', 'containerID', 'ifname', 'reason'] as const) {
    if (typeof r[key] !== 'string') return { kind: 'invalid', reason: `${key} is missing or not a string` };
  }
  if (r.netns !== undefined && typeof r.netns !== 'string') return { kind: 'invalid', reason: 'netns is not a string' };
  if (typeof r.recordedAt !== 'number' || !Number.isFinite(r.recordedAt)) return { kind: 'invalid', reason: 'recordedAt is not a number' };
  const owner = { network: r.network as string, containerID: r.containerID as string, ifname: r.ifname as string };
  const problem = ownerProblem(owner);
  if (problem !== undefined) return { kind: 'invalid', reason: problem };
  if (journalFileName(owner) !== name) return { kind: 'invalid', reason: 'file name does not match its content' };
  return { kind: 'entry', entry: r as unknown as JournalEntry };
}
