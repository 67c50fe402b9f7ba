/**
 * StatefulSets (apps/v1, namespaced), a built-in type, as far as Warren reads them (the sticky
 * addresses' chore lists and watches them: agent/kubernetes/sticky-release.ts): Go struct key order
 * (`kind, apiVersion, metadata, spec, status`), `metadata.generation` kept, a status subresource;
 * the spec is kept as given (the fake runs no StatefulSet controller and validates nothing of it
 * beyond its being an object), `spec.replicas` an integer >= 0 as the apiserver requires.
 */
import { META_ORDER, isRecord, ordered } from './metadata.ts';
import type { ListMeta, Served } from './served.ts';
import { type FieldError, badRequest, invalidValue } from './status.ts';
import type { KubeObject } from './types.ts';

function encode(object: KubeObject): Record<string, unknown> {
  const out = ordered(object, ['kind', 'apiVersion', 'metadata', 'spec', 'status']);
  out.metadata = ordered(object.metadata, META_ORDER);
  return out;
}

export const STATEFULSETS: Served = {
  plural: 'statefulsets',
  group: 'apps',
  kind: 'StatefulSet',
  version: 'v1',
  apiVersion: 'apps/v1',
  listKind: 'StatefulSetList',
  namespaced: true,
  fields: new Set(['metadata.name', 'metadata.namespace']),
  custom: false,
  generation: true,
  statusSubresource: true,
  since: 0,
  normalize(body) {
    if (body.spec !== undefined && body.spec !== null && !isRecord(body.spec))
      throw badRequest('StatefulSet in version "v1" cannot be handled as a StatefulSet: spec is not an object');
    const spec = isRecord(body.spec) ? body.spec : {};
    return {
      kind: 'StatefulSet',
      apiVersion: 'apps/v1',
      metadata: { ...(body.metadata as KubeObject['metadata']) },
      spec: { replicas: 1, ...spec },
      ...(isRecord(body.status) ? { status: body.status } : {}),
    };
  },
  validate(object) {
    const spec = isRecord(object.spec) ? object.spec : {};
    const errors: FieldError[] = [];
    if (!(typeof spec.replicas === 'number' && Number.isInteger(spec.replicas) && spec.replicas >= 0))
      errors.push(invalidValue('spec.replicas', spec.replicas, 'must be greater than or equal to 0'));
    return errors;
  },
  encode,
  encodeList: (items: readonly KubeObject[], meta: ListMeta) => ({
    kind: 'StatefulSetList',
    apiVersion: 'apps/v1',
    metadata: {
      resourceVersion: meta.resourceVersion,
      ...(meta.continue === '' ? {} : { continue: meta.continue }),
      ...(meta.remainingItemCount === undefined ? {} : { remainingItemCount: meta.remainingItemCount }),
    },
    items: items.map((item) => {
      const { kind: _k, apiVersion: _a, ...rest } = encode(item);
      return rest;
    }),
  }),
};
