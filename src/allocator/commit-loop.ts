/**
 * The one optimistic commit loop. Every write the allocator makes to a store is a round: read the
 * pool, decide, commit at the revision read. A conflict means another writer moved the pool first,
 * so the round runs again on a fresh picture; the loop does not wait in between, because a conflict
 * is someone else's progress, not a failure.
 *
 * Guarantees:
 * - rounds run one after another, never two at once;
 * - only a conflict is retried: an error a round throws ends the loop at once, unchanged;
 * - after `maxAttempts` rounds that all conflicted the loop gives up with TRY_AGAIN (CNI code 11),
 *   and the message names what kept changing and what was being done, so an operator reading a
 *   runtime's event knows which pool is contended.
 */
import { WarrenError } from '../core/errors.ts';

/** What a round returns when its commit met a newer revision: run another round. */
export const CONFLICT: unique symbol = Symbol('conflict');
export type Conflict = typeof CONFLICT;

/** What the loop is doing, for its give-up message: "<subject> kept changing under N attempts to <action>". */
export interface CommitTarget {
  /** What kept changing: `pool 10.0.0.0/24`, `the blocks of node n1`. */
  readonly subject: string;
  /** What was being done, a verb phrase: `allocate`, `release`, `record its block size`. */
  readonly action: string;
}

/** Runs `round` until it returns something other than CONFLICT, at most `maxAttempts` times. */
export async function retryOnConflict<T>(
  target: CommitTarget,
  maxAttempts: number,
  round: (attempt: number) => Promise<T | Conflict>,
): Promise<T> {
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const outcome = await round(attempt);
    if (outcome !== CONFLICT) return outcome;
  }
  throw new WarrenError(
    'TRY_AGAIN',
    `${target.subject} kept changing under ${maxAttempts} attempts to ${target.action}; try again`,
  );
}
