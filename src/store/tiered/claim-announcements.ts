/**
 * A block's first publication, written with its claim (tiered/claim-commit.ts) before any address of
 * it is handed out. What keeps another node off a block whose claim vanished (deleted by hand, lost
 * with a restored cluster) is the block's publication (tiered/claim-guard.ts): a claim lost between
 * the claim and the publisher's next run left nothing to see, and another node could claim the block
 * and hand out an address this node had handed out (found by the soak, issue 38). So a claim's commit
 * writes the block's publication (its owner, and the addresses it hands out next: `ahead`) before it
 * returns, and no address of the block is handed out before that write is done. One request per
 * claim; none per ADD (the ADDs that take the announced addresses need no write, tiered/publication-need.ts).
 *
 * Guarantees:
 * - from the start of `announced(key, …)` until its write is done, `refusal(key)` waits for it: an
 *   allocation of this node in the block meanwhile goes on once the block is published;
 * - a write that failed (the cluster went away just after the claim) leaves the block refused,
 *   naming why, until a publication of it is written (`written`, told by the publisher's runs);
 * - a claim that did not commit announces nothing and leaves nothing refused;
 * - costs a map look-up per allocation.
 */
import { messageOf } from '../../core/errors.ts';
import type { CommitResult } from '../store.ts';

export class ClaimAnnouncements {
  /** Blocks whose claim is being committed and announced: allocations in them wait. */
  readonly #pending = new Map<string, Promise<void>>();
  /** Blocks whose claim commits are under way (`committing`), and how many. */
  readonly #committing = new Map<string, number>();
  /** Blocks claimed whose announcement could not be written, and why: refused until written. */
  readonly #unwritten = new Map<string, string>();

  /**
   * Runs `claim` (the claim's commit), then, if it committed, `publish` (the block's publication);
   * allocations in block `key` wait for both. A failed publication does not fail the claim: it is
   * recorded on both tiers; the block is refused until a publication of it is written.
   */
  async announced(
    key: string,
    claim: () => Promise<CommitResult>,
    publish: () => Promise<void>,
  ): Promise<CommitResult> {
    let settle = (): void => undefined;
    const pending = new Promise<void>((resolve) => {
      settle = resolve;
    });
    this.#pending.set(key, pending);
    try {
      const result = await claim();
      if (result.kind !== 'committed') return result;
      try {
        await publish();
        this.#unwritten.delete(key);
      } catch (error) {
        this.#unwritten.set(
          key,
          `block ${key} was claimed, but its publication could not be written (${messageOf(error)}): ` +
            'no address of it is handed out until it is, so that a lost claim cannot let another node hand them out',
        );
      }
      return result;
    } finally {
      if (this.#pending.get(key) === pending) this.#pending.delete(key);
      settle();
    }
  }

  /** Why no address of block `key` may be handed out now (after any announcement in flight); undefined when it may. */
  async refusal(key: string): Promise<string | undefined> {
    await this.#pending.get(key);
    return this.#unwritten.get(key);
  }

  /**
   * Runs `commit`, a claim commit of block `key` from before its claim in the cluster to its record in
   * the file: `claiming(key)` is true throughout, so the claim keeper never takes the claim made for
   * an unrecorded one and gives it back (tiered/stray-claims.ts).
   */
  async committing<T>(key: string, commit: () => Promise<T>): Promise<T> {
    this.#committing.set(key, (this.#committing.get(key) ?? 0) + 1);
    try {
      return await commit();
    } finally {
      const left = (this.#committing.get(key) ?? 1) - 1;
      if (left === 0) this.#committing.delete(key);
      else this.#committing.set(key, left);
    }
  }

  /** Whether a claim of block `key` is being committed and announced now. */
  claiming(key: string): boolean {
    return this.#pending.has(key) || this.#committing.has(key);
  }

  /** Block `key`'s publication was written: an announcement that failed is made. */
  written(key: string): void {
    this.#unwritten.delete(key);
  }
}
