/**
 * CustomResourceDefinitions (apiextensions.k8s.io/v1): registered from the fake's options (at once)
 * or created over the API, where the 201 carries `status.conditions: null` and the resource is only
 * served after `crdEstablishMs`, when NamesAccepted and then Established are written (two RVs);
 * until then its paths answer the text/plain `404 page not found` of an unknown path. The CRD object
 * comes back in Go struct order with its schema properties sorted by name. Update and delete of a
 * CRD are not served (405).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { META_ORDER, isRecord, ordered, rfc3339 } from './metadata.ts';
import { type Schema, prune, unsupportedKeywords, validate } from './schema.ts';
import type { ListMeta, Served } from './served.ts';
import { badRequest } from './status.ts';
import type { CrdObject, KubeObject } from './types.ts';

// The YAML parser @kubernetes/client-node itself uses, resolved through it (no new dependency).
const jsYaml = createRequire(import.meta.resolve('@kubernetes/client-node'))('js-yaml') as {
  loadAll(text: string): unknown[];
  load(text: string): unknown;
};

export const parseYaml = (text: string): unknown => jsYaml.load(text);

/** Every CRD in the repository's deploy/crds/. */
export function deployCrds(): CrdObject[] {
  const dir = join(import.meta.dirname, '..', '..', '..', 'deploy', 'crds');
  return readdirSync(dir)
    .filter((file) => /\.ya?ml$/.test(file))
    .sort()
    .flatMap((file) => jsYaml.loadAll(readFileSync(join(dir, file), 'utf8')))
    .filter((doc): doc is CrdObject => isRecord(doc) && doc.kind === 'CustomResourceDefinition');
}

const SCHEMA_ORDER = [
  'id',
  '$schema',
  '$ref',
  'description',
  'type',
  'format',
  'title',
  'default',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'multipleOf',
  'enum',
  'maxProperties',
  'minProperties',
  'required',
  'items',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'properties',
  'additionalProperties',
  'patternProperties',
  'dependencies',
  'additionalItems',
  'definitions',
  'externalDocs',
  'example',
  'nullable',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-list-type',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
];

/** JSONSchemaProps as the apiserver writes it back: struct order, properties sorted by name. */
function orderSchema(schema: unknown): unknown {
  if (!isRecord(schema)) return schema;
  const out = ordered(schema, SCHEMA_ORDER);
  if (isRecord(out.properties))
    out.properties = Object.fromEntries(
      Object.keys(out.properties)
        .sort()
        .map((k) => [k, orderSchema((out.properties as Record<string, unknown>)[k])]),
    );
  for (const key of ['items', 'additionalProperties']) if (isRecord(out[key])) out[key] = orderSchema(out[key]);
  return out;
}

export interface CrdVersion {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly listKind: string;
  readonly shortNames: readonly string[];
  readonly namespaced: boolean;
  readonly schema: Schema;
  readonly statusSubresource: boolean;
}

/** Reads what the fake needs from a CRD; refuses (400) what it cannot serve faithfully. */
export function readCrd(crd: CrdObject): { name: string; version: CrdVersion } {
  const spec = isRecord(crd.spec) ? crd.spec : {};
  const names = isRecord(spec.names) ? spec.names : {};
  const versions = Array.isArray(spec.versions) ? spec.versions.filter(isRecord) : [];
  const served = versions.filter((v) => v.served === true);
  const group = String(spec.group ?? '');
  const plural = String(names.plural ?? '');
  const name = String(crd.metadata?.name ?? '');
  if (group === '' || plural === '' || typeof names.kind !== 'string' || name !== `${plural}.${group}`)
    throw badRequest(
      `the fake Kubernetes API needs spec.group, spec.names.plural and .kind, and metadata.name <plural>.<group> (${name})`,
    );
  if (served.length !== 1) throw badRequest('the fake Kubernetes API serves exactly one version of a CRD');
  const v = served[0] as Record<string, unknown>;
  const schema = ((v.schema as Record<string, unknown> | undefined)?.openAPIV3Schema ?? {}) as Schema;
  const unsupported = unsupportedKeywords(schema);
  if (unsupported.length > 0)
    throw badRequest(`the fake Kubernetes API does not implement the schema keywords ${unsupported.join(', ')}`);
  return {
    name,
    version: {
      group,
      version: String(v.name),
      plural,
      singular: String(names.singular ?? names.kind).toLowerCase(),
      kind: names.kind,
      listKind: String(names.listKind ?? `${names.kind}List`),
      shortNames: Array.isArray(names.shortNames) ? names.shortNames.map(String) : [],
      namespaced: spec.scope === 'Namespaced',
      schema,
      statusSubresource: isRecord(v.subresources) && isRecord(v.subresources.status),
    },
  };
}

