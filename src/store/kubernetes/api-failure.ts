/**
 * A failed request to the Kubernetes API, as a value: what a list-then-watch loop needs to decide
 * (relist on 410, name the missing permission on 403, back off on anything else), what an
 * operator reads in the status, and the Status' causes, by which an expected refusal (a namespace
 * being terminated) is told from a failure. Failures come in these shapes, all read here so that
 * no other module guesses at them:
 *
 * - an answer (api-client.ts `ApiAnswer`) whose status is not 2xx, the body a `Status` (JSON
 *   text): `failureOfResponse`; thrown by the agent's core reads and Events as an error with a
 *   numeric `code` and the `body` text (sources/kubernetes/core-api.ts `ApiStatusError`, the shape
 *   of @kubernetes/client-node's `ApiException`, which tools and tests still use);
 * - a watch refused inside the stream: an `ERROR` event carrying a `Status` object
 *   (`code: 410, reason: "Expired"`): `failureOfStatus`;
 * - no answer: the client's TRY_AGAIN, its cause the network error with its `code`
 *   (`ECONNREFUSED`); a watch silent past its inactivity timeout (reason `Timeout`).
 */
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isPlainObject as isRecord } from '../../core/validate.ts';

export interface ApiFailure {
  /** The HTTP status, or the `code` of a Status in an ERROR event; absent when nothing answered. */
  readonly code?: number;
  /** The Status' `reason` (`Expired`, `Forbidden`), or the network error's code (`ECONNREFUSED`). */
  readonly reason?: string;
  readonly message: string;
  /** The Status' `details.causes`, when it gave any: what the server says by type, not in prose. */
  readonly causes?: readonly StatusCause[];
}

/**
 * One of a Status' `details.causes`. On the wire the cause's type is the key `reason` (client-go's
 * `StatusCause.Type`): `FieldValueInvalid`, or `NamespaceTerminating` for a create refused in a
 * namespace being deleted.
 */
export interface StatusCause {
  readonly reason?: string;
  readonly message?: string;
  readonly field?: string;
}

/** The cause the API server's NamespaceLifecycle admission gives its 403 (core/v1 `NamespaceTerminatingCause`). */
export const NAMESPACE_TERMINATING_CAUSE = 'NamespaceTerminating';

/** A `Status` object (from a body or an ERROR event) as a failure; `fallbackCode` when it names none. */
export function failureOfStatus(status: unknown, fallbackCode?: number): ApiFailure {
  const code = isRecord(status) && typeof status.code === 'number' && status.code > 0 ? status.code : fallbackCode;
  const reason =
    isRecord(status) && typeof status.reason === 'string' && status.reason !== '' ? status.reason : undefined;
  const text =
    isRecord(status) && typeof status.message === 'string' && status.message !== '' ? status.message : undefined;
  const message = text ?? reason ?? (code === undefined ? 'an error without a Status' : `HTTP ${code}`);
  const causes = isRecord(status) ? causesOf(status.details) : [];
  return {
    ...defined({ code, reason }),
    message,
    ...(causes.length === 0 ? {} : { causes }),
  };
}

/** The well-formed entries of `details.causes`, their string fields only; none when there is no list. */
function causesOf(details: unknown): StatusCause[] {
  if (!isRecord(details) || !Array.isArray(details.causes)) return [];
  return details.causes.filter(isRecord).map((c) => {
    const field = (key: 'reason' | 'message' | 'field') => (typeof c[key] === 'string' ? { [key]: c[key] } : {});
    return { ...field('reason'), ...field('message'), ...field('field') };
  });
}

/** Whether the server gave a cause of this type (client-go's `HasStatusCause`). */
export function hasStatusCause(failure: ApiFailure, type: string): boolean {
  return (failure.causes ?? []).some((c) => c.reason === type);
}

/**
 * Whether the failure is the refusal of new content in a namespace being deleted, known by its
 * cause as Kubernetes' own controllers know it, not by its message (whose words may change).
 */
export function isNamespaceTerminating(failure: ApiFailure): boolean {
  return hasStatusCause(failure, NAMESPACE_TERMINATING_CAUSE);
}

/** An HTTP answer that is not a success: its body's Status when it carries one, else the text. */
export function failureOfResponse(httpStatus: number, body: string): ApiFailure {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isRecord(parsed) && parsed.kind === 'Status') return failureOfStatus(parsed, httpStatus);
  } catch {
    // Not JSON (a proxy's error page): the text says what there is to say.
  }
  const text = body.trim().slice(0, 200);
  return { code: httpStatus, message: text === '' ? `HTTP ${httpStatus}` : `HTTP ${httpStatus}: ${text}` };
}

