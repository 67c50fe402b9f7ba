/**
 * Leases (coordination.k8s.io/v1, namespaced), a built-in type: Go struct key order, no
 * `generation`, unknown fields dropped silently, `acquireTime`/`renewTime` as MicroTime with exactly
 * six fractional digits (anything else is the 400 Go's time parser gives), and the 422s of
 * `leaseDurationSeconds <= 0` and `leaseTransitions < 0` (with the apiserver's "must to greater").
 */
import { META_ORDER, isRecord, ordered } from './metadata.ts';
import type { ListMeta, Served } from './served.ts';
import { type FieldError, badRequest, invalidValue } from './status.ts';
import type { KubeObject } from './types.ts';

const SPEC_ORDER = ['holderIdentity', 'leaseDurationSeconds', 'acquireTime', 'renewTime', 'leaseTransitions'];
const INTEGERS = new Set(['leaseDurationSeconds', 'leaseTransitions']);
const TIMES = new Set(['acquireTime', 'renewTime']);
const LAYOUT = '2006-01-02T15:04:05.000000Z07:00';

/** The layout elements Go's time.Parse walks, each with what a value must hold there. */
const ELEMENTS: ReadonlyArray<readonly [string, RegExp]> = [
  ['2006', /^\d{4}/],
  ['-', /^-/],
  ['01', /^\d{2}/],
  ['-', /^-/],
  ['02', /^\d{2}/],
  ['T', /^T/],
  ['15', /^\d{2}/],
  [':', /^:/],
  ['04', /^\d{2}/],
  [':', /^:/],
  ['05', /^\d{2}/],
  ['.000000', /^\.\d{6}/],
  ['Z07:00', /^(Z|[+-]\d{2}:\d{2})/],
];

/** Go's error for a MicroTime that is not `2006-01-02T15:04:05.000000Z07:00`, or undefined when it parses. */
export function microTimeError(value: string): string | undefined {
  let rest = value;
  for (const [element, pattern] of ELEMENTS) {
    const match = pattern.exec(rest);
    if (match === null)
      return `parsing time ${JSON.stringify(value)} as ${JSON.stringify(LAYOUT)}: cannot parse ${JSON.stringify(rest)} as ${JSON.stringify(element)}`;
    rest = rest.slice(match[0].length);
  }
  if (rest !== '') return `parsing time ${JSON.stringify(value)}: extra text: ${JSON.stringify(rest)}`;
  return undefined;
}

const cannotHandle = (why: string) => badRequest(`Lease in version "v1" cannot be handled as a Lease: ${why}`);

function goType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  return typeof value === 'object' ? 'object' : typeof value;
}

function encode(object: KubeObject): Record<string, unknown> {
  const out = ordered(object, ['kind', 'apiVersion', 'metadata', 'spec']);
  out.metadata = ordered(object.metadata, META_ORDER);
  if (isRecord(object.spec)) out.spec = ordered(object.spec, SPEC_ORDER);
  return out;
}

export const LEASES: Served = {
  plural: 'leases',
  group: 'coordination.k8s.io',
  kind: 'Lease',
  version: 'v1',
  apiVersion: 'coordination.k8s.io/v1',
  listKind: 'LeaseList',
  namespaced: true,
  fields: new Set(['metadata.name', 'metadata.namespace']),
  custom: false,
  generation: false,
  statusSubresource: false,
  since: 0,
  normalize(body) {
    const spec: Record<string, unknown> = {};
    if (body.spec !== undefined && body.spec !== null && !isRecord(body.spec))
      throw cannotHandle(
        `json: cannot unmarshal ${goType(body.spec)} into Go struct field Lease.spec of type v1.LeaseSpec`,
      );
    for (const [key, value] of Object.entries(isRecord(body.spec) ? body.spec : {})) {
      if (value === null) continue;
      if (INTEGERS.has(key) && !(typeof value === 'number' && Number.isInteger(value)))
        throw cannotHandle(
          `json: cannot unmarshal ${goType(value)} into Go struct field LeaseSpec.spec.${key} of type int32`,
        );
      if ((key === 'holderIdentity' || TIMES.has(key)) && typeof value !== 'string')
        throw cannotHandle(
          `json: cannot unmarshal ${goType(value)} into Go struct field LeaseSpec.spec.${key} of type string`,
        );
      if (TIMES.has(key)) {
        const error = microTimeError(value as string);
        if (error !== undefined) throw cannotHandle(error);
      }
      if (SPEC_ORDER.includes(key)) spec[key] = value;
    }
    const metadata = { ...(body.metadata as KubeObject['metadata']) };
    delete metadata.generation;
    return { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', metadata, spec };
  },
  validate(object) {
    const spec = isRecord(object.spec) ? object.spec : {};
    const errors: FieldError[] = [];
    if (typeof spec.leaseDurationSeconds === 'number' && spec.leaseDurationSeconds <= 0)
      errors.push(invalidValue('spec.leaseDurationSeconds', spec.leaseDurationSeconds, 'must be greater than 0'));
    if (typeof spec.leaseTransitions === 'number' && spec.leaseTransitions < 0)
      errors.push(invalidValue('spec.leaseTransitions', spec.leaseTransitions, 'must to greater or equal than 0'));
    return errors;
  },
  encode,
  encodeList: (items: readonly KubeObject[], meta: ListMeta) => ({
    kind: 'LeaseList',
    apiVersion: 'coordination.k8s.io/v1',
    metadata: {
      resourceVersion: meta.resourceVersion,
      ...(meta.continue === '' ? {} : { continue: meta.continue }),
      ...(meta.remainingItemCount === undefined ? {} : { remainingItemCount: meta.remainingItemCount }),
    },
    // Items of a typed list carry no kind or apiVersion of their own.
    items: items.map((item) => {
      const { kind: _k, apiVersion: _a, ...rest } = encode(item);
      return rest;
    }),
  }),
};
