/**
 * The reconcile pass: what no source reports by itself is looked for every interval, and handed
 * to the release pipeline as intents —
 * - the namespace sweep: allocations whose network namespace is provably gone (release/audit.ts judges;
 *   only this node's allocations on a store shared by nodes, whose namespaces are not visible
 *   here), as `netns-gone` intents;
 * - exited containers, looked at again (`namespace-recheck`);
 * - a rescan of the journal, for watch events the kernel dropped;
 * - before the sweep, the network namespaces of addresses no CNI ADD recorded (migrated ones), from
 *   the runtime's sandboxes, where containerd is followed (sandbox-netns.ts), on the same listing
 *   of the store the sweep then audits: a pass lists the store once.
 * A pass runs as the agent starts, every interval after, and soon after a watched namespace
 * directory loses an entry (`soon`). The pass releases nothing itself: the pipeline decides and
 * applies. One pass at a time; each
 * waits for the work it queued (and the work under way when it began) to be applied or to back
 * off, and reports what the pipeline did meanwhile. Also serves the audit, and `--fix` through the
 * pipeline.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { momentOf } from '../../core/moment.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import type { ReconcileReport, ReconcilerStatus } from '../../api/status.ts';
import { type Allocation, createdMoment } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { NetnsObserver } from '../../sources/netns.ts';
import type { Store } from '../../store/store.ts';
import { type AuditReport, audit } from './audit.ts';
import type { RecentErrors } from '../metrics/recent-errors.ts';
import type { JournalIntake } from './journal.ts';
import type { ReleasePipeline } from './pipeline.ts';
import type { ReleaseIntent } from './intent.ts';
import type { Telemetry } from '../metrics/telemetry.ts';
import { type SandboxLookup, recordSandboxNamespaces } from './sandbox-netns.ts';

// The shapes `warren status` and `warren journal` answer are the API's.
export type { ReconcileReport, ReconcilerStatus } from '../../api/status.ts';

export interface ReleaseReconcilerOptions {
  readonly pipeline: ReleasePipeline;
  readonly journal: JournalIntake;
  readonly store: Store;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly errors: RecentErrors;
  readonly intervalMs: number;
  /** Allocations younger than this are never judged by their namespace. */
  readonly netnsGraceMs: number;
  readonly releaseGoneNetns: boolean;
  /**
   * Judge only this node's allocations (a store shared by nodes: another node's namespaces are
   * not visible here, so their absence proves nothing).
   */
  readonly onlyNode?: string;
  /** Told what every audit found (metrics). */
  readonly telemetry?: Telemetry;
  /** The runtime's sandboxes of a pod, where the runtime is followed: namespaces recorded (sandbox-netns.ts). */
  readonly sandboxes?: SandboxLookup | undefined;
}

export class ReleaseReconciler {
  readonly #o: ReleaseReconcilerOptions;
  readonly #task: PeriodicTask<ReconcileReport>;
  #last: ReconcileReport | undefined;
  /** A pass asked for by `soon` has not begun yet: another ask joins it. */
  #soonQueued = false;

