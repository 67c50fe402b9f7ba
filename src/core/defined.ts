/**
 * The optional-field idiom in one place: `...defined({ podName, netns: a.netns })` puts in the
 * object being built each field whose value is not undefined, and no key at all for the others.
 * Under `exactOptionalPropertyTypes` an optional field may be absent but never `undefined`, so a
 * field that may be undefined cannot be written as `{ podName }`; the written-out form,
 * `...(podName === undefined ? {} : { podName })`, said the same thing once per field.
 *
 * Keys come out in the order given; a value that is `null`, `0`, `''` or `false` is kept (only
 * undefined is dropped).
 */

/** `T`'s fields, each optional and never undefined. */
export type DefinedFields<T> = { [K in keyof T]?: Exclude<T[K], undefined> };

/** The fields of `fields` whose value is not undefined. */
export function defined<T extends object>(fields: T): DefinedFields<T> {
  const present: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) present[key] = value;
  return present as DefinedFields<T>;
}
