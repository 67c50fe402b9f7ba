/**
 * The CRDs the fake knows and the custom resources they make it serve. A CRD registered from the
 * options is served at once; one created over the API is stored with `status.conditions: null`, and
 * `establishMs` later gets NamesAccepted (from then on its resource is served) and Established, two
 * writes with their own RVs, as the apiextensions controllers make them (with `establishMs`
 * Infinity, when the test calls `establishPending`, so a test can look at the time between).
 */
import type { ObjectStore } from './objects.ts';
import { type CrdVersion, crdConditions, crdObject, customServed, readCrd } from './crds.ts';
import { META_ORDER, ordered } from './metadata.ts';
import type { ListMeta, Served } from './served.ts';
import { alreadyExists, badRequest } from './status.ts';
import type { CrdObject, KubeObject } from './types.ts';

const RESERVED = new Set([
  'pods',
  'nodes',
  'events',
  'namespaces',
  'leases',
  'statefulsets',
  'customresourcedefinitions',
]);

/** CRDs themselves, served read-only (get, list, watch) besides create. */
export const CRDS: Served = {
  plural: 'customresourcedefinitions',
  group: 'apiextensions.k8s.io',
  kind: 'CustomResourceDefinition',
  version: 'v1',
  apiVersion: 'apiextensions.k8s.io/v1',
  listKind: 'CustomResourceDefinitionList',
  namespaced: false,
  fields: new Set(['metadata.name']),
  custom: false,
  generation: true,
  statusSubresource: true,
  since: 0,
  normalize: (body) => body as KubeObject,
  validate: () => [],
  encode: (object) => object,
  encodeList: (items: readonly KubeObject[], meta: ListMeta) => ({
    kind: 'CustomResourceDefinitionList',
    apiVersion: 'apiextensions.k8s.io/v1',
    metadata: { resourceVersion: meta.resourceVersion, ...(meta.continue === '' ? {} : { continue: meta.continue }) },
    items: items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
  }),
};

export class CrdRegistry {
  readonly #store: ObjectStore;
  readonly #now: () => Date;
  readonly #establishMs: number;
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Served custom resources by `group/version/plural`. */
  readonly #served = new Map<string, Served>();
  readonly #byPlural = new Map<string, Served>();
  /** Plurals claimed by a CRD, served or not yet. */
  readonly #claimed = new Set<string>();
  readonly #groups = new Set<string>();
  /** CRDs created over the API, waiting for their names to be accepted. */
  readonly #pending = new Map<string, CrdVersion>();

  constructor(store: ObjectStore, now: () => Date, establishMs: number) {
    this.#store = store;
    this.#now = now;
    this.#establishMs = establishMs;
  }

  find(group: string, version: string, plural: string): Served | undefined {
    return this.#served.get(`${group}/${version}/${plural}`);
  }

  /** Every served resource of one group version (for discovery). */
  servedIn(group: string, version: string): Served[] {
    return [...this.#served.values()].filter((s) => s.group === group && s.version === version);
  }

  byPlural(plural: string): Served | undefined {
    return this.#byPlural.get(plural);
  }

  /** Whether a CRD (served or pending) names this group. */
  knowsGroup(group: string): boolean {
    return this.#groups.has(group);
  }

  /** Registers and establishes at once. */
  register(crd: CrdObject): void {
    const v = this.#admit(crd);
    const object = this.#add(crd, v, 'warren-test');
    this.#establish(object, v);
  }

  /** A CRD created over the API: stored now, established `establishMs` later. */
  createFromApi(body: unknown, manager: string): KubeObject {
    if (typeof body !== 'object' || body === null)
      throw badRequest('the object provided is unrecognized (must be of type CustomResourceDefinition)');
    const crd = body as CrdObject;
    if (this.#store.get(CRDS.plural, String(crd.metadata?.name)) !== undefined)
      throw alreadyExists(CRDS, String(crd.metadata.name));
    const v = this.#admit(crd);
    const object = this.#add(crd, v, manager);
    const name = object.metadata.name as string;
    this.#pending.set(name, v);
    // Infinity: only when the test says (`establishPending`), so it can look at the time between.
    if (Number.isFinite(this.#establishMs)) {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        this.#establishNamed(name);
      }, this.#establishMs);
      this.#timers.add(timer);
    }
    return object;
  }

  /** Establishes every CRD created over the API and not yet established. */
  establishPending(): void {
    for (const name of [...this.#pending.keys()]) this.#establishNamed(name);
  }

  #establishNamed(name: string): void {
    const v = this.#pending.get(name);
    const stored = this.#store.get(CRDS.plural, name);
    this.#pending.delete(name);
    if (v !== undefined && stored !== undefined) this.#establish(stored, v);
  }

  stop(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  #admit(crd: CrdObject): CrdVersion {
    const { version: v } = readCrd(crd);
    if (RESERVED.has(v.plural) || this.#claimed.has(v.plural))
      throw badRequest(`the fake Kubernetes API keys resources by plural and already serves ${v.plural}`);
    return v;
  }

  #add(crd: CrdObject, v: CrdVersion, manager: string): KubeObject {
    this.#claimed.add(v.plural);
    this.#groups.add(v.group);
    const object = crdObject(crd, v, { manager, now: this.#now() });
    this.#store.commit(CRDS.plural, object.metadata.name as string, 'ADDED', object, undefined);
    return object;
  }

  #establish(stored: KubeObject, v: CrdVersion): void {
    const name = stored.metadata.name as string;
    const accepted = crdConditions(stored, v, false, this.#now());
    accepted.metadata = ordered(accepted.metadata, META_ORDER);
    this.#store.commit(CRDS.plural, name, 'MODIFIED', accepted, stored);
    const established = crdConditions(accepted, v, true, this.#now());
    const change = this.#store.commit(CRDS.plural, name, 'MODIFIED', established, accepted);
    // Served from NamesAccepted on; the watch cache starts at the Established write.
    const served = customServed(v, change.rv);
    this.#served.set(`${v.group}/${v.version}/${v.plural}`, served);
    this.#byPlural.set(v.plural, served);
  }
}