  constructor(options: ReleaseReconcilerOptions) {
    this.#o = options;
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: options.intervalMs,
      run: () => this.#pass(),
      onError: (error) => options.errors.add(`reconcile pass failed: ${messageOf(error)}`),
      // What changed while no agent ran (a restored disk's records, namespaces removed meanwhile)
      // is looked at as the agent starts, not an interval later.
      runAtStart: true,
    });
  }

  /** Runs a pass at once, then every interval until `signal` aborts. */
  start(signal: AbortSignal): void {
    this.#task.start(signal);
  }

  /**
   * A pass as soon as the one under way (if any) ends: a namespace was removed, and what it held
   * is provably free now. Asks made before that pass begins join it, so a burst of removals (a
   * node draining) costs two passes at most, never one per removal.
   */
  soon(): void {
    if (this.#soonQueued) return;
    this.#soonQueued = true;
    this.#task.runNow().catch((error: unknown) => this.#o.errors.add(`reconcile pass failed: ${messageOf(error)}`));
  }

  /** One pass now (after any pass under way). */
  tick(): Promise<ReconcileReport> {
    return this.#task.runNow();
  }

  async #pass(): Promise<ReconcileReport> {
    // From here on a removal is one this pass may not see: it asks for the next.
    this.#soonQueued = false;
    const { pipeline } = this.#o;
    const started = this.#o.clock.now();
    const before = pipeline.counts();
    const unobservable = new Set<string>();
    const { sandboxes: lookup, store, logger, errors } = this.#o;
    // One listing a pass: the namespaces are recorded on it and the sweep audits what that answers.
    // Where recording fails (or containerd is not followed) the audit lists for itself.
    let listed: readonly Allocation[] | undefined;
    if (lookup !== undefined)
      listed = await this.#listed()
        .then((all) => recordSandboxNamespaces({ store, lookup, listed: all, logger, errors }))
        .catch((error) => {
          errors.add(`recording sandboxes' namespaces failed: ${messageOf(error)}`);
          return undefined;
        });
    if (this.#o.releaseGoneNetns) {
      try {
        for (const intent of this.#sweep(await this.audit(false, listed), unobservable)) pipeline.push(intent);
      } catch (error) {
        this.#o.errors.add(`namespace sweep failed: ${messageOf(error)}`);
      }
    }
    pipeline.recheckExited();
    await pipeline.settled();
    this.#o.journal.rescan();
    const after = pipeline.counts();
    const report: ReconcileReport = {
      at: new Date(started).toISOString(),
      durationMs: this.#o.clock.now() - started,
      journalReleased: after['journal-del'].done - before['journal-del'].done,
      journalFailed: after['journal-del'].failed - before['journal-del'].failed,
      netnsReleased: after['netns-gone'].addresses - before['netns-gone'].addresses,
      pending: this.#o.journal.pending().length,
      unobservable: [...unobservable].slice(0, 10),
    };
    this.#last = report;
    const busy = report.journalReleased + report.journalFailed + report.netnsReleased > 0;
    (busy ? this.#o.logger.info.bind(this.#o.logger) : this.#o.logger.debug.bind(this.#o.logger))(report, 'reconciled');
    return report;
  }

  /** The sweep: an intent per allocation whose namespace is provably gone; notes what it could not see. */
  *#sweep(report: AuditReport, unobservable: Set<string>): Generator<ReleaseIntent> {
    for (const { allocation: a, verdict } of report.findings) {
      if (verdict.kind === 'suspect' && verdict.why === 'unobservable') unobservable.add(verdict.unobservableBecause);
      if (verdict.kind === 'stale' && verdict.proof === 'netns-gone') yield netnsGone(a);
    }
  }

  /** Those of `held` whose recorded network namespace exists now: a container still uses them. */
  inUse(held: readonly Allocation[]): Allocation[] {
    const cache = new Map<string, { observable: boolean; reason?: string }>();
    return held.filter((a) => a.netns !== undefined && this.#o.observer.observe(a.netns, cache).kind === 'exists');
  }

  /** This node's allocations (all on a store of one node). */
  #listed(): Promise<readonly Allocation[]> {
    return this.#o.store.list({ node: this.#o.onlyNode });
  }

  /**
   * Audits every allocation (of `listed` when given: the pass's listing; else of a listing made
   * now); with `fix`, releases the provably stale ones and nothing else.
   */
  async audit(fix: boolean, listed?: readonly Allocation[]): Promise<AuditReport> {
    const { journal, pipeline } = this.#o;
    // Bookkeeping records (ipam/bookkeeping.ts) have no namespace or pod to judge them by: they are
    // never stale, suspect or unobservable, so the audit (and the sweep and --fix after it) skips them.
    const report = audit(
      (listed ?? (await this.#listed())).filter((a) => !isBookkeeping(a)),
      {
        journalOwners: journal.owners(),
        observer: this.#o.observer,
        now: momentOf(this.#o.clock),
        boot: this.#o.clock.boot,
        node: this.#o.onlyNode,
        graceMs: this.#o.netnsGraceMs,
      },
      { dir: journal.dir, pending: journal.pending().length },
    );
    this.#o.telemetry?.audited(report.counts);
    if (!fix) return report;
    const released: Allocation[] = [];
    const errors: string[] = [];
    for (const f of report.findings) {
      if (f.verdict.kind !== 'stale') continue;
      const a = f.allocation;
      try {
        if (f.verdict.proof === 'journal') {
          // The pending DEL is applied now; when it cannot be yet, the pipeline logs why and retries.
          if (
            await pipeline.applyPending(a).then(
              () => true,
              () => false,
            )
          )
            released.push(a);
        } else {
          released.push(...(await pipeline.releaseNow(netnsGone(a), 'audit')));
        }
      } catch (error) {
        errors.push(`${a.address} (${a.containerID}): ${messageOf(error)}`);
      }
    }
    return { ...report, released, errors };
  }

  status(): ReconcilerStatus {
    const { journal, pipeline } = this.#o;
    return {
      journalDir: journal.dir,
      listed: journal.listed,
      pending: journal.pending().map((intent) => {
        const attempts = pipeline.attempts(intent) ?? { failures: 0 };
        return {
          name: intent.file,
          ...intent.owner,
          failures: attempts.failures,
          ...(attempts.retryAt === undefined ? {} : { nextAttemptAt: new Date(attempts.retryAt).toISOString() }),
          ...defined({ lastError: attempts.lastError }),
        };
      }),
      rejected: journal.rejected(),
      unread: journal.unread(),
      releasedFromJournal: pipeline.counts()['journal-del'].done,
      ...defined({ lastReconcile: this.#last }),
      recentErrors: this.#o.errors.list(),
    };
  }
}

function netnsGone(a: Allocation): ReleaseIntent {
  return {
    kind: 'netns-gone',
    owner: { network: a.network, containerID: a.containerID, ifname: a.ifname },
    netns: a.netns ?? '',
    createdAt: createdMoment(a),
  };
}
