/**
 * The audit: every allocation against every source of truth the node can observe, with a verdict
 * and the reason for it.
 *
 *   stale    provably unused: a DEL for it is pending in the journal, or its network namespace
 *            is gone from a directory the agent can observe. `--fix` releases these, nothing else.
 *   suspect  nothing proves it used or unused: no namespace or pod was recorded (orphaned), or
 *            the namespace is where the agent cannot see. Reported, never released.
 *   healthy  its namespace exists, or it is younger than `--netns-grace`.
 *
 * A namespace gone is proof at any age: a runtime creates the namespace before it calls ADD (the
 * CNI contract), and an allocation is judged only once a listing of the store holds it, so its ADD
 * committed while the namespace was there. The grace (0 by default) is for a runtime that calls
 * ADD before its namespace appears in the directory.
 *
 * A source that cannot be observed never reads as "everything is gone".
 */
import { type Allocation, createdMoment, ownerKey } from '../../ipam/allocation.ts';
import { type Moment, atOrBefore, msBetween } from '../../core/moment.ts';
import type { NetnsObserver } from '../../sources/netns.ts';
import type { AuditReport, AuditVerdict } from '../../api/protocol.ts';

// The report is the API's (api/protocol.ts); these names stay for the agent's own modules.
export type { AuditFinding, AuditReport, AuditVerdict } from '../../api/protocol.ts';

export interface AuditContext {
  /** ownerKey of every attachment with a pending journal intent → when its DELs were recorded. */
  readonly journalOwners: ReadonlyMap<string, readonly Moment[]>;
  readonly observer: NetnsObserver;
  readonly now: Moment;
  /** The boot running now (core/moment.ts orders moments by it). */
  readonly boot?: string | undefined;
  /** This node, where several share the store (allocation.ts createdMoment). */
  readonly node?: string | undefined;
  /** Allocations younger than this are not judged by their namespace (`--netns-grace`). */
  readonly graceMs: number;
}

export function judge(
  allocation: Allocation,
  ctx: AuditContext,
  cache: Map<string, { observable: boolean; reason?: string }>,
): AuditVerdict {
  const made = createdMoment(allocation, ctx.node);
  // A DEL recorded before this allocation was made is about an earlier one of the same attachment.
  if (
    (ctx.journalOwners.get(ownerKey(allocation)) ?? []).some((recordedAt) => atOrBefore(made, recordedAt, ctx.boot))
  ) {
    return {
      kind: 'stale',
      proof: 'journal',
      reason: 'a DEL for this attachment is pending in the missed-delete journal',
    };
  }
  const age = msBetween(made, ctx.now);
  // Made "in the future": a record measured on the wall clock alone (one a publication or an older
  // disk brought back) and the wall clock stepped back since. Not young: judged by its namespace (found
  // by the soak: with the grace at 0 such records were kept, as "within --netns-grace", for the step).
  if (age >= 0 && age < ctx.graceMs) {
    return {
      kind: 'healthy',
      reason: `allocated ${Math.round(age / 1000)}s ago, within --netns-grace`,
    };
  }
  const seen = ctx.observer.observe(allocation.netns, cache);
  switch (seen.kind) {
    case 'exists':
      return { kind: 'healthy', reason: `network namespace ${allocation.netns} exists` };
    case 'gone':
      return { kind: 'stale', proof: 'netns-gone', reason: `network namespace ${allocation.netns} is gone` };
    case 'unobservable':
      if (allocation.netns === undefined && allocation.podUID === undefined && allocation.podName === undefined) {
        return {
          kind: 'suspect',
          why: 'orphaned',
          reason: 'no network namespace or pod was recorded, so nothing can vouch for it',
        };
      }
      return {
        kind: 'suspect',
        why: 'unobservable',
        reason: `cannot be checked: ${seen.reason}`,
        unobservableBecause: seen.reason,
      };
    default: {
      const never: never = seen;
      throw new Error(`unhandled observation ${JSON.stringify(never)}`);
    }
  }
}

export function audit(
  allocations: readonly Allocation[],
  ctx: AuditContext,
  journal: { dir: string; pending: number },
): AuditReport {
  const cache = new Map<string, { observable: boolean; reason?: string }>();
  const findings = allocations.map((allocation) => ({ allocation, verdict: judge(allocation, ctx, cache) }));
  const counts = { healthy: 0, stale: 0, suspect: 0 };
  for (const f of findings) counts[f.verdict.kind] += 1;
  return {
    at: new Date(ctx.now.wall).toISOString(),
    counts,
    sources: { journal, netns: ctx.observer.directories() },
    findings,
  };
}
