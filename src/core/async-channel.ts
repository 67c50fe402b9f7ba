/**
 * A push-to-pull bridge: producers that are called back (a gRPC stream, timers) `push` items, and
 * one consumer takes them with `for await`. For sources that must be `AsyncIterable`s over
 * callback APIs.
 *
 * Guarantees: items come out in the order they were pushed, each once; nothing pushed before
 * `close` is lost (the consumer gets every buffered item, then the end); a push after `close` is
 * ignored. The buffer is unbounded: a source must not lose an event because its consumer is busy
 * for a moment, and the consumers here only hand items on.
 */
export class AsyncChannel<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  /** Wakes the consumer waiting for the next item, if it waits. */
  #wake: (() => void) | undefined;
  #closed = false;
  #iterated = false;

  push(item: T): void {
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake?.();
  }

  /** Ends the iteration once the buffered items are taken. */
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  get closed(): boolean {
    return this.#closed;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    // Two consumers would each see half of the items: a source has exactly one.
    if (this.#iterated) throw new Error('an AsyncChannel is iterated once');
    this.#iterated = true;
    for (;;) {
      if (this.#items.length > 0) {
        yield this.#items.shift() as T;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
