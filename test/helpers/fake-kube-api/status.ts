/**
 * The fake's refusals: `Status` objects with the real server's reasons, messages and details, in
 * the real key order (kind, apiVersion, metadata, status, message, reason, details, code). A
 * handler throws a `KubeError`; the server answers its status with `status.code`.
 */
import type { KubeStatus, StatusCause } from './types.ts';

/** A refusal the handler answers with `status` as the body and `status.code` as the HTTP status. */
export class KubeError extends Error {
  readonly status: KubeStatus;
  constructor(status: KubeStatus) {
    super(status.message);
    this.status = status;
  }
}

/** A Status refusal; `reason` '' leaves the reason out, as the apiserver's bare 500s do. */
export function failure(
  code: number,
  reason: string,
  message: string,
  details?: KubeStatus['details'],
  metadata: KubeStatus['metadata'] = {},
): KubeError {
  return new KubeError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata,
    status: 'Failure',
    message,
    ...(reason === '' ? {} : { reason }),
    ...(details === undefined ? {} : { details }),
    code,
  });
}

export const badRequest = (message: string): KubeError => failure(400, 'BadRequest', message);

export const unsupportedByFake = (what: string): KubeError =>
  badRequest(`the fake Kubernetes API does not support ${what}`);

export type FieldError = { readonly reason: string; readonly field: string; readonly message: string };

export const required = (field: string, detail = ''): FieldError => ({
  reason: 'FieldValueRequired',
  field,
  message: `Required value${detail === '' ? '' : `: ${detail}`}`,
});

export const invalidValue = (field: string, value: unknown, detail: string): FieldError => ({
  reason: 'FieldValueInvalid',
  field,
  message: `Invalid value: ${goValue(value)}: ${detail}`,
});

/** How field.Invalid prints a bad value: strings quoted, numbers bare. */
export function goValue(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/**
 * 422 Invalid. `subject` is what the message names: `Kind` for core objects, `Kind.group` for
 * schema and metadata errors of CRs and Leases, `plural.group` for the missing-RV refusal.
 */
export function invalid(
  subject: string,
  name: string,
  errors: readonly FieldError[],
  details: { group?: string; kind: string; withName?: boolean },
): KubeError {
  // The message joins distinct errors only (ToAggregate dedupes); the causes keep every one.
  const texts = [...new Set(errors.map((e) => `${e.field}: ${e.message}`))];
  const summary = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  const causes: StatusCause[] = errors.map((e) => ({ reason: e.reason, message: e.message, field: e.field }));
  return failure(422, 'Invalid', `${subject} ${JSON.stringify(name)} is invalid: ${summary}`, {
    ...(details.withName === false ? {} : { name }),
    ...(details.group === undefined ? {} : { group: details.group }),
    kind: details.kind,
    causes,
  });
}

/** What a resource's refusals name it: `plural.group` (or the plural alone for core), and the Kind. */
export interface Naming {
  readonly plural: string;
  readonly group: string;
  readonly kind: string;
}

export const qualified = (n: Naming): string => (n.group === '' ? n.plural : `${n.plural}.${n.group}`);
export const qualifiedKind = (n: Naming): string => (n.group === '' ? n.kind : `${n.kind}.${n.group}`);

const groupOf = (n: Naming): { group?: string } => (n.group === '' ? {} : { group: n.group });

export function notFound(n: Naming, name: string): KubeError {
  return failure(404, 'NotFound', `${qualified(n)} ${JSON.stringify(name)} not found`, {
    name,
    ...groupOf(n),
    kind: n.plural,
  });
}

export function alreadyExists(n: Naming, name: string): KubeError {
  return failure(409, 'AlreadyExists', `${qualified(n)} ${JSON.stringify(name)} already exists`, {
    name,
    ...groupOf(n),
    kind: n.plural,
  });
}

/** 409 for a stale resourceVersion (PUT, or an RV in a patch). */
export function modified(n: Naming, name: string): KubeError {
  return failure(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(n)} ${JSON.stringify(name)}: the object has been modified; please apply your changes to the latest version and try again`,
    { name, ...groupOf(n), kind: n.plural },
  );
}

/** 409 for a failed delete precondition: the Kind, not the plural, in message and details. */
export function preconditionFailed(n: Naming, name: string, what: string): KubeError {
  return failure(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedKind(n)} ${JSON.stringify(name)}: ${what}`,
    {
      name,
      ...groupOf(n),
      kind: n.kind,
    },
  );
}

/** 403 as RBAC words it: `<plural>.<group>[ "<name>"] is forbidden: User ... cannot <verb> resource ...`. */
export function forbidden(
  n: Naming,
  user: string,
  verb: string,
  resource: string,
  namespace: string | undefined,
  name: string | undefined,
): KubeError {
  const scope = namespace === undefined ? 'at the cluster scope' : `in the namespace ${JSON.stringify(namespace)}`;
  const subject = name === undefined ? qualified(n) : `${qualified(n)} ${JSON.stringify(name)}`;
  const message = `${subject} is forbidden: User ${JSON.stringify(user)} cannot ${verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(n.group)} ${scope}`;
  return failure(403, 'Forbidden', message, {
    ...(name === undefined ? {} : { name }),
    ...groupOf(n),
    kind: n.plural,
  });
}

/** NamespaceLifecycle's refusal of an Event created in a namespace being deleted, as the API server gives it. */
export function terminatingNamespace(namespace: string, name: string): KubeError {
  const subject = name === '' ? 'events' : `events ${JSON.stringify(name)}`;
  const why = `unable to create new content in namespace ${namespace} because it is being terminated`;
  const cause = {
    reason: 'NamespaceTerminating',
    message: `namespace ${namespace} is being terminated`,
    field: 'metadata.namespace',
  };
  return failure(403, 'Forbidden', `${subject} is forbidden: ${why}`, {
    ...(name === '' ? {} : { name }),
    kind: 'events',
    causes: [cause],
  });
}
