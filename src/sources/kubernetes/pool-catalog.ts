/**
 * The cluster's WarrenPools as the agent's list-watch of them last showed (deploy/crds/
 * warrenpools.yaml), each read into a PoolSpec once per version of the object (warren-pool.ts),
 * and this node's labels as the watch of its own Node object last showed them: what the pools
 * planner reads on every ADD without a request.
 *
 * Guarantees: before the first listing `listed` is false and nothing is known (the planner asks the
 * ADD to try again rather than guess); after it, a pool is known exactly as the watch has it (a
 * listing replaces everything, a DELETED removes it); a pool whose spec does not parse is known by
 * its problem (a WarrenError naming the pool and the key), never dropped silently.
 */
import { WarrenError } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import type { ListWatchItem } from './list-watch.ts';
import { type PoolSpec, parseWarrenPool } from './warren-pool.ts';

export interface CatalogEntry {
  readonly name: string;
  /** The object as the server sent it (the status writer reads its status and resourceVersion). */
  readonly object: Record<string, unknown>;
  /** Its spec, or why it cannot be used. */
  readonly spec: PoolSpec | WarrenError;
}

const nameOf = (object: unknown): string | undefined => {
  const meta = isPlainObject(object) && isPlainObject(object.metadata) ? object.metadata : undefined;
  return typeof meta?.name === 'string' && meta.name !== '' ? meta.name : undefined;
};

function entryOf(object: unknown): CatalogEntry | undefined {
  const name = nameOf(object);
  if (name === undefined || !isPlainObject(object)) return undefined;
  let spec: PoolSpec | WarrenError;
  try {
    spec = parseWarrenPool(object);
  } catch (error) {
    spec = error instanceof WarrenError ? error : new WarrenError('INVALID_CONFIG', `WarrenPool ${name}: ${error}`);
  }
  return { name, object, spec };
}

export class PoolCatalog {
  #pools = new Map<string, CatalogEntry>();
  #listed = false;

  /** Whether the watch has listed the pools at least once. */
  get listed(): boolean {
    return this.#listed;
  }

  /** The pool named `name`, as last seen; undefined when the cluster has none of that name. */
  entry(name: string): CatalogEntry | undefined {
    return this.#pools.get(name);
  }

  /** Every pool, by name. */
  entries(): CatalogEntry[] {
    return [...this.#pools.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** An item of the WarrenPool list-watch. */
  observe(item: ListWatchItem<unknown>): void {
    if (item.kind === 'listed') {
      const pools = new Map<string, CatalogEntry>();
      for (const object of item.objects) {
        const entry = entryOf(object);
        if (entry !== undefined) pools.set(entry.name, entry);
      }
      this.#pools = pools;
      this.#listed = true;
      return;
    }
    const name = nameOf(item.object);
    if (name === undefined) return;
    if (item.kind === 'deleted') {
      this.#pools.delete(name);
      return;
    }
    // A status written (by whichever agent keeps it) changes no spec: keep the parse, take the object.
    const before = this.#pools.get(name);
    const entry =
      before !== undefined && sameSpec(before.object, item.object as Record<string, unknown>)
        ? { ...before, object: item.object as Record<string, unknown> }
        : entryOf(item.object);
    if (entry !== undefined) this.#pools.set(name, entry);
  }
}

function sameSpec(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const generation = (o: Record<string, unknown>) => (isPlainObject(o.metadata) ? o.metadata.generation : undefined);
  const uid = (o: Record<string, unknown>) => (isPlainObject(o.metadata) ? o.metadata.uid : undefined);
  return (
    uid(a) === uid(b) &&
    generation(a) !== undefined &&
    generation(a) === generation(b) &&
    JSON.stringify(a.spec) === JSON.stringify(b.spec)
  );
}

/** This node's labels, from a watch of its own Node object (`metadata.name=<node>`). */
export class NodeLabels {
  #labels: Readonly<Record<string, string>> | undefined;

  /** The labels as last seen; undefined before the watch listed the node. */
  labels(): Readonly<Record<string, string>> | undefined {
    return this.#labels;
  }

  observe(item: ListWatchItem<unknown>): void {
    const objects = item.kind === 'listed' ? item.objects : item.kind === 'deleted' ? [] : [item.object];
    if (item.kind === 'deleted') {
      this.#labels = undefined;
      return;
    }
    if (item.kind === 'listed' && objects.length === 0) {
      this.#labels = undefined;
      return;
    }
    const object = objects[0];
    const meta = isPlainObject(object) && isPlainObject(object.metadata) ? object.metadata : {};
    const labels: Record<string, string> = {};
    if (isPlainObject(meta.labels))
      for (const [k, v] of Object.entries(meta.labels)) if (typeof v === 'string') labels[k] = v;
    this.#labels = labels;
  }
}
