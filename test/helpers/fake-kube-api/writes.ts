/**
 * Writes to custom resources and Leases as the apiserver makes them: create, update (PUT), merge
 * and JSON patch, delete, each on the object or (CRs with the subresource) on `/status`.
 *
 * Guarantees, from the recorded answers:
 * - every update is guarded: PUT needs `metadata.resourceVersion` (422 without, 409 when stale);
 *   an RV left in a patched object is a precondition too; a write that changes nothing is not
 *   stored (same RV, no event);
 * - the main resource ignores `status`, `/status` ignores everything else; `generation` (CRs only)
 *   grows on a spec change and on the deletion mark, nothing else;
 * - delete honours uid/resourceVersion preconditions (409, Kind-cased); an object with finalizers
 *   is only marked (deletionTimestamp, grace 0) and goes when its last finalizer does, with one
 *   DELETED event; new finalizers on a marked object are refused;
 * - an object whose stored form exceeds etcd's request limit is refused with the 500s etcd and its
 *   gRPC client give (1.5 MiB, 2 MiB).
 * Server-side apply is not served: its patch type gets 415 naming the fake.
 */
import { randomUUID } from 'node:crypto';
import { generatedName, isRecord, labelErrors, managedFields, nameErrors, rfc3339, sortKeys } from './metadata.ts';
import type { ObjectStore } from './objects.ts';
import { jsonPatch, mergePatch } from './patch.ts';
import type { Served } from './served.ts';
import {
  type FieldError,
  KubeError,
  alreadyExists,
  badRequest,
  failure,
  invalid,
  modified,
  notFound,
  preconditionFailed,
  qualified,
  qualifiedKind,
} from './status.ts';
import type { KubeObject, ObjectMeta } from './types.ts';

export interface WriteTarget {
  readonly served: Served;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: 'status' | undefined;
  /** The field manager: `?fieldManager=`, else the User-Agent up to its first `/`. */
  readonly manager: string;
}

export interface WriteContext {
  readonly store: ObjectStore;
  readonly now: () => Date;
}

/** Fields of metadata only the server sets. */
const SERVER_OWNED = [
  'uid',
  'creationTimestamp',
  'generation',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'selfLink',
];
const ETCD_REQUEST_LIMIT = 1_572_864;
const GRPC_SEND_LIMIT = 2_097_152;
/** What etcd's request adds to the stored bytes (key and framing), as the recorded message shows. */
const REQUEST_OVERHEAD = 227;

const keyOf = (t: WriteTarget, name: string) => (t.served.namespaced ? `${t.namespace}/${name}` : name);

function metaOf(body: Record<string, unknown>): ObjectMeta {
  return isRecord(body.metadata) ? { ...(body.metadata as ObjectMeta) } : {};
}

function checkVersionAndKind(t: WriteTarget, body: Record<string, unknown>, name: string): void {
  const s = t.served;
  // A built-in type's decoder takes what a body leaves out from the endpoint; an unstructured one cannot.
  if (!s.custom && (body.apiVersion === undefined || body.apiVersion === '')) return;
  if (body.apiVersion === undefined || body.apiVersion === '') {
    const why = "Object 'apiVersion' is missing in 'object has no apiVersion field'";
    throw failure(500, 'InternalError', `Internal error occurred: ${why}`, { causes: [{ message: why }] });
  }
  if (body.apiVersion !== s.apiVersion)
    throw badRequest(
      `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${s.apiVersion})`,
    );
  if (body.kind !== undefined && body.kind !== s.kind)
    throw invalid(
      `${String(body.kind)}.${s.group}`,
      name,
      [
        {
          reason: 'FieldValueInvalid',
          field: 'kind',
          message: `Invalid value: ${JSON.stringify(body.kind)}: must be ${s.kind}`,
        },
      ],
      {
        group: s.group,
        kind: String(body.kind),
      },
    );
}

/**
 * A custom resource is stored with its keys sorted, as it goes on the wire, so that reads (lists of
 * large preloaded objects above all) need not sort it again.
 */
function wireOrder(s: Served, object: KubeObject): KubeObject {
  return s.custom ? (sortKeys(object) as KubeObject) : object;
}

