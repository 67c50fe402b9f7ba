/**
 * Per-key mutual exclusion for async work: `run(key, fn)` never runs two functions for one key at
 * once, runs them in arrival order, and lets different keys proceed in parallel. A key holds no
 * memory once its last holder is done.
 */
export class KeyedMutex {
  /** Tail of each key's chain; removed when the chain drains so idle keys cost nothing. */
  #tails = new Map<string, Promise<void>>();

  /** Keys with a run queued or running; an idle key is not counted, as it is not held. */
  get size(): number {
    return this.#tails.size;
  }

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
