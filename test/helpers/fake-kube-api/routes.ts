/**
 * From a request's path and method to what it names: a core resource (`/api/v1/...`), a served
 * resource of a group (`/apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>[/status]]`), a
 * path the real server would not know (answered with its text/plain `404 page not found`), or a
 * built-in API the fake does not serve (a JSON 404, loudly not pretending it is absent), and the verb.
 */
import { CORE } from './core.ts';
import { LEASES } from './leases.ts';
import { STATEFULSETS } from './statefulsets.ts';
import { CRDS, type CrdRegistry } from './registry.ts';
import type { Served } from './served.ts';
import { isTrue } from './watch.ts';
import type { Resource, Verb } from './types.ts';

export type Route =
  | {
      readonly family: 'core';
      readonly resource: Resource;
      readonly namespace: string | undefined;
      readonly name: string | undefined;
    }
  | {
      readonly family: 'served';
      readonly served: Served;
      readonly namespace: string | undefined;
      readonly name: string | undefined;
      readonly subresource: 'status' | undefined;
    }
  | { readonly family: 'unknown' }
  /** `GET /apis/<group>/<version>` of a group version with established CRDs. */
  | { readonly family: 'discovery'; readonly served: readonly Served[]; readonly groupVersion: string };

function decode(part: string | undefined): string | undefined | null {
  if (part === undefined) return undefined;
  try {
    return decodeURIComponent(part);
  } catch {
    return null; // a malformed escape names nothing
  }
}

/** undefined: a built-in API the fake does not serve (JSON 404). */
export function routeOf(pathname: string, crds: CrdRegistry): Route | undefined {
  const core = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?([a-z]+)(?:\/([^/]+))?\/?$/.exec(pathname);
  if (core !== null) {
    if (!Object.hasOwn(CORE, core[2] as string)) return undefined;
    const resource = core[2] as Resource;
    const namespace = decode(core[1]);
    const name = decode(core[3]);
    if (namespace === null || name === null) return undefined;
    // A namespaced object is only addressable inside its namespace; a cluster object never is.
    if (CORE[resource].namespaced ? name !== undefined && namespace === undefined : namespace !== undefined)
      return undefined;
    return { family: 'core', resource, namespace, name };
  }
  const discovery = /^\/apis\/([^/]+)\/([^/]+)\/?$/.exec(pathname);
  if (discovery !== null) {
    const served = crds.servedIn(discovery[1] as string, discovery[2] as string);
    if (served.length > 0) return { family: 'discovery', served, groupVersion: `${discovery[1]}/${discovery[2]}` };
  }
  const apis = /^\/apis\/([^/]+)\/([^/]+)\/(?:namespaces\/([^/]+)\/)?([^/]+)(?:\/([^/]+)(?:\/([^/]+))?)?\/?$/.exec(
    pathname,
  );
  const group = /^\/apis\/([^/]+)/.exec(pathname)?.[1] ?? '';
  const builtIn = !group.includes('.') || group.endsWith('.k8s.io');
  const unknown = builtIn && !crds.knowsGroup(group) ? undefined : ({ family: 'unknown' } as const);
  if (apis === null) return unknown;
  const [, , version, ns, plural, rawName, sub] = apis as unknown as string[];
  let served: Served | undefined;
  if (group === 'apiextensions.k8s.io' && version === 'v1' && plural === 'customresourcedefinitions') served = CRDS;
  else if (group === 'coordination.k8s.io' && version === 'v1' && plural === 'leases') served = LEASES;
  else if (group === 'apps' && version === 'v1' && plural === 'statefulsets') served = STATEFULSETS;
  else served = crds.find(group, version as string, plural as string);
  if (served === undefined) return unknown;
  const namespace = decode(ns);
  const name = decode(rawName);
  if (namespace === null || name === null) return { family: 'unknown' };
  if (!served.namespaced && namespace !== undefined) return { family: 'unknown' };
  if (served.namespaced && name !== undefined && namespace === undefined) return { family: 'unknown' };
  if (sub !== undefined && (sub !== 'status' || !served.statusSubresource || served === CRDS))
    return { family: 'unknown' };
  return { family: 'served', served, namespace, name, subresource: sub === 'status' ? 'status' : undefined };
}

export function verbOf(method: string, name: string | undefined, query: URLSearchParams): Verb | undefined {
  switch (method) {
    case 'GET':
      return name !== undefined ? 'get' : isTrue(query.get('watch')) ? 'watch' : 'list';
    case 'POST':
      return name === undefined ? 'create' : undefined;
    case 'PUT':
      return name !== undefined ? 'update' : undefined;
    case 'PATCH':
      return name !== undefined ? 'patch' : undefined;
    case 'DELETE':
      return name !== undefined ? 'delete' : 'deletecollection';
    default:
      return undefined;
  }
}

/** The verbs a served resource answers; others get 405. */
export function servedVerbs(route: Extract<Route, { family: 'served' }>): ReadonlySet<Verb> {
  if (route.served === CRDS) return new Set(['get', 'list', 'watch', 'create']);
  if (route.subresource === 'status') return new Set(['get', 'update', 'patch']);
  return new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']);
}