function checkSize(object: KubeObject): void {
  const bytes = Buffer.byteLength(JSON.stringify(object)) + REQUEST_OVERHEAD;
  if (bytes > GRPC_SEND_LIMIT)
    throw failure(
      500,
      '',
      `rpc error: code = ResourceExhausted desc = trying to send message larger than max (${bytes} vs. ${GRPC_SEND_LIMIT})`,
    );
  if (bytes > ETCD_REQUEST_LIMIT) throw failure(500, '', 'etcdserver: request is too large');
}

function refuseInvalid(s: Served, name: string, errors: readonly FieldError[]): void {
  if (errors.length > 0)
    throw invalid(qualifiedKind(s), name, errors, { group: s.group, kind: s.kind, withName: name !== '' });
}

export function create(ctx: WriteContext, t: WriteTarget, body: unknown): { object: KubeObject } {
  const s = t.served;
  if (!isRecord(body)) throw badRequest(`the object provided is unrecognized (must be of type ${s.kind})`);
  const meta = metaOf(body);
  checkVersionAndKind(t, body, String(meta.name ?? ''));
  if (meta.resourceVersion !== undefined && meta.resourceVersion !== '')
    throw failure(500, '', 'resourceVersion should not be set on objects to be created');
  if (s.namespaced) {
    if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== t.namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    meta.namespace = t.namespace as string;
  } else delete meta.namespace;
  if (!meta.name && meta.generateName) meta.name = generatedName(meta.generateName);
  for (const field of [...SERVER_OWNED, 'managedFields', 'resourceVersion']) delete meta[field];
  const object = s.normalize({ ...body, metadata: meta });
  if (s.statusSubresource) delete object.status;
  const name = String(object.metadata.name ?? '');
  refuseInvalid(s, name, [...nameErrors(name), ...labelErrors(object.metadata.labels), ...s.validate(object)]);
  const key = keyOf(t, name);
  if (ctx.store.get(s.plural, key) !== undefined) throw alreadyExists(s, name);
  const now = ctx.now();
  object.metadata.uid = randomUUID();
  object.metadata.creationTimestamp = rfc3339(now);
  if (s.generation) object.metadata.generation = 1;
  object.metadata.managedFields = managedFields(object, undefined, {
    manager: t.manager,
    time: rfc3339(now),
    subresource: undefined,
  });
  object.metadata.resourceVersion = ''; // its place in the key order; the commit fills it in
  const stored = wireOrder(s, object);
  checkSize(stored);
  ctx.store.commit(s.plural, key, 'ADDED', stored, undefined);
  return { object: stored };
}

function current(ctx: WriteContext, t: WriteTarget): KubeObject {
  const object = ctx.store.get(t.served.plural, keyOf(t, t.name as string));
  if (object === undefined) throw notFound(t.served, t.name as string);
  return object;
}

/** What a write by `t` makes of `input` (an object as the client sent or patched it) over `old`. */
function compose(t: WriteTarget, old: KubeObject, input: Record<string, unknown>): KubeObject {
  const s = t.served;
  const normalized = s.normalize({ ...input, apiVersion: s.apiVersion, kind: s.kind, metadata: metaOf(input) });
  if (t.subresource === 'status') {
    const next = structuredClone(old);
    if (normalized.status === undefined) delete next.status;
    else next.status = normalized.status;
    return next;
  }
  const meta = normalized.metadata;
  for (const field of [...SERVER_OWNED, 'name', 'namespace', 'generateName', 'resourceVersion'])
    if (old.metadata[field] === undefined) delete meta[field];
    else meta[field] = old.metadata[field];
  meta.managedFields = old.metadata.managedFields;
  const next: KubeObject = { ...normalized, metadata: meta };
  if (s.statusSubresource) {
    if (old.status === undefined) delete next.status;
    else next.status = old.status;
  }
  return next;
}

/** What generation counts: everything but metadata, and but status when it is a subresource. */
const generational = (o: KubeObject, statusApart: boolean): string => {
  const { metadata: _m, ...rest } = o;
  if (statusApart) delete rest.status;
  return stable(rest);
};

