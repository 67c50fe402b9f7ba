/**
 * The fake's storage, etcd's part of the apiserver: objects per resource keyed `namespace/name` (or
 * `name` for cluster-scoped ones) and kept in key order, one global resourceVersion that every
 * write bumps, and the history of changes a watch or a continued list replays.
 *
 * Guarantees:
 * - stored objects are never mutated: a write stores a new object, so a reference taken by a list
 *   or a watch stays the state at its RV;
 * - the history holds every change after `compactedThrough`, in RV order; it is compacted by
 *   `compact()` and, past HISTORY_LIMIT changes, by itself (older watches and continue tokens then
 *   get 410, as after the apiserver's own compaction);
 * - `preload` writes without history or events, each object at its own RV;
 * - `restore` puts back what `snapshot` took (etcd restored from a snapshot under the apiserver):
 *   every object as it was then, objects made since gone, the RV back at the snapshot's (plus
 *   `bump`, as `etcdutl snapshot restore --bump-revision` adds), and the history starting there.
 */
import type { KubeObject } from './types.ts';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One committed change; `previous` is the state before it (absent for ADDED). */
export interface Change {
  readonly rv: number;
  readonly resource: string;
  readonly type: ChangeType;
  readonly object: KubeObject;
  readonly previous: KubeObject | undefined;
}

const HISTORY_LIMIT = 200_000;

function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** What `snapshot` took: the objects (never mutated, so shared) and the RV then. */
export interface StoreSnapshot {
  readonly rv: number;
  readonly maps: ReadonlyMap<string, ReadonlyMap<string, KubeObject>>;
}

export class ObjectStore {
  /** The last RV handed out; the next change gets one more. */
  #rv = 1;
  readonly #maps = new Map<string, Map<string, KubeObject>>();
  /** Each resource's keys in order (etcd key order), kept on insert and delete. */
  readonly #keys = new Map<string, string[]>();
  /** Changes after `compactedThrough`, in RV order. */
  #history: Change[] = [];
  #compactedThrough = 0;
  readonly #listeners: Array<(change: Change) => void> = [];

  get rv(): number {
    return this.#rv;
  }

  get compactedThrough(): number {
    return this.#compactedThrough;
  }

  get history(): readonly Change[] {
    return this.#history;
  }

  onChange(listener: (change: Change) => void): void {
    this.#listeners.push(listener);
  }

  map(resource: string): Map<string, KubeObject> {
    let map = this.#maps.get(resource);
    if (map === undefined) {
      map = new Map();
      this.#maps.set(resource, map);
      this.#keys.set(resource, []);
    }
    return map;
  }

  keys(resource: string): readonly string[] {
    this.map(resource);
    return this.#keys.get(resource) as string[];
  }

  /** The index of the first key at or after `key`. */
  seek(resource: string, key: string): number {
    return lowerBound(this.keys(resource), key);
  }

  get(resource: string, key: string): KubeObject | undefined {
    return this.map(resource).get(key);
  }

  static keyOf(object: KubeObject, namespaced: boolean): string {
    return namespaced ? `${object.metadata.namespace}/${object.metadata.name}` : (object.metadata.name as string);
  }

  /** Takes the next RV (a write that stores no object of a served resource, e.g. a CRD condition, still bumps it). */
  next(): number {
    return ++this.#rv;
  }

  commit(
    resource: string,
    key: string,
    type: ChangeType,
    object: KubeObject,
    previous: KubeObject | undefined,
  ): Change {
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    this.#place(resource, key, type === 'DELETED' ? undefined : object);
    const change: Change = { rv: this.#rv, resource, type, object, previous };
    this.#history.push(change);
    if (this.#history.length > HISTORY_LIMIT) {
      const dropped = this.#history.splice(0, HISTORY_LIMIT / 2);
      this.#compactedThrough = (dropped.at(-1) as Change).rv;
    }
    for (const listener of this.#listeners) listener(change);
    return change;
  }

  /** Stores objects as they are, each at its own RV, without history or events. */
  preload(resource: string, entries: Iterable<readonly [string, KubeObject]>): void {
    const map = this.map(resource);
    const keys = this.#keys.get(resource) as string[];
    let added = false;
    for (const [key, object] of entries) {
      object.metadata.resourceVersion = String(++this.#rv);
      if (!map.has(key)) {
        keys.push(key);
        added = true;
      }
      map.set(key, object);
    }
    if (added) keys.sort();
  }

  snapshot(): StoreSnapshot {
    return { rv: this.#rv, maps: new Map([...this.#maps].map(([resource, map]) => [resource, new Map(map)])) };
  }

  /**
   * Replaces everything with `snapshot`'s objects, at its RV plus `bump`, with no event: the
   * apiserver restarted over a restored etcd has no history before that RV (its watch cache starts
   * there), so a watch or continue token from any older RV gets 410, and one from a later RV (the
   * lost future, when not bumped) waits for the store to pass it.
   */
  restore(snapshot: StoreSnapshot, bump = 0): void {
    this.#maps.clear();
    this.#keys.clear();
    for (const [resource, map] of snapshot.maps) {
      this.#maps.set(resource, new Map(map));
      this.#keys.set(resource, [...map.keys()].sort());
    }
    this.#rv = snapshot.rv + bump;
    this.#history = [];
    this.#compactedThrough = this.#rv;
  }

  compact(): void {
    this.#compactedThrough = this.#rv;
    this.#history = [];
  }

  #place(resource: string, key: string, object: KubeObject | undefined): void {
    const map = this.map(resource);
    const keys = this.#keys.get(resource) as string[];
    const had = map.has(key);
    if (object === undefined) {
      if (!had) return;
      map.delete(key);
      keys.splice(lowerBound(keys, key), 1);
    } else {
      map.set(key, object);
      if (!had) keys.splice(lowerBound(keys, key), 0, key);
    }
  }
}
