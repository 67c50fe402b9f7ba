/**
 * CNI error objects, and the CNI code of every code raised up to this layer: every Warren error
 * code maps to one spec code; Warren's own outcomes use the plugin-specific range (100+),
 * documented in docs/error-codes.md. The codes of the agent's API (an agent not reachable, a request
 * refused) are declared after this layer: api/errors.ts adds their CNI codes to this table, and
 * its `toCniError` is the one the plugin and the agent answer with.
 */
import { type CoreErrorCode, WarrenError, messageOf } from '../core/errors.ts';
import type { AllocatorErrorCode } from '../allocator/errors.ts';
import { SPEC_VERSION } from './spec.ts';

/** The codes this layer raises: the spec's well-known errors, and CHECK's verdicts. */
export const CNI_ERROR_CODES = [
  'INCOMPATIBLE_VERSION',
  'UNSUPPORTED_FIELD',
  'UNKNOWN_CONTAINER',
  /** CNI_* variables (CNI_ARGS included) missing or malformed. */
  'BAD_ENV',
  /** The network config is not JSON. */
  'DECODE_FAILURE',
  /** CHECK: the attachment holds no address in one of the config's ranges. */
  'ALLOCATION_MISSING',
  /** CHECK: the attachment holds another address in a range than its prevResult says. */
  'ALLOCATION_MISMATCH',
] as const;
export type CniErrorCode = (typeof CNI_ERROR_CODES)[number];

/** Every code raised by this layer or one before it. */
export type CniLayerErrorCode = CoreErrorCode | AllocatorErrorCode | CniErrorCode;

/** The CNI code of every code up to this layer. A new code does not compile until it is placed here. */
export const CNI_CODES: Readonly<Record<CniLayerErrorCode, number>> = {
  INCOMPATIBLE_VERSION: 1,
  UNSUPPORTED_FIELD: 2,
  UNKNOWN_CONTAINER: 3,
  BAD_ENV: 4,
  IO_FAILURE: 5,
  DECODE_FAILURE: 6,
  INVALID_CONFIG: 7,
  TRY_AGAIN: 11,
  ALREADY_RUNNING: 5,
  POOL_EXHAUSTED: 100,
  ADDRESS_UNAVAILABLE: 101,
  ALLOCATION_MISSING: 102,
  ALLOCATION_MISMATCH: 103,
};

/** The spec's "internal error": what anything answers whose code no table gives. */
const INTERNAL_CNI_CODE = 5;

export interface CniErrorObject {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

/**
 * The CNI error object for `error`, its code looked up in `codes` (a table covering every code
 * that can reach the caller; api/errors.ts has the full one). Anything not a WarrenError is 5
 * with its message after "internal error: ".
 */
export function cniErrorOf(
  error: unknown,
  codes: Readonly<Record<string, number>>,
  cniVersion: string = SPEC_VERSION,
): CniErrorObject {
  if (error instanceof WarrenError) {
    const code = Object.hasOwn(codes, error.code) ? (codes[error.code] as number) : INTERNAL_CNI_CODE;
    const out: CniErrorObject = { cniVersion, code, msg: error.message };
    const details = error.details ?? causeDetails(error.message, error.cause);
    if (details !== undefined) out.details = details;
    return out;
  }
  return { cniVersion, code: INTERNAL_CNI_CODE, msg: `internal error: ${messageOf(error)}` };
}

/**
 * The cause's text, for `details`, unless the message already names it: runtimes print msg and
 * details together, and "not reachable (ENOENT); connect ENOENT /run/warren/warren.sock" says one
 * thing twice.
 */
function causeDetails(message: string, cause: unknown): string | undefined {
  if (cause === undefined) return undefined;
  const errno = (cause as NodeJS.ErrnoException | null)?.code;
  if (typeof errno === 'string' && message.includes(errno)) return undefined;
  return messageOf(cause);
}
