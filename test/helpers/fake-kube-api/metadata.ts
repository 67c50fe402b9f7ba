/**
 * ObjectMeta as the apiserver treats it for custom resources and Leases: name and label validation
 * with the real messages, generated names, server-owned fields, `managedFields` entries (one per
 * manager and subresource, recomputed from the object on each write: field ownership is not
 * tracked, server-side apply is not served), and the two key orders on the wire — sorted at every
 * level for custom resources (unstructured JSON), Go struct order for built-in types.
 */
import { randomBytes } from 'node:crypto';
import { type FieldError, goValue, invalidValue, required } from './status.ts';
import type { KubeObject } from './types.ts';

export const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

export function generatedName(prefix: string): string {
  return `${prefix}${Array.from(randomBytes(5), (b) => GENERATE_ALPHABET[b % GENERATE_ALPHABET.length]).join('')}`;
}

export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const SUBDOMAIN_TEXT =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/** metadata.name of a CR or Lease: an RFC 1123 subdomain of at most 253 characters. */
export function nameErrors(name: string | undefined): FieldError[] {
  if (name === undefined || name === '') return [required('metadata.name', 'name or generateName is required')];
  if (name.length > 253) return [invalidValue('metadata.name', name, 'must be no more than 253 characters')];
  if (!SUBDOMAIN.test(name)) return [invalidValue('metadata.name', name, SUBDOMAIN_TEXT)];
  return [];
}

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const NAME_PART_TEXT =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_TEXT =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

export function labelErrors(labels: unknown): FieldError[] {
  if (labels === undefined || labels === null) return [];
  if (!isRecord(labels)) return [invalidValue('metadata.labels', goValue(labels), 'must be a map of strings')];
  const errors: FieldError[] = [];
  for (const [key, value] of Object.entries(labels)) {
    const slash = key.lastIndexOf('/');
    const namePart = slash === -1 ? key : key.slice(slash + 1);
    const prefix = slash === -1 ? '' : key.slice(0, slash);
    if (namePart.length > 63)
      errors.push(invalidValue('metadata.labels', key, 'name part must be no more than 63 characters'));
    else if (!NAME_PART.test(namePart)) errors.push(invalidValue('metadata.labels', key, NAME_PART_TEXT));
    if (prefix !== '' && (!SUBDOMAIN.test(prefix) || prefix.length > 253))
      errors.push(invalidValue('metadata.labels', key, `prefix part ${SUBDOMAIN_TEXT}`));
    const text = String(value);
    if (text.length > 63) errors.push(invalidValue('metadata.labels', text, 'must be no more than 63 characters'));
    else if (!LABEL_VALUE.test(text)) errors.push(invalidValue('metadata.labels', text, VALUE_TEXT));
  }
  return errors;
}

/** Keys sorted at every level: how custom resources (unstructured JSON) come back. */
export function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key]);
  return out;
}

/** `value`'s keys in `order` first, the rest after in their own order: a Go struct's JSON. */
export function ordered(value: Record<string, unknown>, order: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of order) if (Object.hasOwn(value, key)) out[key] = value[key];
  for (const key of Object.keys(value)) if (!Object.hasOwn(out, key)) out[key] = value[key];
  return out;
}

/** ObjectMeta's Go field order. */
export const META_ORDER = [
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
];

/** FieldsV1 of a value in an Update entry: objects get "." and their keys; anything else is a leaf. */
function fieldsOf(value: unknown): Record<string, unknown> {
  if (!isRecord(value)) return {};
  const out: Record<string, unknown> = { '.': {} };
  for (const [key, field] of Object.entries(value)) out[`f:${key}`] = fieldsOf(field);
  return out;
}

/** The fields a write by one manager touches, as its managedFields entry records them. */
function fieldSet(object: KubeObject, subresource: 'status' | undefined): Record<string, unknown> {
  if (subresource === 'status') return object.status === undefined ? {} : { 'f:status': fieldsOf(object.status) };
  const out: Record<string, unknown> = {};
  const meta: Record<string, unknown> = {};
  if (object.metadata.generateName !== undefined) meta['f:generateName'] = {};
  for (const field of ['annotations', 'labels'] as const)
    if (isRecord(object.metadata[field]) && Object.keys(object.metadata[field]).length > 0)
      meta[`f:${field}`] = fieldsOf(object.metadata[field]);
  const finalizers = object.metadata.finalizers;
  if (Array.isArray(finalizers) && finalizers.length > 0)
    meta['f:finalizers'] = Object.fromEntries([['.', {}], ...finalizers.map((f) => [`v:${JSON.stringify(f)}`, {}])]);
  if (Object.keys(meta).length > 0) out['f:metadata'] = meta;
  for (const [key, value] of Object.entries(object))
    if (!['apiVersion', 'kind', 'metadata', 'status'].includes(key)) out[`f:${key}`] = fieldsOf(value);
  return out;
}

export interface Writer {
  readonly manager: string;
  readonly time: string;
  readonly subresource: 'status' | undefined;
}

/** The object's managedFields after a write: this manager's entry (per subresource) replaced. */
export function managedFields(object: KubeObject, previous: KubeObject | undefined, writer: Writer): unknown[] {
  const kept = (Array.isArray(previous?.metadata.managedFields) ? previous.metadata.managedFields : []).filter(
    (entry: unknown) =>
      !(isRecord(entry) && entry.manager === writer.manager && entry.subresource === writer.subresource),
  );
  const fields = fieldSet(object, writer.subresource);
  if (Object.keys(fields).length === 0) return kept;
  return [
    ...kept,
    {
      manager: writer.manager,
      operation: 'Update',
      apiVersion: object.apiVersion,
      time: writer.time,
      fieldsType: 'FieldsV1',
      fieldsV1: fields,
      ...(writer.subresource === undefined ? {} : { subresource: writer.subresource }),
    },
  ];
}