function stable(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isRecord(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}

/** Validates and stores `next` over `old`; returns what the client gets. */
function commitUpdate(ctx: WriteContext, t: WriteTarget, old: KubeObject, next: KubeObject): KubeObject {
  const s = t.served;
  const name = t.name as string;
  const oldFinalizers = (old.metadata.finalizers as string[] | undefined) ?? [];
  const finalizers = Array.isArray(next.metadata.finalizers) ? (next.metadata.finalizers as string[]) : [];
  if (old.metadata.deletionTimestamp !== undefined) {
    const added = finalizers.filter((f) => !oldFinalizers.includes(f));
    if (added.length > 0) {
      const message = `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`;
      const cause = { reason: 'FieldValueForbidden', field: 'metadata.finalizers', message };
      refuseInvalid(s, name, [cause, cause]);
    }
  }
  if (finalizers.length === 0) delete next.metadata.finalizers;
  refuseInvalid(s, name, [...labelErrors(next.metadata.labels), ...s.validate(next)]);
  if (s.generation && generational(old, s.statusSubresource) !== generational(next, s.statusSubresource))
    next.metadata.generation = (Number(old.metadata.generation) || 0) + 1;
  const strip = (o: KubeObject) => stable({ ...o, metadata: { ...o.metadata, managedFields: undefined } });
  if (strip(old) === strip(next)) return old;
  const time = rfc3339(ctx.now());
  next.metadata.managedFields = managedFields(next, old, { manager: t.manager, time, subresource: t.subresource });
  const key = keyOf(t, name);
  if (old.metadata.deletionTimestamp !== undefined && finalizers.length === 0) {
    // The last finalizer gone: the object goes at once; watchers see only DELETED, of the last stored state.
    ctx.store.commit(s.plural, key, 'DELETED', structuredClone(old), old);
    return wireOrder(s, {
      ...next,
      metadata: { ...next.metadata, resourceVersion: old.metadata.resourceVersion as string },
    });
  }
  const stored = wireOrder(s, next);
  checkSize(stored);
  ctx.store.commit(s.plural, key, 'MODIFIED', stored, old);
  return stored;
}

function checkRv(t: WriteTarget, old: KubeObject, rv: unknown, uid: unknown): void {
  const s = t.served;
  const name = t.name as string;
  if (rv === undefined || rv === '' || rv === null) {
    const message = 'Invalid value: 0x0: must be specified for an update';
    throw invalid(qualified(s), name, [{ reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message }], {
      group: s.group,
      kind: s.plural,
    });
  }
  if (!/^\d+$/.test(String(rv)))
    throw failure(500, '', `strconv.ParseUint: parsing ${JSON.stringify(String(rv))}: invalid syntax`);
  if (String(rv) !== old.metadata.resourceVersion) throw modified(s, name);
  if (uid !== undefined && uid !== '' && uid !== old.metadata.uid) {
    const key = `/registry/${s.group}/${s.plural}/${s.namespaced ? `${t.namespace}/` : ''}${name}`;
    const why = `StorageError: invalid object, Code: 4, Key: ${key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${String(uid)}, UID in object meta: ${String(old.metadata.uid)}`;
    throw failure(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(s)} ${JSON.stringify(name)}: ${why}`, {
      name,
      group: s.group,
      kind: s.plural,
    });
  }
}

export function update(ctx: WriteContext, t: WriteTarget, body: unknown): KubeObject {
  const s = t.served;
  const name = t.name as string;
  if (!isRecord(body)) throw badRequest(`the object provided is unrecognized (must be of type ${s.kind})`);
  const meta = metaOf(body);
  if (meta.name !== undefined && meta.name !== name)
    throw badRequest(`the name of the object (${String(meta.name)}) does not match the name on the URL (${name})`);
  if (s.namespaced && meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== t.namespace)
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  checkVersionAndKind(t, body, name);
  const old = current(ctx, t);
  checkRv(t, old, meta.resourceVersion, meta.uid);
  return commitUpdate(ctx, t, old, compose(t, old, body));
}

const PATCH_TYPES = 'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml';

export function patch(ctx: WriteContext, t: WriteTarget, contentType: string, body: unknown): KubeObject {
  const old = current(ctx, t);
  const base = structuredClone(old);
  let patched: unknown;
  if (contentType === 'application/merge-patch+json') {
    if (!isRecord(body))
      throw badRequest('json: cannot unmarshal into the object: a merge patch must be a JSON object');
    patched = mergePatch(base, body);
  } else if (contentType === 'application/json-patch+json') {
    try {
      patched = jsonPatch(base, body);
    } catch (error) {
      if (error instanceof KubeError && error.status.code === 422)
        throw failure(422, 'Invalid', 'the server rejected our request due to an error in our request', {});
      throw error;
    }
  } else throw unsupportedPatch(contentType);
  if (!isRecord(patched)) throw badRequest('the patch removed the object');
  const meta = metaOf(patched);
  if (meta.resourceVersion !== undefined && meta.resourceVersion !== old.metadata.resourceVersion) {
    checkRv(t, old, meta.resourceVersion, undefined);
  }
  if (meta.name !== t.name)
    throw badRequest(`the name of the object (${String(meta.name)}) does not match the name on the URL (${t.name})`);
  return commitUpdate(ctx, t, old, compose(t, old, patched));
}

export function unsupportedPatch(contentType: string): KubeError {
  if (contentType === 'application/apply-patch+yaml')
    return failure(
      415,
      'UnsupportedMediaType',
      'the fake Kubernetes API does not serve server-side apply (application/apply-patch+yaml)',
    );
  return failure(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${PATCH_TYPES}`,
  );
}

const POLICIES = ['Foreground', 'Background', 'Orphan'];

/** Deletes, or marks an object with finalizers; returns the Success Status or the marked object. */
export function remove(ctx: WriteContext, t: WriteTarget, body: unknown): unknown {
  const s = t.served;
  const name = t.name as string;
  const old = current(ctx, t);
  const options = isRecord(body) ? body : {};
  const pre = isRecord(options.preconditions) ? options.preconditions : {};
  if (pre.uid !== undefined && pre.uid !== null && pre.uid !== old.metadata.uid)
    throw preconditionFailed(
      s,
      name,
      `the UID in the precondition (${String(pre.uid)}) does not match the UID in record (${String(old.metadata.uid)}). The object might have been deleted and then recreated`,
    );
  if (
    pre.resourceVersion !== undefined &&
    pre.resourceVersion !== null &&
    pre.resourceVersion !== old.metadata.resourceVersion
  )
    throw preconditionFailed(
      s,
      name,
      `the ResourceVersion in the precondition (${String(pre.resourceVersion)}) does not match the ResourceVersion in record (${String(old.metadata.resourceVersion)}). The object might have been modified`,
    );
  const policy = options.propagationPolicy;
  if (policy !== undefined && policy !== null && !POLICIES.includes(String(policy))) {
    const message = `Unsupported value: ${JSON.stringify(policy)}: supported values: "Foreground", "Background", "Orphan", "nil"`;
    throw invalid(
      'DeleteOptions.meta.k8s.io',
      '',
      [{ reason: 'FieldValueNotSupported', field: 'propagationPolicy', message }],
      {
        group: 'meta.k8s.io',
        kind: 'DeleteOptions',
        withName: false,
      },
    );
  }
  const finalizers = [...((old.metadata.finalizers as string[] | undefined) ?? [])];
  if (policy === 'Foreground' && !finalizers.includes('foregroundDeletion')) finalizers.push('foregroundDeletion');
  if (policy === 'Orphan' && !finalizers.includes('orphan')) finalizers.push('orphan');
  const key = keyOf(t, name);
  if (finalizers.length === 0) {
    ctx.store.commit(s.plural, key, 'DELETED', structuredClone(old), old);
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Success',
      details: { name, group: s.group, kind: s.plural, uid: old.metadata.uid },
    };
  }
  if (old.metadata.deletionTimestamp !== undefined) return s.encode(old);
  const next = structuredClone(old);
  next.metadata.finalizers = finalizers;
  next.metadata.deletionTimestamp = rfc3339(ctx.now());
  next.metadata.deletionGracePeriodSeconds = 0;
  if (s.generation) next.metadata.generation = (Number(old.metadata.generation) || 0) + 1;
  const stored = wireOrder(s, next);
  ctx.store.commit(s.plural, key, 'MODIFIED', stored, old);
  return s.encode(stored);
}
