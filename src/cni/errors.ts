/**
 * CNI error objects. Every Warren error code maps to one spec code; Warren's own outcomes use the
 * plugin-specific range (100+), documented in the README.
 */
import { WarrenError, type WarrenErrorCode, messageOf } from '../core/errors.ts';
import { SPEC_VERSION } from './spec.ts';

export const CNI_CODES: Record<WarrenErrorCode, number> = {
  INCOMPATIBLE_VERSION: 1,
  UNSUPPORTED_FIELD: 2,
  UNKNOWN_CONTAINER: 3,
  BAD_ENV: 4,
  IO_FAILURE: 5,
  DECODE_FAILURE: 6,
  INVALID_CONFIG: 7,
  TRY_AGAIN: 11,
  AGENT_UNREACHABLE: 11,
  NOT_READY: 50,
  POOL_EXHAUSTED: 100,
  ADDRESS_UNAVAILABLE: 101,
  ALLOCATION_MISSING: 102,
  ALLOCATION_MISMATCH: 103,
  BAD_REQUEST: 7,
  // Too much to decode: the plugin's stdin limit has always answered 6.
  TOO_LARGE: 6,
  // A route the agent does not serve: a plugin and an agent of different versions, not the input.
  NOT_FOUND: 5,
  METHOD_NOT_ALLOWED: 5,
  ALREADY_RUNNING: 5,
  INTERNAL: 5,
};

export interface CniErrorObject {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

export function toCniError(error: unknown, cniVersion: string = SPEC_VERSION): CniErrorObject {
  if (error instanceof WarrenError) {
    const out: CniErrorObject = { cniVersion, code: CNI_CODES[error.code], msg: error.message };
    const details = error.details ?? causeDetails(error.message, error.cause);
    if (details !== undefined) out.details = details;
    return out;
  }
  return { cniVersion, code: 5, msg: `internal error: ${messageOf(error)}` };
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
