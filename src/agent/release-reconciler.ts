/**
 * The reconcile loop: turns every source of release intents into committed releases.
 *
 * Journal intents are driven at once when they appear and again on every tick until they commit;
 * a failing intent backs off (1 s doubling to 5 min by default) and its file stays until the
 * release commits. Each tick also releases allocations whose network namespace is provably gone
 * (see audit.ts), and rescans the journal to catch dropped watch events. Never processes one
 * intent twice at once. Reports what each tick did.
 */
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../core/backoff.ts';
import type { CancelTimer, Clock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { type Allocation, type Owner, ownerKey } from '../ipam/allocation.ts';
import type { JournalEntry } from '../cni/journal-entry.ts';
import type { JournalEvent, MissedDeleteJournal, RejectedFile } from '../sources/missed-delete-journal.ts';
import type { NetnsObserver } from '../sources/netns.ts';
import type { Allocator } from '../store/allocator.ts';
import type { Store } from '../store/store.ts';
import { type AuditReport, audit } from './audit.ts';

interface PendingIntent {
  readonly entry: JournalEntry;
  failures: number;
  nextAttemptAt: number;
  lastError?: string;
}

export interface ReconcileReport {
  readonly at: string;
  readonly durationMs: number;
  readonly journalReleased: number;
  readonly journalFailed: number;
  readonly netnsReleased: number;
  readonly pending: number;
  /** Why the namespace sweep released nothing on some allocations' account, when it could not look. */
  readonly unobservable: readonly string[];
}

export interface ReconcilerStatus {
  readonly journalDir: string;
  readonly listed: boolean;
  readonly pending: ReadonlyArray<{ name: string; network: string; containerID: string; ifname: string; failures: number; nextAttemptAt?: string; lastError?: string }>;
  readonly rejected: readonly RejectedFile[];
  readonly releasedFromJournal: number;
  readonly lastReconcile?: ReconcileReport;
  readonly recentErrors: ReadonlyArray<{ at: string; message: string }>;
}

export interface ReleaseReconcilerOptions {
  readonly allocator: Allocator;
  readonly store: Store;
  readonly journal: MissedDeleteJournal;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
  readonly intervalMs: number;
  /** Allocations younger than this are never judged by their namespace. */
  readonly netnsGraceMs: number;
  readonly releaseGoneNetns: boolean;
  /**
   * Judge only this node's allocations (a store shared by nodes: another node's namespaces are
   * not visible here, so their absence proves nothing).
   */
  readonly onlyNode?: string;
  /** Other work done on every tick (cluster upkeep); a failure is reported and the tick goes on. */
  readonly upkeep?: ReadonlyArray<{ readonly name: string; readonly run: () => Promise<void> }>;
}

const MAX_RECENT = 20;

export class ReleaseReconciler {
  readonly #o: ReleaseReconcilerOptions;
  /** Journal intents not yet committed, by file name. */
  readonly #pending = new Map<string, PendingIntent>();
  /** Intents being released right now, and how that ends: never two releases of one intent at once. */
  readonly #inFlight = new Map<string, Promise<boolean>>();
  #rejected: RejectedFile[] = [];
  #errors: Array<{ at: string; message: string }> = [];
  #last: ReconcileReport | undefined;
  #listed = false;
  #released = 0;
  #cancelTick: CancelTimer | undefined;
  /** The last pass asked for; the next one chains behind it. */
  #ticking: Promise<ReconcileReport> | undefined;
  #stopped = false;

  constructor(options: ReleaseReconcilerOptions) {
    this.#o = options;
  }

  /** Consumes the journal until `signal` aborts, and ticks every interval. */
  start(signal: AbortSignal): Promise<void> {
    this.#schedule();
    signal.addEventListener('abort', () => {
      this.#stopped = true;
      this.#cancelTick?.();
    });
    return this.#consume(signal);
  }

  async #consume(signal: AbortSignal): Promise<void> {
    try {
      for await (const event of this.#o.journal.events(signal)) this.#take(event);
    } catch (error) {
      if (!signal.aborted) this.#error(`journal watch stopped: ${messageOf(error)}`);
    }
  }

  /** One journal event: an intent becomes pending and is driven at once; the rest is reported. */
  #take(event: JournalEvent): void {
    switch (event.kind) {
      case 'intent': {
        const known = this.#pending.get(event.name);
        if (known === undefined) this.#pending.set(event.name, { entry: event.entry, failures: 0, nextAttemptAt: 0 });
        void this.#drive(event.name);
        break;
      }
      case 'rejected':
        this.#rejected = [...this.#rejected, { name: event.name, reason: event.reason }].slice(-MAX_RECENT);
        this.#o.logger.warn({ file: event.name, reason: event.reason, movedTo: event.movedTo }, 'journal file set aside');
        if (event.pruned !== undefined) {
          this.#o.logger.warn({ removed: event.pruned.files, bytes: event.pruned.bytes }, `removed the oldest set-aside journal files: ${event.pruned.why}`);
        }
        break;
      case 'listed':
        this.#listed = true;
        this.#o.logger.info({ pending: this.#pending.size }, 'journal listed');
        break;
      case 'error':
        this.#error(event.message);
        break;
      default: {
        const never: never = event;
        throw new Error(`unhandled journal event ${JSON.stringify(never)}`);
      }
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancelTick = this.#o.clock.setTimer(this.#o.intervalMs, () => {
      void this.tick().finally(() => this.#schedule());
    });
  }

  #error(message: string): void {
    this.#errors = [...this.#errors, { at: new Date(this.#o.clock.now()).toISOString(), message }].slice(-MAX_RECENT);
    this.#o.logger.error(message);
  }

  /**
   * Tries one intent if it is due and not already in flight; true when it committed. `force`
   * ignores the backoff and, when the intent is in flight, waits for that attempt instead.
   */
  #drive(name: string, force = false): Promise<boolean> {
    const running = this.#inFlight.get(name);
    if (running !== undefined) return force ? running : Promise.resolve(false);
    const intent = this.#pending.get(name);
    if (intent === undefined) return Promise.resolve(false);
    if (!force && intent.nextAttemptAt > this.#o.clock.now()) return Promise.resolve(false);
    const attempt = this.#attempt(name, intent).finally(() => this.#inFlight.delete(name));
    this.#inFlight.set(name, attempt);
    return attempt;
  }

  /**
   * Before an ADD: applies every pending DEL recorded for this attachment, so the ADD neither gets
   * back the address that DEL gave up (a retried ADD returns what the owner holds) nor has its new
   * address released by that DEL later. Throws TRY_AGAIN when such a DEL cannot be applied yet.
   */
  async settle(owner: Owner): Promise<void> {
    // The plugin may have journaled this attachment's DEL a moment ago, before the watch says so.
    for (const event of this.#o.journal.readFor(owner)) this.#take(event);
    if (this.#pending.size === 0) return;
    const key = ownerKey(owner);
    for (const [name, intent] of [...this.#pending]) {
      if (ownerKey(intent.entry) !== key) continue;
      if (!(await this.#drive(name, true)) && this.#pending.has(name)) {
        throw new WarrenError('TRY_AGAIN', `a DEL of container ${owner.containerID} (${owner.ifname}) is pending in the missed-delete journal and could not be applied yet: ${intent.lastError ?? 'unknown error'}`);
      }
    }
  }

  async #attempt(name: string, intent: PendingIntent): Promise<boolean> {
    try {
      const { network, containerID, ifname, recordedAt } = intent.entry;
      // The intent speaks for what was allocated before the DEL was recorded: a later ADD of the
      // same container and interface (the runtime retried it once the store was back) is in use.
      const released = await this.#o.allocator.release({ network, containerID, ifname }, undefined, { createdAtOrBefore: recordedAt });
      this.#o.journal.complete(name);
      this.#pending.delete(name);
      this.#released += 1;
      this.#o.logger.info({ file: name, released: released.map((a) => a.address) }, 'missed delete released');
      return true;
    } catch (error) {
      intent.failures += 1;
      intent.nextAttemptAt = this.#o.clock.now() + this.#o.backoff.delay(intent.failures);
      intent.lastError = messageOf(error);
      this.#o.logger.warn({ file: name, failures: intent.failures, err: intent.lastError }, 'missed delete release failed; will retry');
      return false;
    }
  }

  /** One reconcile pass: re-drive due intents, sweep gone namespaces, rescan the journal. */
  tick(): Promise<ReconcileReport> {
    // One pass at a time: a pass asked for during another runs after it, with a fresh look.
    const pass = (this.#ticking ?? Promise.resolve(undefined)).catch(() => undefined).then(() => this.#tick());
    this.#ticking = pass;
    void pass.finally(() => {
      if (this.#ticking === pass) this.#ticking = undefined;
    }).catch(() => undefined);
    return pass;
  }

  async #tick(): Promise<ReconcileReport> {
    const started = this.#o.clock.now();
    let journalReleased = 0;
    let journalFailed = 0;
    for (const name of [...this.#pending.keys()]) {
      const before = this.#pending.get(name)?.failures ?? 0;
      if (await this.#drive(name)) journalReleased += 1;
      else if ((this.#pending.get(name)?.failures ?? 0) > before) journalFailed += 1;
    }
    let netnsReleased = 0;
    const unobservable = new Set<string>();
    if (this.#o.releaseGoneNetns) {
      try {
        const report = await this.audit(false);
        for (const f of report.findings) {
          if (f.verdict.kind === 'suspect' && f.verdict.why === 'unobservable') unobservable.add(f.verdict.reason.replace(/^cannot be checked: /, ''));
          if (f.verdict.kind !== 'stale' || f.verdict.proof !== 'netns-gone') continue;
          netnsReleased += (await this.#releaseStale(f.allocation)).length;
        }
      } catch (error) {
        this.#error(`namespace sweep failed: ${messageOf(error)}`);
      }
    }
    for (const task of this.#o.upkeep ?? []) {
      try {
        await task.run();
      } catch (error) {
        this.#error(`${task.name} failed: ${messageOf(error)}`);
      }
    }
    this.#o.journal.rescan();
    const report: ReconcileReport = {
      at: new Date(started).toISOString(),
      durationMs: this.#o.clock.now() - started,
      journalReleased,
      journalFailed,
      netnsReleased,
      pending: this.#pending.size,
      unobservable: [...unobservable].slice(0, 10),
    };
    this.#last = report;
    const log = journalReleased + journalFailed + netnsReleased > 0 ? this.#o.logger.info.bind(this.#o.logger) : this.#o.logger.debug.bind(this.#o.logger);
    log(report, 'reconciled');
    return report;
  }

  async #releaseStale(allocation: Allocation): Promise<Allocation[]> {
    const { network, containerID, ifname } = allocation;
    const released = await this.#o.allocator.release({ network, containerID, ifname });
    if (released.length > 0) this.#o.logger.info({ containerID, ifname, addresses: released.map((a) => a.address), netns: allocation.netns }, 'released: network namespace is gone');
    return released;
  }

  /** Audits every allocation; with `fix`, releases the provably stale ones and nothing else. */
  async audit(fix: boolean): Promise<AuditReport> {
    const journalOwners = new Map<string, number>();
    for (const intent of this.#pending.values()) {
      const key = ownerKey(intent.entry);
      journalOwners.set(key, Math.max(journalOwners.get(key) ?? 0, intent.entry.recordedAt));
    }
    const now = this.#o.clock.now();
    const report = audit(
      await this.#o.store.list(this.#o.onlyNode === undefined ? {} : { node: this.#o.onlyNode }),
      { journalOwners, observer: this.#o.observer, now, graceMs: this.#o.netnsGraceMs },
      { dir: this.#o.journal.dir, pending: this.#pending.size },
    );
    if (!fix) return report;
    const released: Allocation[] = [];
    const errors: string[] = [];
    for (const f of report.findings) {
      if (f.verdict.kind !== 'stale') continue;
      try {
        if (f.verdict.proof === 'journal') {
          for (const [name, intent] of this.#pending) {
            if (ownerKey(intent.entry) === ownerKey(f.allocation) && (await this.#drive(name, true))) released.push(f.allocation);
          }
        } else {
          released.push(...(await this.#releaseStale(f.allocation)));
        }
      } catch (error) {
        errors.push(`${f.allocation.address} (${f.allocation.containerID}): ${messageOf(error)}`);
      }
    }
    return { ...report, released, errors };
  }

  status(): ReconcilerStatus {
    return {
      journalDir: this.#o.journal.dir,
      listed: this.#listed,
      pending: [...this.#pending].map(([name, p]) => ({
        name,
        network: p.entry.network,
        containerID: p.entry.containerID,
        ifname: p.entry.ifname,
        failures: p.failures,
        ...(p.failures > 0 ? { nextAttemptAt: new Date(p.nextAttemptAt).toISOString() } : {}),
        ...(p.lastError === undefined ? {} : { lastError: p.lastError }),
      })),
      rejected: this.#rejected,
      releasedFromJournal: this.#released,
      ...(this.#last === undefined ? {} : { lastReconcile: this.#last }),
      recentErrors: this.#errors,
    };
  }
}
