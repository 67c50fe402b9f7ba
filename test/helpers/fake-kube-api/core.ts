/**
 * The core/v1 resources the fake serves: pods, nodes and namespaces (get, list, watch; tests drive them through
 * the handle), and events (get, list, watch, create, patch, as clients post them). Lists come back
 * whole (no paging: `limit` is ignored, `continue` refused), as a real server may also answer.
 * Events must hold what Warren promises to send (reason, a type of Normal or Warning, involvedObject
 * kind, namespace and name), which core/v1 itself does not all demand.
 */
import { randomUUID } from 'node:crypto';
import { generatedName, isRecord, rfc3339 } from './metadata.ts';
import { ObjectStore } from './objects.ts';
import { jsonPatch, mergePatch } from './patch.ts';
import { type Selection, selection } from './selectors.ts';
import {
  type FieldError,
  alreadyExists,
  badRequest,
  failure,
  invalid,
  modified,
  notFound,
  required,
  terminatingNamespace,
} from './status.ts';
import type { KubeObject, Resource, Verb } from './types.ts';

export interface CoreInfo {
  readonly plural: Resource;
  readonly group: '';
  readonly kind: string;
  readonly listKind: string;
  readonly namespaced: boolean;
  readonly verbs: ReadonlySet<Verb>;
  /** Field labels the real server supports in fieldSelector for this resource. */
  readonly fields: ReadonlySet<string>;
}

export const CORE: Record<Resource, CoreInfo> = {
  pods: {
    plural: 'pods',
    group: '',
    kind: 'Pod',
    listKind: 'PodList',
    namespaced: true,
    verbs: new Set(['get', 'list', 'watch']),
    fields: new Set([
      'metadata.name',
      'metadata.namespace',
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'status.phase',
      'status.podIP',
    ]),
  },
  nodes: {
    plural: 'nodes',
    group: '',
    kind: 'Node',
    listKind: 'NodeList',
    namespaced: false,
    verbs: new Set(['get', 'list', 'watch']),
    fields: new Set(['metadata.name', 'spec.unschedulable']),
  },
  namespaces: {
    plural: 'namespaces',
    group: '',
    kind: 'Namespace',
    listKind: 'NamespaceList',
    namespaced: false,
    verbs: new Set(['get', 'list', 'watch']),
    fields: new Set(['metadata.name', 'status.phase']),
  },
  events: {
    plural: 'events',
    group: '',
    kind: 'Event',
    listKind: 'EventList',
    namespaced: true,
    verbs: new Set(['get', 'list', 'watch', 'create', 'patch']),
    fields: new Set([
      'metadata.name',
      'metadata.namespace',
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'reason',
      'type',
    ]),
  },
};

/** The patch media types the real server accepts for core objects, apply (server-side apply) aside. */
export const CORE_PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
];

/** core/v1 Event validation, with the fields Warren always sends made required (see the header). */
function eventErrors(event: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  if (!event.metadata.name) errors.push(required('metadata.name', 'name or generateName is required'));
  const involved = event.involvedObject;
  if (!isRecord(involved)) errors.push(required('involvedObject'));
  else {
    for (const field of ['kind', 'namespace', 'name'])
      if (typeof involved[field] !== 'string' || involved[field] === '')
        errors.push(required(`involvedObject.${field}`));
    if (
      typeof involved.namespace === 'string' &&
      involved.namespace !== '' &&
      involved.namespace !== event.metadata.namespace
    )
      errors.push({
        reason: 'FieldValueInvalid',
        field: 'involvedObject.namespace',
        message: `Invalid value: ${JSON.stringify(involved.namespace)}: does not match event.namespace`,
      });
  }
  if (typeof event.reason !== 'string' || event.reason === '') errors.push(required('reason'));
  if (typeof event.type !== 'string' || event.type === '') errors.push(required('type'));
  else if (event.type !== 'Normal' && event.type !== 'Warning')
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'type',
      message: `Unsupported value: ${JSON.stringify(event.type)}: supported values: "Normal", "Warning"`,
    });
  return errors;
}

/** metav1.Time has second precision: the server answers `...:05Z` for `...:05.123Z`. */
function truncateTimes(event: KubeObject): void {
  for (const field of ['firstTimestamp', 'lastTimestamp']) {
    const value = event[field];
    if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) event[field] = rfc3339(new Date(value));
  }
}

export interface CoreRoute {
  readonly resource: Resource;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

/** Pods, nodes and events in the shared store. */
export class CoreResources {
  readonly #store: ObjectStore;
  readonly #now: () => Date;
  readonly terminating = new Set<string>();

  constructor(store: ObjectStore, now: () => Date) {
    this.#store = store;
    this.#now = now;
  }

  key(resource: Resource, object: KubeObject): string {
    return ObjectStore.keyOf(object, CORE[resource].namespaced);
  }

  existing(resource: Resource, key: string): KubeObject {
    const object = this.#store.get(resource, key);
    if (object === undefined) throw new Error(`fake kube api: no ${resource} ${key}`);
    return object;
  }

