/**
 * One error class for the whole of Warren. Every error carries a stable string `code` that callers
 * match on (never the message), keeps its `cause`, and maps to exactly one CNI error code
 * (see cni/errors.ts). Expected outcomes such as "not found" are values, not errors.
 */

export type WarrenErrorCode =
  | 'INCOMPATIBLE_VERSION'
  | 'UNSUPPORTED_FIELD'
  | 'UNKNOWN_CONTAINER'
  | 'BAD_ENV'
  | 'IO_FAILURE'
  | 'DECODE_FAILURE'
  | 'INVALID_CONFIG'
  | 'TRY_AGAIN'
  | 'AGENT_UNREACHABLE'
  | 'NOT_READY'
  | 'POOL_EXHAUSTED'
  | 'ADDRESS_UNAVAILABLE'
  | 'ALLOCATION_MISSING'
  | 'ALLOCATION_MISMATCH'
  | 'BAD_REQUEST'
  /** Input past a size limit (a request body, a network config on stdin). */
  | 'TOO_LARGE'
  /** No such route, or no such thing to act on. */
  | 'NOT_FOUND'
  /** A route that exists, asked with another method. */
  | 'METHOD_NOT_ALLOWED'
  | 'ALREADY_RUNNING'
  /** A failure nobody anticipated (a bug): what the agent answers for anything not a WarrenError. */
  | 'INTERNAL';

export class WarrenError extends Error {
  readonly code: WarrenErrorCode;
  /** Extra context for operators; goes into the CNI error's `details`. */
  readonly details: string | undefined;

  constructor(code: WarrenErrorCode, message: string, options: { cause?: unknown; details?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'WarrenError';
    this.code = code;
    this.details = options.details;
  }
}

export function isWarrenError(error: unknown, code?: WarrenErrorCode): error is WarrenError {
  return error instanceof WarrenError && (code === undefined || error.code === code);
}

/** The message of anything thrown, for logs and error details. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
