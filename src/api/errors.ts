/**
 * Warren's error codes on the wire, in one table: each code has exactly one HTTP status, chosen
 * by its code and never by its message. Both directions live here so they cannot drift: the
 * server turns a thrown error into a status and an `ErrorAnswer`; the client turns that answer
 * back into a WarrenError with the same code and message, and the answer's HTTP status beside
 * them (`AnsweredError`).
 *
 * This is the layer that sees every code (the agent's API is the last to declare any: the agent
 * answers with these and those before them), so the tables that must cover every code are here:
 * HTTP status, and the CNI code (cni/errors.ts's table of the codes up to cni, with this layer's
 * added) that the plugin and the agent put in a CNI error.
 *
 * Expected errors (the caller's mistake, a refusal, "try again later") are recognised by
 * `isExpected`, kubelet-style, and are not logged as the agent's failures; everything else is.
 */
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import { isPlainObject } from '../core/validate.ts';
import { CNI_CODES, type CniErrorObject, type CniLayerErrorCode, cniErrorOf } from '../cni/errors.ts';
import { SPEC_VERSION } from '../cni/spec.ts';
import type { ErrorAnswer } from './protocol.ts';

/** The codes of the agent's API: its refusals of a request, the client's, and the agent's own answers. */
export const API_ERROR_CODES = [
  'BAD_REQUEST',
  /** Input past a size limit (a request body, a network config on stdin). */
  'TOO_LARGE',
  /** No such route, or no such thing to act on. */
  'NOT_FOUND',
  /** A route that exists, asked with another method. */
  'METHOD_NOT_ALLOWED',
  /** The client's: nothing answers on the socket, or the answer broke off. */
  'AGENT_UNREACHABLE',
  /** The agent cannot serve ADD now (its store is not usable). */
  'NOT_READY',
  /** An operator's release of an address its container still uses (its network namespace exists), without force. */
  'IN_USE',
  /** A failure nobody anticipated (a bug): what the agent answers for anything not a WarrenError. */
  'INTERNAL',
] as const;
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/** Every code Warren raises, each one a code the agent may answer with. */
export type WarrenErrorCode = CniLayerErrorCode | ApiErrorCode;

/** The HTTP status of every code. A new code does not compile until it is placed here. */
export const HTTP_STATUS: Readonly<Record<WarrenErrorCode, number>> = {
  // The request is wrong: fixing it is the caller's business.
  BAD_REQUEST: 400,
  INVALID_CONFIG: 400,
  DECODE_FAILURE: 400,
  BAD_ENV: 400,
  INCOMPATIBLE_VERSION: 400,
  UNSUPPORTED_FIELD: 400,
  NOT_FOUND: 404,
  UNKNOWN_CONTAINER: 404,
  ALLOCATION_MISSING: 404,
  METHOD_NOT_ALLOWED: 405,
  // The request is fine but the state says no.
  ALREADY_RUNNING: 409,
  ADDRESS_UNAVAILABLE: 409,
  POOL_EXHAUSTED: 409,
  ALLOCATION_MISMATCH: 409,
  IN_USE: 409,
  TOO_LARGE: 413,
  // Not now: the same request may succeed later.
  TRY_AGAIN: 503,
  NOT_READY: 503,
  // The agent failed.
  IO_FAILURE: 500,
  AGENT_UNREACHABLE: 500,
  INTERNAL: 500,
};

/** The CNI code of this layer's codes; cni/errors.ts has those of the codes before it. */
export const API_CNI_CODES: Readonly<Record<ApiErrorCode, number>> = {
  BAD_REQUEST: 7,
  // Too much to decode: the plugin's stdin limit has always answered 6.
  TOO_LARGE: 6,
  // A route the agent does not serve: a plugin and an agent of different versions, not the input.
  NOT_FOUND: 5,
  METHOD_NOT_ALLOWED: 5,
  AGENT_UNREACHABLE: 11,
  NOT_READY: 50,
  // Never a CNI call's answer: an operator's release asked without force.
  IN_USE: 7,
  INTERNAL: 5,
};

/** The CNI code of every code. */
export const ALL_CNI_CODES: Readonly<Record<WarrenErrorCode, number>> = { ...CNI_CODES, ...API_CNI_CODES };

/** The CNI error object for anything thrown: what the plugin prints and the agent's CNI service answers. */
export function toCniError(error: unknown, cniVersion: string = SPEC_VERSION): CniErrorObject {
  return cniErrorOf(error, ALL_CNI_CODES, cniVersion);
}

/** The status an error is answered with: its code's, or 500 for anything not a WarrenError. */
export function httpStatusOf(error: unknown): number {
  return isWarrenError(error) && isWarrenErrorCode(error.code) ? HTTP_STATUS[error.code] : 500;
}

/**
 * Whether an error is an expected outcome rather than a failure of the agent: the caller's
 * mistake or a refusal (any status below 500), or a passing condition the caller retries.
 */
export function isExpected(error: unknown): boolean {
  if (!isWarrenError(error)) return false;
  return httpStatusOf(error) < 500 || error.code === 'TRY_AGAIN' || error.code === 'NOT_READY';
}

/** The answer to a failed request. Anything not a WarrenError is INTERNAL. */
export function errorAnswer(error: unknown): ErrorAnswer {
  return { error: { code: isWarrenError(error) ? error.code : 'INTERNAL', message: messageOf(error) } };
}

/** Whether `code` is one this side of the wire knows (not a prototype key such as "toString"). */
function isWarrenErrorCode(code: unknown): code is WarrenErrorCode {
  return typeof code === 'string' && Object.hasOwn(HTTP_STATUS, code);
}

/**
 * A WarrenError that a non-200 answer stood for, with the answer's HTTP status kept beside its
 * code: a caller that must know "no such route" (an agent older than the route) reads the status,
 * not the message, also when the body is not one this client reads.
 */
export class AnsweredError extends WarrenError<WarrenErrorCode> {
  readonly httpStatus: number;

  constructor(code: WarrenErrorCode, message: string, httpStatus: number) {
    super(code, message);
    this.httpStatus = httpStatus;
  }
}

/**
 * The WarrenError a non-200 answer stands for: the agent's code and message as it sent them. An
 * answer that is not an `ErrorAnswer` (a proxy, another program on the socket) is an IO_FAILURE
 * naming the status; a code this client does not know is kept in the message, as INTERNAL.
 */
export function errorFromAnswer(status: number, body: unknown, peer: string): AnsweredError {
  const error = isPlainObject(body) ? body.error : undefined;
  const code = isPlainObject(error) ? error.code : undefined;
  const message = isPlainObject(error) ? error.message : undefined;
  if (typeof message !== 'string') {
    return new AnsweredError('IO_FAILURE', `${peer} answered HTTP ${status} without an error`, status);
  }
  if (isWarrenErrorCode(code)) return new AnsweredError(code, message, status);
  return new AnsweredError('INTERNAL', `${typeof code === 'string' ? code : `HTTP ${status}`}: ${message}`, status);
}
