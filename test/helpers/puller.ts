/**
 * Pulls items from an async iterator one at a time, each with a deadline, never sleeping: what
 * tests of event sources (watchers, streams) use to wait for the next thing to happen. A pull that
 * outlived its deadline is kept, so the next pull waits for it rather than asking again.
 */
import { HANG_BOUND_MS } from './processes.ts';

/** A pull's deadline bounds a hang, it does not time the machine. */
const DEADLINE_MS = HANG_BOUND_MS;

export class Puller<T> {
  /** Everything pulled so far, for failure messages. */
  readonly seen: T[] = [];
  ended = false;
  readonly #it: AsyncIterator<T>;
  readonly #describe: (seen: readonly T[]) => string;
  #pending: Promise<IteratorResult<T>> | undefined;

  /** `describe` says what was seen (or how the source stands) when a deadline passes. */
  constructor(source: AsyncIterable<T>, describe: (seen: readonly T[]) => string = (seen) => JSON.stringify(seen)) {
    this.#it = source[Symbol.asyncIterator]();
    this.#describe = describe;
  }

  /** The next item; undefined when the iteration ended; throws after `deadlineMs`. */
  async next(what: string, deadlineMs = DEADLINE_MS): Promise<T | undefined> {
    if (this.ended) return undefined;
    this.#pending ??= this.#it.next();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>(
      (resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, deadlineMs))),
    );
    const result = await Promise.race([this.#pending, timeout]);
    clearTimeout(timer);
    if (result === 'timeout')
      throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}; saw ${this.#describe(this.seen)}`);
    this.#pending = undefined;
    if (result.done === true) {
      this.ended = true;
      return undefined;
    }
    this.seen.push(result.value);
    return result.value;
  }

  /** The next item, which must come (the iteration must not end first). */
  async take(what: string, deadlineMs = DEADLINE_MS): Promise<T> {
    const item = await this.next(what, deadlineMs);
    if (item === undefined) throw new Error(`the iteration ended before ${what}; saw ${this.#describe(this.seen)}`);
    return item;
  }

  /**
   * Starts pulling without waiting. A generator does its work (connecting, a rescan the clock
   * asked for) only while someone waits for its next item.
   */
  prefetch(): void {
    if (!this.ended) this.#pending ??= this.#it.next();
  }

  /** Pulls until an item matches; returns it and the items skipped on the way. */
  async until(what: string, match: (item: T) => boolean): Promise<{ item: T; skipped: T[] }> {
    const end = Date.now() + DEADLINE_MS;
    const skipped: T[] = [];
    for (;;) {
      const item = await this.take(what, end - Date.now());
      if (match(item)) return { item, skipped };
      skipped.push(item);
    }
  }
}