  /** Fills in what the server owns (kind, uid, creation time, a generated name) and stores the object. */
  create(resource: Resource, input: KubeObject): KubeObject {
    const info = CORE[resource];
    const object: KubeObject = { ...structuredClone(input), apiVersion: 'v1', kind: info.kind };
    const meta = object.metadata;
    if (!meta.name && meta.generateName) meta.name = generatedName(meta.generateName);
    if (!meta.name) throw new Error(`fake kube api: a ${info.kind} needs metadata.name`);
    if (info.namespaced) meta.namespace ??= 'default';
    else delete meta.namespace;
    const key = this.key(resource, object);
    if (this.#store.get(resource, key) !== undefined)
      throw new Error(`fake kube api: ${resource} ${key} already exists`);
    meta.uid ??= randomUUID();
    meta.creationTimestamp ??= rfc3339(this.#now());
    this.#store.commit(resource, key, 'ADDED', object, undefined);
    return structuredClone(object);
  }

  update(resource: Resource, key: string, change: (object: KubeObject) => void): KubeObject {
    const previous = this.existing(resource, key);
    const object = structuredClone(previous);
    change(object);
    if (this.key(resource, object) !== key)
      throw new Error(`fake kube api: an update may not rename ${resource} ${key}`);
    this.#store.commit(resource, key, 'MODIFIED', object, previous);
    return structuredClone(object);
  }

  remove(resource: Resource, key: string, last: (object: KubeObject) => void): void {
    const previous = this.existing(resource, key);
    const object = structuredClone(previous);
    last(object);
    this.#store.commit(resource, key, 'DELETED', object, previous);
  }

  stored(route: CoreRoute): KubeObject {
    const name = route.name as string;
    const key = route.namespace === undefined ? name : `${route.namespace}/${name}`;
    const object = this.#store.get(route.resource, key);
    if (object === undefined) throw notFound(CORE[route.resource], name);
    return object;
  }

  selection(route: CoreRoute, query: URLSearchParams): Selection {
    // Core resources keep the fake's older, smaller selector support: set-based requirements are refused.
    return selection(query, CORE[route.resource].fields, route.namespace, { setBased: false });
  }

  list(route: CoreRoute, query: URLSearchParams): unknown {
    const info = CORE[route.resource];
    const { matches } = this.selection(route, query);
    const map = this.#store.map(route.resource);
    // Items of a typed list carry no kind or apiVersion of their own on the real server either.
    const items = this.#store
      .keys(route.resource)
      .map((key) => map.get(key) as KubeObject)
      .filter(matches)
      .map(({ kind: _kind, apiVersion: _apiVersion, ...rest }) => rest);
    return { kind: info.listKind, apiVersion: 'v1', metadata: { resourceVersion: String(this.#store.rv) }, items };
  }

  // --- Events, as clients post and patch them --------------------------------------------------------

  createFromWire(route: CoreRoute, body: unknown): KubeObject {
    const namespace = route.namespace as string;
    if (!isRecord(body)) throw badRequest('the body of the request must be a JSON object');
    if (body.kind !== undefined && body.kind !== 'Event')
      throw badRequest(`the kind of the provided object (${String(body.kind)}) is not Event`);
    if (body.apiVersion !== undefined && body.apiVersion !== 'v1')
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (v1)`,
      );
    const meta = isRecord(body.metadata) ? { ...body.metadata } : {};
    if (meta.resourceVersion !== undefined && meta.resourceVersion !== '')
      throw failure(500, 'InternalError', 'resourceVersion should not be set on objects to be created');
    if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    // Admission comes before the name is generated and the object validated.
    if (this.terminating.has(namespace)) {
      throw terminatingNamespace(namespace, typeof meta.name === 'string' ? meta.name : '');
    }
    const event: KubeObject = { ...body, metadata: { ...meta, namespace } };
    if (!event.metadata.name && event.metadata.generateName)
      event.metadata.name = generatedName(event.metadata.generateName);
    const errors = eventErrors(event);
    if (errors.length > 0) throw invalid('Event', event.metadata.name ?? '', errors, { kind: 'Event' });
    truncateTimes(event);
    if (this.#store.get('events', `${namespace}/${event.metadata.name}`) !== undefined)
      throw alreadyExists(CORE.events, event.metadata.name as string);
    for (const owned of ['uid', 'creationTimestamp', 'deletionTimestamp']) delete event.metadata[owned];
    return this.create('events', event);
  }

  patch(route: CoreRoute, contentType: string | undefined, body: unknown): KubeObject {
    const current = this.stored(route);
    const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
    let patched: unknown;
    if (type === 'application/json-patch+json') patched = jsonPatch(current, body);
    else {
      // A strategic merge patch of an Event is a merge patch: Event has no list with a merge key.
      if (!isRecord(body)) throw badRequest('the body of a merge patch must be a JSON object');
      patched = mergePatch(current, body);
    }
    if (!isRecord(patched) || !isRecord(patched.metadata)) throw badRequest('the patch removed the object metadata');
    const result = patched as KubeObject;
    const name = route.name as string;
    if (result.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(result.metadata.name)}) does not match the name on the URL (${name})`,
      );
    if (result.metadata.namespace !== route.namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    if (
      result.metadata.resourceVersion !== undefined &&
      result.metadata.resourceVersion !== current.metadata.resourceVersion
    )
      throw modified(CORE[route.resource], name);
    const errors = route.resource === 'events' ? eventErrors(result) : [];
    if (errors.length > 0) throw invalid(CORE[route.resource].kind, name, errors, { kind: CORE[route.resource].kind });
    truncateTimes(result);
    for (const owned of ['uid', 'creationTimestamp'] as const) result.metadata[owned] = current.metadata[owned];
    result.kind = current.kind;
    result.apiVersion = current.apiVersion;
    const key = this.key(route.resource, current);
    return this.update(route.resource, key, (object) => {
      for (const field of Object.keys(object)) delete object[field];
      Object.assign(object, structuredClone(result));
    });
  }
}
