/**
 * JSON merge patch (RFC 7386) and JSON patch (RFC 6902: add, replace, remove, test; move and copy
 * are refused as unsupported). A merge patch's null removes a key and leaves the map, even empty.
 * A failed JSON patch operation throws a 422 whose message names the operation; the custom-resource
 * path replaces it with the apiserver's generic text.
 */
import { badRequest, failure, unsupportedByFake } from './status.ts';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/** RFC 6902 add, replace, remove and test; move and copy are refused. Failures are 422 like the real server's. */
export function jsonPatch(document: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations))
    throw badRequest(
      `json: cannot unmarshal ${isRecord(operations) ? 'object' : typeof operations} into Go value of type jsonpatch.Patch`,
    );
  const root = { value: structuredClone(document) as unknown };
  for (const operation of operations) {
    if (!isRecord(operation) || typeof operation.op !== 'string' || typeof operation.path !== 'string')
      throw badRequest('json patch: an operation needs op and path');
    const tokens =
      operation.path === ''
        ? []
        : operation.path
            .slice(1)
            .split('/')
            .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    let parent: unknown = root;
    let key = 'value';
    for (const token of tokens) {
      const next: unknown = Array.isArray(parent) ? parent[Number(key)] : isRecord(parent) ? parent[key] : undefined;
      if (!isRecord(next) && !Array.isArray(next))
        throw failure(422, 'Invalid', `jsonpatch: missing path ${operation.path}`);
      parent = next;
      key = token;
    }
    const container = parent as Record<string, unknown>;
    const exists = Object.hasOwn(container, key);
    // In an array, add inserts (at an index or at "-", the end) and remove closes the gap.
    const index = Array.isArray(container) ? (key === '-' ? container.length : Number(key)) : undefined;
    switch (operation.op) {
      case 'add':
        if (index === undefined) container[key] = structuredClone(operation.value);
        else (container as unknown as unknown[]).splice(index, 0, structuredClone(operation.value));
        break;
      case 'replace':
        if (!exists)
          throw failure(
            422,
            'Invalid',
            `jsonpatch replace operation does not apply: doc is missing key: ${operation.path}`,
          );
        container[key] = structuredClone(operation.value);
        break;
      case 'remove':
        if (!exists)
          throw failure(
            422,
            'Invalid',
            `jsonpatch remove operation does not apply: doc is missing path: ${operation.path}`,
          );
        if (index === undefined) delete container[key];
        else (container as unknown as unknown[]).splice(index, 1);
        break;
      case 'test':
        if (JSON.stringify(container[key]) !== JSON.stringify(operation.value))
          throw failure(422, 'Invalid', `testing value ${operation.path} failed: test failed`);
        break;
      default:
        throw unsupportedByFake(`the json patch operation '${operation.op}'`);
    }
  }
  return root.value;
}
