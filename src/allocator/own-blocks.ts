/**
 * This node's blocks, per range pool, as last seen: the allocator tries them before it lists the
 * whole range, so an ADD in a node's own block costs no listing. The list is a hint, never the
 * truth: the store's affinity is, and every commit checks the block's revision. A list goes stale
 * when another process gives a block back or claims one for this node; the allocator then finds
 * out through a full block or a placement that reports unknown own blocks, and sets it again.
 */
export class OwnBlocks {
  /** Range pool → keys of its blocks claimed by this node, the one that served last first. */
  readonly #byRange = new Map<string, readonly string[]>();

  get(rangePool: string): readonly string[] | undefined {
    return this.#byRange.get(rangePool);
  }

  set(rangePool: string, keys: readonly string[]): void {
    this.#byRange.set(rangePool, keys);
  }

  /** Puts the block that served first, so full blocks are not read again on every ADD. */
  promote(rangePool: string, key: string): void {
    const keys = this.#byRange.get(rangePool) ?? [];
    if (keys[0] !== key) this.#byRange.set(rangePool, [key, ...keys.filter((k) => k !== key)]);
  }

  /** Forgets a block given back. */
  drop(rangePool: string, key: string): void {
    const keys = this.#byRange.get(rangePool);
    if (keys !== undefined)
      this.#byRange.set(
        rangePool,
        keys.filter((k) => k !== key),
      );
  }
}
