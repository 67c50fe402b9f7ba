/**
 * Containers whose task exited while their network namespace was still there: the rule keeps
 * their addresses until the namespace is gone (release/rule.ts, `wait-for-namespace`), so each is
 * remembered here and looked at again (`namespace-recheck`) when a netns directory loses an entry
 * or a reconcile pass runs. The release pipeline marks and forgets them as it applies actions;
 * status reads them.
 *
 * Guarantees:
 * - one entry per container ID; its `observedAt` is the latest exit seen, the one a recheck
 *   speaks for, so a recheck never releases what was allocated after that exit (the container ID
 *   may have been ADDed again since the first);
 * - `since` is when the container was first seen waiting, kept across later exits;
 * - an entry goes when its container's addresses are released or the rule drops it.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { type Moment, atOrBefore } from '../../core/moment.ts';
import type { ReleaseIntent, RuntimeAdapterScope } from './intent.ts';

/** An intent about a container (its runtime's events, a resync, a recheck). */
export type ContainerIntent = Extract<ReleaseIntent, { containerID: string }>;

/** One waiting container, as status shows it. */
export interface ExitedContainer {
  readonly containerID: string;
  /** When it was first seen waiting (ISO time). */
  readonly since: string;
  /** The namespace it waits for. */
  readonly waitingFor: string;
}

interface Waiting {
  /** When it was first seen waiting (ms since epoch). */
  readonly since: number;
  readonly observedAt: Moment;
  readonly waitingFor: string;
  /** The adapter that said it exited; none: containerd. */
  readonly via?: RuntimeAdapterScope;
}

export class ExitedContainers {
  readonly #clock: Clock;
  readonly #waiting = new Map<string, Waiting>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  has(containerID: string): boolean {
    return this.#waiting.has(containerID);
  }

  get size(): number {
    return this.#waiting.size;
  }

  /**
   * Records that `intent`'s container waits for `waitingFor`; true when it was not waiting before
   * (the first exit seen, which is worth a log line).
   */
  wait(intent: ContainerIntent, waitingFor: string): boolean {
    const marked = this.#waiting.get(intent.containerID);
    const boot = this.#clock.boot;
    const observedAt =
      marked !== undefined && atOrBefore(intent.observedAt, marked.observedAt, boot)
        ? marked.observedAt
        : intent.observedAt;
    const via = intent.via;
    this.#waiting.set(intent.containerID, {
      since: marked?.since ?? this.#clock.now(),
      observedAt,
      waitingFor,
      ...defined({ via }),
    });
    return marked === undefined;
  }

  forget(containerID: string): void {
    this.#waiting.delete(containerID);
  }

  /** A look-again intent for every waiting container, speaking for its latest exit. */
  rechecks(): ReleaseIntent[] {
    return [...this.#waiting].map(([containerID, { via, observedAt }]) => ({
      kind: 'namespace-recheck',
      containerID,
      observedAt,
      ...defined({ via }),
    }));
  }

  /** The containers waiting on containerd's word (no `adapter`) or on the named adapter's. */
  status(adapter?: string): ExitedContainer[] {
    return [...this.#waiting]
      .filter(([, e]) => e.via?.adapter === adapter)
      .map(([containerID, e]) => ({ containerID, since: new Date(e.since).toISOString(), waitingFor: e.waitingFor }));
  }
}
