/**
 * A CRD's structural schema applied to a custom resource as the apiextensions apiserver applies it:
 * pruning (fields not named by `properties`, `additionalProperties` or `items` are dropped silently
 * unless `x-kubernetes-preserve-unknown-fields`), then validation. Validation errors come in the
 * apiserver's order — type errors first, then value checks (pattern, bounds, lengths, sizes, enum),
 * then missing required fields — with its messages (`spec.size in body must be of type integer:
 * "string"`, `should match '<re>'`, `should be less than or equal to N`, `Too long: may not be
 * longer than N`, `Too many: N: must have at most M items`, `Required value`).
 * Not implemented (refused when a CRD uses them, rather than ignored): CEL rules, oneOf/anyOf/allOf/not,
 * formats, defaults, x-kubernetes-int-or-string, list types and map types.
 */
import { type FieldError, goValue, invalidValue, required } from './status.ts';

export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  required?: string[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  enum?: unknown[];
  nullable?: boolean;
  description?: string;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
}

const UNSUPPORTED = [
  'x-kubernetes-validations',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'default',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-map-type',
  'format',
];

/** The schema keywords the fake does not implement that `schema` uses, with their paths. */
export function unsupportedKeywords(schema: unknown, path = ''): string[] {
  if (typeof schema !== 'object' || schema === null) return [];
  const out: string[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (UNSUPPORTED.includes(key)) out.push(`${path}${key}`);
    if (key === 'properties' && typeof value === 'object' && value !== null)
      for (const [name, sub] of Object.entries(value)) out.push(...unsupportedKeywords(sub, `${path}${name}.`));
    else if (key === 'items' || key === 'additionalProperties')
      out.push(...unsupportedKeywords(value, `${path}${key}.`));
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Drops what the schema does not name; returns the pruned copy. */
export function prune(value: unknown, schema: Schema | undefined): unknown {
  if (schema === undefined) return value;
  if (Array.isArray(value)) return schema.items === undefined ? value : value.map((v) => prune(v, schema.items));
  if (!isRecord(value)) return value;
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    const named = schema.properties?.[key];
    if (named !== undefined) out[key] = prune(field, named);
    else if (isRecord(schema.additionalProperties)) out[key] = prune(field, schema.additionalProperties);
    else if (preserve || schema.additionalProperties === true) out[key] = field;
  }
  return out;
}

/** The OpenAPI type name of a JSON value, as the validator reports it. */
function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeFits(value: unknown, type: string): boolean {
  const actual = typeName(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

interface Buckets {
  readonly types: FieldError[];
  readonly values: FieldError[];
  readonly required: FieldError[];
}

function walk(value: unknown, schema: Schema, path: string, out: Buckets): void {
  if (value === null && schema.nullable === true) return;
  if (schema.type !== undefined && !typeFits(value, schema.type)) {
    const actual = typeName(value);
    out.types.push(
      invalidValue(path, actual, `${path} in body must be of type ${schema.type}: ${JSON.stringify(actual)}`),
    );
    return;
  }
  if (typeof value === 'string') {
    if (schema.maxLength !== undefined && [...value].length > schema.maxLength)
      out.values.push({
        reason: 'FieldValueTooLong',
        field: path,
        message: `Too long: may not be longer than ${schema.maxLength}`,
      });
    if (schema.minLength !== undefined && [...value].length < schema.minLength)
      out.values.push(invalidValue(path, value, `${path} in body should be at least ${schema.minLength} chars long`));
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value))
      out.values.push(invalidValue(path, value, `${path} in body should match '${schema.pattern}'`));
  }
  if (typeof value === 'number') {
    if (schema.maximum !== undefined && (schema.exclusiveMaximum ? value >= schema.maximum : value > schema.maximum))
      out.values.push(
        invalidValue(
          path,
          value,
          `${path} in body should be less than ${schema.exclusiveMaximum ? '' : 'or equal to '}${schema.maximum}`,
        ),
      );
    if (schema.minimum !== undefined && (schema.exclusiveMinimum ? value <= schema.minimum : value < schema.minimum))
      out.values.push(
        invalidValue(
          path,
          value,
          `${path} in body should be greater than ${schema.exclusiveMinimum ? '' : 'or equal to '}${schema.minimum}`,
        ),
      );
  }
  if (schema.enum !== undefined && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    out.values.push({
      reason: 'FieldValueNotSupported',
      field: path,
      message: `Unsupported value: ${goValue(value)}: supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`,
    });
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems)
      out.values.push({
        reason: 'FieldValueTooMany',
        field: path,
        message: `Too many: ${value.length}: must have at most ${schema.maxItems} items`,
      });
    if (schema.minItems !== undefined && value.length < schema.minItems)
      out.values.push(
        invalidValue(path, value.length, `${path} in body should have at least ${schema.minItems} items`),
      );
    if (schema.items !== undefined)
      value.forEach((item, i) => walk(item, schema.items as Schema, `${path}[${i}]`, out));
  }
  if (isRecord(value)) {
    for (const [key, field] of Object.entries(value)) {
      const named =
        schema.properties?.[key] ?? (isRecord(schema.additionalProperties) ? schema.additionalProperties : undefined);
      if (named !== undefined) walk(field, named, path === '' ? key : `${path}.${key}`, out);
    }
    for (const name of schema.required ?? [])
      if (!Object.hasOwn(value, name)) out.required.push(required(path === '' ? name : `${path}.${name}`));
  }
}

/** The schema errors of an object (metadata aside), in the apiserver's order. */
export function validate(object: Record<string, unknown>, schema: Schema): FieldError[] {
  const out: Buckets = { types: [], values: [], required: [] };
  const { metadata: _m, apiVersion: _a, kind: _k, ...rest } = object;
  walk(
    rest,
    { ...schema, required: (schema.required ?? []).filter((r) => !['metadata', 'apiVersion', 'kind'].includes(r)) },
    '',
    out,
  );
  return [...out.types, ...out.values, ...out.required];
}
