/**
 * The missed-delete journal as a source of the release pipeline: each journal file becomes one
 * `journal-del` intent whose `ack` removes the file, so a file goes only after its release has
 * committed (or the rule found nothing it speaks for). Files set aside and watch errors are
 * reported here, for `warren status` and `warren journal`.
 *
 * Guarantees: one intent per file name at a time (the watch, a rescan and an ADD reading the
 * journal early may all report one file; a second intent for it would remove the file of a DEL
 * recorded after the first was applied); an intent reported again after its ack is a new one.
 */
import type { Logger } from 'pino';
import { messageOf } from '../../core/errors.ts';
import type { Moment } from '../../core/moment.ts';
import { type Owner, ownerKey } from '../../ipam/allocation.ts';
import type {
  JournalEvent,
  MissedDeleteJournal,
  RejectedFile,
  UnreadFile,
} from '../../sources/missed-delete-journal.ts';
import type { RecentErrors } from '../metrics/recent-errors.ts';
import type { ReleaseIntent } from './intent.ts';
import { failpoint } from '../../core/failpoints.ts';

export type JournalIntent = Extract<ReleaseIntent, { kind: 'journal-del' }>;

export interface JournalIntakeOptions {
  readonly journal: MissedDeleteJournal;
  readonly logger: Logger;
  readonly errors: RecentErrors;
}

/** Set-aside files kept for status. */
const MAX_REJECTED = 20;

export class JournalIntake {
  readonly #o: JournalIntakeOptions;
  /** Intents handed to the pipeline and not yet acknowledged, by file name. */
  readonly #pending = new Map<string, JournalIntent>();
  #rejected: RejectedFile[] = [];
  #listed = false;

  constructor(options: JournalIntakeOptions) {
    this.#o = options;
  }

  get dir(): string {
    return this.#o.journal.dir;
  }

  /** Every file present at start has been reported. */
  get listed(): boolean {
    return this.#listed;
  }

  /**
   * Hands every intent of the journal to `push` until `signal` aborts. Rejects when the watch fails
   * before that: an agent that stopped draining its journal must not go on saying it is ready
   * (the wiring makes that fatal).
   */
  async consume(signal: AbortSignal, push: (intent: ReleaseIntent) => void): Promise<void> {
    try {
      for await (const event of this.#o.journal.events(signal)) this.#take(event, push);
    } catch (error) {
      if (signal.aborted) return;
      this.#o.errors.add(`journal watch stopped: ${messageOf(error)}`);
      throw error;
    }
  }

  /** The intents journaled for one attachment that the pipeline does not have yet, read now. */
  readNow(owner: Owner): JournalIntent[] {
    const found: JournalIntent[] = [];
    for (const event of this.#o.journal.readFor(owner))
      this.#take(event, (intent) => found.push(intent as JournalIntent));
    return found;
  }

  /** Asks the journal to rescan: catches dropped watch events and retries files whose read failed. */
  rescan(): void {
    this.#o.journal.rescan();
  }

  #take(event: JournalEvent, push: (intent: JournalIntent) => void): void {
    switch (event.kind) {
      case 'intent': {
        if (this.#pending.has(event.name)) return;
        const { name, entry } = event;
        const intent: JournalIntent = {
          kind: 'journal-del',
          file: name,
          owner: { network: entry.network, containerID: entry.containerID, ifname: entry.ifname },
          recordedAt:
            entry.stamp === undefined ? { wall: entry.recordedAt } : { wall: entry.recordedAt, stamp: entry.stamp },
          ack: () => {
            failpoint('journal-unacknowledged');
            this.#o.journal.complete(name);
            this.#pending.delete(name);
          },
        };
        this.#pending.set(name, intent);
        push(intent);
        return;
      }
      case 'rejected':
        this.#rejected = [...this.#rejected, { name: event.name, reason: event.reason }].slice(-MAX_REJECTED);
        this.#o.logger.warn(
          { file: event.name, reason: event.reason, movedTo: event.movedTo },
          'journal file set aside',
        );
        if (event.pruned !== undefined) {
          this.#o.logger.warn(
            { removed: event.pruned.files, bytes: event.pruned.bytes },
            `removed the oldest set-aside journal files: ${event.pruned.why}`,
          );
        }
        return;
      case 'listed':
        this.#listed = true;
        this.#o.logger.info({ pending: this.#pending.size }, 'journal listed');
        return;
      case 'error':
        this.#o.errors.add(event.message);
        return;
      default: {
        const never: never = event;
        throw new Error(`unhandled journal event ${JSON.stringify(never)}`);
      }
    }
  }

  /** Intents not yet acknowledged, in the order they were read. */
  pending(): readonly JournalIntent[] {
    return [...this.#pending.values()];
  }

  /** ownerKey of every attachment with a pending intent → when its DELs were recorded. */
  owners(): Map<string, Moment[]> {
    const owners = new Map<string, Moment[]>();
    for (const intent of this.#pending.values()) {
      const key = ownerKey(intent.owner);
      owners.set(key, [...(owners.get(key) ?? []), intent.recordedAt]);
    }
    return owners;
  }

  rejected(): readonly RejectedFile[] {
    return this.#rejected;
  }

  /** Files in the journal whose last read failed; read again on the next rescan. */
  unread(): readonly UnreadFile[] {
    return this.#o.journal.unread();
  }
}
