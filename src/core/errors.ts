/**
 * One error class for the whole of Warren. Every error carries a stable string `code` that callers
 * match on (never the message) and keeps its `cause`. Expected outcomes such as "not found" are
 * values, not errors.
 *
 * The class knows no code but the few conditions any layer meets (below). Every other code is
 * declared by the first layer that raises it, in that layer's own errors.ts, and a layer raises
 * only its own codes and those of the layers before it; the tables that must cover every code
 * (CNI code, HTTP status) live in the last layer to declare any. test/api/errors.test.ts checks
 * all of that against the source.
 */

/**
 * Conditions every layer may meet, named the same everywhere: the CNI spec's generic errors
 * (5, 7 and 11), which know nothing of what failed, and a second agent for one node.
 */
export const CORE_ERROR_CODES = [
  /** A file, socket or store could not be read or written, or answered something unreadable. */
  'IO_FAILURE',
  /** A configuration (options, a config file, a config on the wire) cannot be used as given. */
  'INVALID_CONFIG',
  /** A passing condition (a busy or unreachable store, a contended write): the same call may succeed later. */
  'TRY_AGAIN',
  /**
   * Another agent already serves this node: its instance lock (agent) or its live announcement in
   * a cluster store (store) — met by two layers, so declared by the first.
   */
  'ALREADY_RUNNING',
] as const;
export type CoreErrorCode = (typeof CORE_ERROR_CODES)[number];

export class WarrenError<C extends string = string> extends Error {
  readonly code: C;
  /** Extra context for operators; goes into the CNI error's `details`. */
  readonly details: string | undefined;

  constructor(code: C, message: string, options: { cause?: unknown; details?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'WarrenError';
    this.code = code;
    this.details = options.details;
  }
}

/** Whether `error` is a WarrenError, and of `code` when one is given. */
export function isWarrenError<C extends string = string>(error: unknown, code?: C): error is WarrenError<C> {
  return error instanceof WarrenError && (code === undefined || error.code === code);
}

/** The message of anything thrown, for logs and error details. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