/** Anything a request threw: an error carrying an HTTP status, or one with a network cause. */
export function failureOfError(error: unknown): ApiFailure {
  if (isRecord(error) || error instanceof Error) {
    const e = error as { statusCode?: unknown; code?: unknown; body?: unknown; name?: unknown; cause?: unknown };
    // A watch refused with an HTTP status (Watch.watch) or a typed call's ApiException.
    const status =
      typeof e.statusCode === 'number'
        ? e.statusCode
        : typeof e.code === 'number' && e.code >= 100 && e.code < 600
          ? e.code
          : undefined;
    if (status !== undefined) {
      if (typeof e.body === 'string' && e.body !== '') return failureOfResponse(status, e.body);
      return {
        code: status,
        message: `HTTP ${status}${error instanceof Error && error.message !== '' ? ` ${error.message}` : ''}`,
      };
    }
    if (e.name === 'TimeoutError')
      return { reason: 'Timeout', message: 'no data from the API server within the watch inactivity timeout' };
    const cause = e.cause as { code?: unknown; message?: unknown } | undefined;
    if (isRecord(cause) && typeof cause.code === 'string') {
      return {
        reason: cause.code,
        message: `${messageOf(error)}: ${typeof cause.message === 'string' ? cause.message : cause.code}`,
      };
    }
  }
  return { message: messageOf(error) };
}

/** Whether the failure is 410 Gone: the resourceVersion is too old, only a new listing helps. */
export function isExpired(failure: ApiFailure): boolean {
  return (
    failure.code === 410 || (failure.code === undefined && (failure.reason === 'Expired' || failure.reason === 'Gone'))
  );
}

/**
 * The permission a 403 says is missing, as "verb resource" ("list pods"; "list deployments.apps"
 * for a named API group). RBAC's message names both (`cannot list resource "pods" in API group ""`);
 * a watch's 403 arrives without its body, so `verb` and `resource` (what was asked) stand in.
 */
export function missingPermission(failure: ApiFailure, verb: string, resource: string): string | undefined {
  if (failure.code !== 403) return undefined;
  const match = /cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?/.exec(failure.message);
  if (match === null) return `${verb} ${resource}`;
  const group = match[3] ?? '';
  return `${match[1]} ${match[2]}${group === '' ? '' : `.${group}`}`;
}

/** One line for logs and status: "HTTP 403 Forbidden: pods is forbidden: ...". */
export function describeFailure(failure: ApiFailure): string {
  const head =
    failure.code === undefined
      ? failure.reason
      : `HTTP ${failure.code}${failure.reason === undefined ? '' : ` ${failure.reason}`}`;
  if (head === undefined || failure.message.startsWith(head)) return failure.message;
  return `${head}: ${failure.message}`;
}

/**
 * The WarrenError an answer of the API server `server` the caller did not expect means (the
 * guarantees of api-client.ts `refusal`): 429 and 5xx TRY_AGAIN; a 404 that is not a Status, the
 * CRDs not installed; a 403, the permission missing; anything else IO_FAILURE with the Status.
 * `resource` names what was asked for (`create warrenblocks.warren.dev`), for a refusal without a body.
 */
export function refusalOf(
  server: string,
  what: string,
  answer: { readonly status: number; readonly json: boolean; readonly failure: ApiFailure },
  verb: string,
  resource: string,
): WarrenError {
  const f = answer.failure;
  const said = describeFailure(f);
  if (answer.status === 429 || answer.status >= 500)
    return new WarrenError('TRY_AGAIN', `the Kubernetes API server ${server} failed to ${what}: ${said}`);
  if (answer.status === 404 && !answer.json)
    return new WarrenError(
      'IO_FAILURE',
      `the Kubernetes API server ${server} does not serve ${resource} (${what}): ` +
        `are the CustomResourceDefinitions of warren.dev installed (deploy/crds)?`,
    );
  if (answer.status === 403)
    return new WarrenError(
      'IO_FAILURE',
      `the Kubernetes API server ${server} refused to ${what}: ${said} (grant Warren's service account ` +
        `"${missingPermission(f, verb, resource)}", as deploy/ does)`,
    );
  return new WarrenError('IO_FAILURE', `the Kubernetes API server ${server} refused to ${what}: ${said}`);
}