/** The CRD object as created: struct order, defaults filled, conditions null. */
export function crdObject(crd: CrdObject, v: CrdVersion, meta: { manager: string; now: Date }): KubeObject {
  const spec = crd.spec as Record<string, unknown>;
  const time = rfc3339(meta.now);
  const versions = (spec.versions as Record<string, unknown>[]).map((version) =>
    ordered(
      {
        ...version,
        ...(isRecord(version.schema)
          ? { schema: { openAPIV3Schema: orderSchema(version.schema.openAPIV3Schema) } }
          : {}),
      },
      [
        'name',
        'served',
        'storage',
        'deprecated',
        'deprecationWarning',
        'schema',
        'subresources',
        'additionalPrinterColumns',
      ],
    ),
  );
  const names = ordered(spec.names as Record<string, unknown>, [
    'plural',
    'singular',
    'shortNames',
    'kind',
    'listKind',
    'categories',
  ]);
  return {
    kind: 'CustomResourceDefinition',
    apiVersion: 'apiextensions.k8s.io/v1',
    metadata: ordered(
      {
        ...(crd.metadata.labels === undefined ? {} : { labels: crd.metadata.labels }),
        ...(crd.metadata.annotations === undefined ? {} : { annotations: crd.metadata.annotations }),
        name: crd.metadata.name,
        uid: randomUUID(),
        resourceVersion: '',
        generation: 1,
        creationTimestamp: time,
        managedFields: [
          {
            manager: meta.manager,
            operation: 'Update',
            apiVersion: 'apiextensions.k8s.io/v1',
            time,
            fieldsType: 'FieldsV1',
            fieldsV1: {
              'f:spec': {
                'f:conversion': { '.': {}, 'f:strategy': {} },
                'f:group': {},
                'f:names': Object.fromEntries(
                  Object.keys(names)
                    .sort()
                    .map((k) => [`f:${k}`, {}]),
                ),
                'f:scope': {},
                'f:versions': {},
              },
            },
          },
        ],
      },
      META_ORDER,
    ),
    spec: ordered({ ...spec, names, versions, conversion: spec.conversion ?? { strategy: 'None' } }, [
      'group',
      'names',
      'scope',
      'versions',
      'conversion',
      'preserveUnknownFields',
    ]),
    status: { conditions: null, acceptedNames: { plural: '', kind: '' }, storedVersions: [v.version] },
  };
}

/** The CRD with its names accepted (`established` false) or established too. */
export function crdConditions(crd: KubeObject, v: CrdVersion, established: boolean, now: Date): KubeObject {
  const time = rfc3339(now);
  const condition = (type: string, reason: string, message: string) => ({
    type,
    status: 'True',
    lastTransitionTime: time,
    reason,
    message,
  });
  const conditions = [condition('NamesAccepted', 'NoConflicts', 'no conflicts found')];
  if (established)
    conditions.push(condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'));
  const acceptedNames = {
    plural: v.plural,
    singular: v.singular,
    ...(v.shortNames.length === 0 ? {} : { shortNames: [...v.shortNames] }),
    kind: v.kind,
    listKind: v.listKind,
  };
  return { ...structuredClone(crd), status: { conditions, acceptedNames, storedVersions: [v.version] } };
}

/** How the fake serves the custom resource a CRD defines, from RV `since` on. */
export function customServed(v: CrdVersion, since: number): Served {
  const apiVersion = `${v.group}/${v.version}`;
  // Stored custom resources are kept in wire order (writes.ts, preload): nothing to sort on a read.
  const encode = (object: KubeObject): unknown => object;
  return {
    plural: v.plural,
    group: v.group,
    kind: v.kind,
    version: v.version,
    apiVersion,
    listKind: v.listKind,
    namespaced: v.namespaced,
    fields: new Set(v.namespaced ? ['metadata.name', 'metadata.namespace'] : ['metadata.name']),
    custom: true,
    generation: true,
    statusSubresource: v.statusSubresource,
    since,
    normalize(body) {
      const { metadata, apiVersion: _a, kind: _k, ...rest } = body;
      const pruned = prune(rest, v.schema) as Record<string, unknown>;
      return { ...pruned, apiVersion, kind: v.kind, metadata: { ...(metadata as KubeObject['metadata']) } };
    },
    validate: (object) => validate(object, v.schema),
    encode,
    // Keys already in order: apiVersion, items, kind, metadata{continue, remainingItemCount, resourceVersion}.
    encodeList: (items: readonly KubeObject[], meta: ListMeta) => ({
      apiVersion,
      items: items.map(encode),
      kind: v.listKind,
      metadata: {
        continue: meta.continue,
        ...(meta.remainingItemCount === undefined ? {} : { remainingItemCount: meta.remainingItemCount }),
        resourceVersion: meta.resourceVersion,
      },
    }),
  };
}
