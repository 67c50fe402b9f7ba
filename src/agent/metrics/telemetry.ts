/**
 * What the agent's parts tell about their work, as it happens: CNI calls (and the failed ones'
 * network and message), addresses released and
 * by whom, store commits, failed release attempts, audits. One narrow interface so that the parts
 * (the CNI service, the release pipeline, the store) know nothing of Prometheus; `NO_TELEMETRY`
 * is what they are given when metrics are off, and `fanOut` joins several listeners (metrics and
 * the recent-releases list).
 *
 * Every method is cheap and never throws: it runs on the hot path of ADD.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import type { CniFailure, ReleaseSource } from '../../api/dashboard.ts';

export type { ReleaseSource } from '../../api/dashboard.ts';
export { RELEASE_SOURCES } from '../../api/dashboard.ts';

/** How a store commit ended. */
export type CommitResultKind = 'committed' | 'conflict' | 'error';

/** Audit counts by verdict. */
export interface AuditCounts {
  readonly healthy: number;
  readonly stale: number;
  readonly suspect: number;
}

export interface Telemetry {
  /**
   * One CNI call answered: its command (as sent, when it was one of the spec's), its CNI code (0:
   * success), seconds taken.
   */
  cniCall(command: string, code: number, seconds: number): void;
  /** One CNI call answered with an error (after `cniCall`): which network, what was said. */
  cniFailed(failure: FailedCall): void;
  /** Addresses newly allocated (committed). */
  allocated(allocations: readonly Allocation[]): void;
  /** Addresses released (committed), by whom and why; `adapter` names the runtime adapter for `plugin`. */
  released(source: ReleaseSource, allocations: readonly Allocation[], reason: string, adapter?: string): void;
  /** One store commit: seconds taken and how it ended. */
  commit(seconds: number, result: CommitResultKind): void;
  /** One release attempt of `source` failed and will be retried. */
  retried(source: ReleaseSource): void;
  /** An audit ran (`warren audit`, or the reconcile pass): what it found. */
  audited(counts: AuditCounts): void;
}

/** A CNI call that failed, as its listeners are told it (they stamp the time on their clock); untrusted text. */
export type FailedCall = Omit<CniFailure, 'at'>;

const nothing = (): void => {};

export const NO_TELEMETRY: Telemetry = {
  cniCall: nothing,
  cniFailed: nothing,
  allocated: nothing,
  released: nothing,
  commit: nothing,
  retried: nothing,
  audited: nothing,
};

/** A listener of some of the events (a dashboard's history listens to one), the others told to no one. */
function complete(l: Partial<Telemetry>): Telemetry {
  return {
    cniCall: l.cniCall?.bind(l) ?? nothing,
    cniFailed: l.cniFailed?.bind(l) ?? nothing,
    allocated: l.allocated?.bind(l) ?? nothing,
    released: l.released?.bind(l) ?? nothing,
    commit: l.commit?.bind(l) ?? nothing,
    retried: l.retried?.bind(l) ?? nothing,
    audited: l.audited?.bind(l) ?? nothing,
  };
}

/** One listener that tells each of `listeners`, in order; each is told only what it listens to. */
export function fanOut(...listeners: readonly Partial<Telemetry>[]): Telemetry {
  const live = listeners.filter((l) => l !== NO_TELEMETRY).map(complete);
  if (live.length === 0) return NO_TELEMETRY;
  if (live.length === 1) return live[0] as Telemetry;
  return {
    cniCall: (command, code, seconds) => live.forEach((l) => l.cniCall(command, code, seconds)),
    cniFailed: (failure) => live.forEach((l) => l.cniFailed(failure)),
    allocated: (allocations) => live.forEach((l) => l.allocated(allocations)),
    released: (source, allocations, reason, adapter) =>
      live.forEach((l) => l.released(source, allocations, reason, adapter)),
    commit: (seconds, result) => live.forEach((l) => l.commit(seconds, result)),
    retried: (source) => live.forEach((l) => l.retried(source)),
    audited: (counts) => live.forEach((l) => l.audited(counts)),
  };
}
