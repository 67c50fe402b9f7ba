/**
 * Whether an ADD can commit now, judged by the commits themselves. The store's ping alone cannot
 * say: it writes one small row, and on a nearly full disk that row fits where an ADD's write does
 * not. Measured on a tmpfs with 12 KiB free: every ADD failed "disk is full" while every ping
 * succeeded, writing into the WAL space the failed ADD had already taken.
 *
 * The rule:
 * - a commit that throws makes the agent not ready, with the error's message: the store could not
 *   take it (a full disk, an I/O error, a read-only file, a database locked past the busy timeout,
 *   etcd unreachable or refusing the write). A conflict is an answer, not a failure. A WarrenError
 *   of any code but IO_FAILURE and TRY_AGAIN is a caller's mistake, not the store's health.
 * - the next commit that succeeds, whoever makes it (an ADD, a DEL's or a GC's release, a block
 *   claim), makes it ready again.
 * - the readiness ping never clears a failure: it writes less than the commit that failed, so its
 *   success says nothing about that commit.
 * - one exception, so that a node comes back on its own. A runtime sends no ADD to a node whose
 *   network is not ready (kubelet holds its pod sandboxes), and a node with nothing to release
 *   would stay not ready for good. So once the wait of the backoff has passed since the last
 *   failure (30 s, doubling to 5 min for each trial that failed), readiness is granted on trial,
 *   if the ping succeeds too (the caller checks it first): the next commit decides. Success ends
 *   the failure; another failure starts a longer wait.
 *
 * This is the state of one process: each agent watches its own commits. On etcd that makes a
 * refused write (the NOSPACE alarm) count, which the store's ping, a read, does not see.
 */
import { type BackoffPolicy, ExponentialBackoff } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { isWarrenError, messageOf } from '../../core/errors.ts';
import { ForwardingStore } from '../../store/forwarding-store.ts';
import type { AdmissionGuard, CommitResult, SpaceReading, Store } from '../../store/store.ts';

/** How long the agent stays not ready after a failed commit before it tries again on trial. */
export const TRIAL_BACKOFF: BackoffPolicy = new ExponentialBackoff({ initialMs: 30_000, maxMs: 300_000 });

interface Failure {
  readonly message: string;
  /** On the monotonic clock: a wall clock stepped back must not keep the agent not ready for a day. */
  readonly at: number;
  /** Which wait of the backoff applies: 1, plus one for every trial that failed. */
  readonly round: number;
}

export class CommitHealth {
  readonly #clock: Clock;
  readonly #backoff: BackoffPolicy;
  /** The last failed commit since the last one that succeeded; undefined while commits succeed. */
  #failure: Failure | undefined;

  constructor(clock: Clock, backoff: BackoffPolicy = TRIAL_BACKOFF) {
    this.#clock = clock;
    this.#backoff = backoff;
  }

  /** `store` with the outcome of every commit reported here; everything else passes through. */
  watch(store: Store): Store {
    return new WatchedStore(store, this);
  }

  committed(): void {
    this.#failure = undefined;
  }

  failed(error: unknown): void {
    if (isWarrenError(error) && error.code !== 'IO_FAILURE' && error.code !== 'TRY_AGAIN') return;
    const now = this.#clock.monotonic();
    const last = this.#failure;
    // A failure while on trial means the trial failed: wait longer. One before then is the same
    // failure going on (an ADD's rollback, a release retried): the wait starts again, no longer.
    const round = last === undefined ? 1 : this.#onTrial(last, now) ? last.round + 1 : last.round;
    this.#failure = { message: messageOf(error), at: now, round };
  }

  /** Why an ADD cannot commit now; undefined when the last commit succeeded, or on trial. */
  problem(): string | undefined {
    const f = this.#failure;
    if (f === undefined) return undefined;
    const now = this.#clock.monotonic();
    if (this.#onTrial(f, now)) return undefined;
    const left = Math.ceil((f.at + this.#backoff.delay(f.round) - now) / 1000);
    return `a commit failed: ${f.message}; not ready until a commit succeeds (tried again on trial in ${left} s)`;
  }

  #onTrial(f: Failure, now: number): boolean {
    return now - f.at >= this.#backoff.delay(f.round);
  }
}

/** Runs one write and tells `health` how it ended; `wrote` says whether it wrote (not a conflict). */
async function watched<T>(health: CommitHealth, write: () => Promise<T>, wrote: (result: T) => boolean): Promise<T> {
  let result: T;
  try {
    result = await write();
  } catch (error) {
    health.failed(error);
    throw error;
  }
  // A conflict wrote nothing, so it proves nothing either way.
  if (wrote(result)) health.committed();
  return result;
}

/** A Store that tells CommitHealth how each write ended: its commits, and its range admissions. */
class WatchedStore extends ForwardingStore {
  readonly #health: CommitHealth;

  constructor(inner: Store, health: CommitHealth) {
    const cluster = inner.cluster;
    // An ADD's first write on a shared store may be the admission of its range.
    super(
      inner,
      cluster === undefined
        ? undefined
        : {
            ...cluster,
            spaces: {
              read: (space: string) => cluster.spaces.read(space),
              admit: (reading: SpaceReading, rangePool: string, retire: readonly string[]) =>
                watched(
                  health,
                  () => cluster.spaces.admit(reading, rangePool, retire),
                  (guard: AdmissionGuard | undefined) => guard !== undefined,
                ),
            },
          },
    );
    this.#health = health;
  }

  override commit(...args: Parameters<Store['commit']>): Promise<CommitResult> {
    return watched(
      this.#health,
      () => this.inner.commit(...args),
      (result) => result.kind === 'committed',
    );
  }
}
