/**
 * Listeners told of one kind of moment (the API server back, the operator's accept, a relisting
 * asked for): `add` returns the function that removes that listener, and `tell` calls every
 * listener added and not removed, one that throws failing alone. Written here rather than with
 * Node's EventEmitter, whose `off` removes a function added twice only once, and whose `emit`
 * stops at the first listener that throws.
 */
export class Listeners {
  readonly #all = new Set<() => void>();

  /** Adds `listener` (a function added twice is two listeners); the function returned removes it. */
  add(listener: () => void): () => void {
    const own = (): void => listener();
    this.#all.add(own);
    return () => {
      this.#all.delete(own);
    };
  }

  /** Calls every listener; one that throws fails alone, the others are still told. */
  tell(): void {
    for (const listener of [...this.#all]) {
      try {
        listener();
      } catch {
        // Its own failure.
      }
    }
  }
}
