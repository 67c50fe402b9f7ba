/**
 * The pods of this node and the cluster's namespaces, as an ADD needs them (labels, annotations,
 * owners): served from the agent's watches — the pod watch of this node it already runs, and a
 * list-watch of namespaces — and fetched with one GET only when the watch has not brought the
 * object yet.
 *
 * Guarantees:
 * - a pod the pod watch holds (same namespace and name, and the same UID when the ref names one)
 *   is answered without any API request: the common ADD path costs nothing;
 * - on a miss (the watch is behind the kubelet, or holds an older pod of that name) the pod is
 *   read with one GET; a pod that does not exist, or whose UID is not the ref's, answers undefined;
 * - a namespace is answered from the namespace watch once it has listed; before that (or when the
 *   listing does not hold it) with one GET, whose answer is kept until a listing replaces it;
 * - a listing replaces everything it covers; a DELETED event removes the object;
 * - objects without a UID (pods), namespace or name are skipped.
 */
import { isPlainObject } from '../../core/validate.ts';
import type { ListWatchItem } from '../../sources/kubernetes/list-watch.ts';
import type { PodRef } from '../server/add-plan.ts';

export interface OwnerView {
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller: boolean;
}

export interface PodView {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** `spec.nodeName`; '' while unscheduled. */
  readonly nodeName: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly owners: readonly OwnerView[];
}

export interface NamespaceView {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface PodDirectoryOptions {
  /** GET of one pod (the JSON the server sent); undefined when the server answers 404. */
  readonly fetchPod: (namespace: string, name: string) => Promise<unknown>;
  /** GET of one namespace; undefined when the server answers 404. */
  readonly fetchNamespace: (name: string) => Promise<unknown>;
}

export interface PodDirectoryStatus {
  readonly pods: number;
  readonly namespaces: number;
  /** Whether the namespace watch has listed (before: every namespace asked for is a GET). */
  readonly namespacesListed: boolean;
  /** GETs made on a miss, since the start. */
  readonly podGets: number;
  readonly namespaceGets: number;
}

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** The string values of a label or annotation map; anything else is dropped. */
function stringMap(value: unknown): Record<string, string> {
  if (!isPlainObject(value)) return {};
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) if (typeof v === 'string') out[key] = v;
  return out;
}

function ownersOf(value: unknown): OwnerView[] {
  if (!Array.isArray(value)) return [];
  const out: OwnerView[] = [];
  for (const ref of value) {
    if (!isPlainObject(ref) || !nonEmpty(ref.kind) || !nonEmpty(ref.name) || !nonEmpty(ref.uid)) continue;
    out.push({ kind: ref.kind, name: ref.name, uid: ref.uid, controller: ref.controller === true });
  }
  return out;
}

/** The PodView of a pod object, or undefined when it lacks a UID, namespace or name. */
export function podViewOf(object: unknown): PodView | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata)) return undefined;
  const meta = object.metadata;
  if (!nonEmpty(meta.uid) || !nonEmpty(meta.namespace) || !nonEmpty(meta.name)) return undefined;
  const spec = isPlainObject(object.spec) ? object.spec : {};
  return {
    uid: meta.uid,
    namespace: meta.namespace,
    name: meta.name,
    nodeName: typeof spec.nodeName === 'string' ? spec.nodeName : '',
    labels: stringMap(meta.labels),
    annotations: stringMap(meta.annotations),
    owners: ownersOf(meta.ownerReferences),
  };
}

/** The NamespaceView of a namespace object, or undefined when it has no name. */
export function namespaceViewOf(object: unknown): NamespaceView | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata) || !nonEmpty(object.metadata.name)) return undefined;
  const meta = object.metadata;
  return { name: object.metadata.name, labels: stringMap(meta.labels), annotations: stringMap(meta.annotations) };
}

const podKey = (namespace: string, name: string): string => `${namespace}/${name}`;

export class PodDirectory {
  readonly #o: PodDirectoryOptions;
  /** This node's pods by namespace/name (a StatefulSet's new pod replaces the old one's entry). */
  #pods = new Map<string, PodView>();
  #namespaces = new Map<string, NamespaceView>();
  #namespacesListed = false;
  #podGets = 0;
  #namespaceGets = 0;

  constructor(options: PodDirectoryOptions) {
    this.#o = options;
  }

  /** The pod `ref` names; undefined when it does not exist (or has another UID than the ref's). */
  async pod(ref: PodRef): Promise<PodView | undefined> {
    const cached = this.#pods.get(podKey(ref.namespace, ref.name));
    if (cached !== undefined && (ref.uid === undefined || cached.uid === ref.uid)) return cached;
    this.#podGets += 1;
    const view = podViewOf(await this.#o.fetchPod(ref.namespace, ref.name));
    if (view === undefined || (ref.uid !== undefined && view.uid !== ref.uid)) return undefined;
    return view;
  }

  /** The namespace `name`; undefined when it does not exist. */
  async namespace(name: string): Promise<NamespaceView | undefined> {
    const cached = this.#namespaces.get(name);
    if (cached !== undefined) return cached;
    this.#namespaceGets += 1;
    const view = namespaceViewOf(await this.#o.fetchNamespace(name));
    // Kept until a listing replaces it: a namespace asked for once is asked for again.
    if (view !== undefined) this.#namespaces.set(view.name, view);
    return view;
  }

  /** An item of the pod watch of this node (the pod source passes each one on). */
  observePods(item: ListWatchItem<unknown>): void {
    if (item.kind === 'listed') {
      const pods = new Map<string, PodView>();
      for (const object of item.objects) {
        const view = podViewOf(object);
        if (view !== undefined) pods.set(podKey(view.namespace, view.name), view);
      }
      this.#pods = pods;
      return;
    }
    const view = podViewOf(item.object);
    if (view === undefined) return;
    const key = podKey(view.namespace, view.name);
    if (item.kind !== 'deleted') this.#pods.set(key, view);
    // Only the pod deleted: a newer pod of that name (a StatefulSet's) may already stand there.
    else if (this.#pods.get(key)?.uid === view.uid) this.#pods.delete(key);
  }

  /** An item of the namespace watch. */
  observeNamespaces(item: ListWatchItem<unknown>): void {
    if (item.kind === 'listed') {
      const namespaces = new Map<string, NamespaceView>();
      for (const object of item.objects) {
        const view = namespaceViewOf(object);
        if (view !== undefined) namespaces.set(view.name, view);
      }
      this.#namespaces = namespaces;
      this.#namespacesListed = true;
      return;
    }
    const view = namespaceViewOf(item.object);
    if (view === undefined) return;
    if (item.kind === 'deleted') this.#namespaces.delete(view.name);
    else this.#namespaces.set(view.name, view);
  }

  status(): PodDirectoryStatus {
    return {
      pods: this.#pods.size,
      namespaces: this.#namespaces.size,
      namespacesListed: this.#namespacesListed,
      podGets: this.#podGets,
      namespaceGets: this.#namespaceGets,
    };
  }
}
