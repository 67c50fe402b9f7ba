/**
 * What the two-tier store (tiered/store.ts) runs beside its commits, from `start` to `stop`: the
 * publication of changed blocks every `publishMs`, and the check of this node's claims and
 * admission guards against the cluster's, fed by the tier's watches (ClusterTier.watchClaims,
 * watchSpaces) where it has them.
 *
 * Guarantees:
 * - checks run one after another, never two at once: a check asked for while one runs waits for
 *   it, then runs (so the caller sees what the cluster says after it asked);
 * - a change the watch of this node's claims shows sets one check on the next turn of the clock
 *   (a claim deleted by hand is acted on at once, not a check later); changes shown before it runs
 *   share it. The check also runs every `checkMs`, which sends nothing while the watches are open
 *   and synced and no claim is lost (tiered/claims.ts, tiered/admissions.ts);
 * - a publication of this node's that the tier's watch shows vanished (ClusterTier.watchPublications)
 *   is told to `republish`, written again at the next publication run (one write, no request per ADD);
 * - no chore throws: a failed check is told to `notice`, and the next one retries;
 * - `stop` ends every timer and closes the watches: nothing runs or is requested after it.
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import type { TieredAdmissions } from './admissions.ts';
import type { TieredClaims } from './claims.ts';
import type { ClusterTier } from './cluster-tier.ts';
import type { ClaimKeeper } from './reclaim.ts';

export interface TieredChoresParts {
  readonly tier: ClusterTier;
  readonly node: string;
  readonly clock: Clock;
  readonly claims: TieredClaims;
  readonly keeper: ClaimKeeper;
  readonly admissions: TieredAdmissions;
  /** Publishes the blocks whose local picture changed (tiered/publisher.ts). */
  readonly publish: () => Promise<void>;
  /** Told the block key of each publication of this node's that vanished (tiered/publisher.ts `vanished`). */
  readonly republish: (key: string) => void;
  readonly publishMs: number;
  readonly checkMs: number;
  readonly notice: (message: string) => void;
}

export class TieredChores {
  readonly #p: TieredChoresParts;
  /** Publication and the claim check, on the clock. */
  #tasks: PeriodicTask<void>[] = [];
  /** The watches of this node's claims, of its publications and of the address spaces. */
  #watches: Array<{ close(): void }> = [];
  /** The check running or last run. */
  #checking: Promise<void> = Promise.resolve();
  /** Cancels the check set on the clock by a change a watch showed, not run yet. */
  #soon: (() => void) | undefined;

  constructor(parts: TieredChoresParts) {
    this.#p = parts;
  }

  /** Opens the tier's watches, and starts publication and the claim check on the clock. */
  start(): void {
    const { tier, node, claims, admissions, publishMs, checkMs } = this.#p;
    const claimsWatch = tier.watchClaims?.(node);
    const spacesWatch = tier.watchSpaces?.();
    claims.watch(claimsWatch);
    admissions.watch(spacesWatch);
    claimsWatch?.onChange(() => this.#checkSoon());
    const publicationsWatch = tier.watchPublications?.(node);
    publicationsWatch?.onGone(this.#p.republish);
    this.#watches = [claimsWatch, spacesWatch, publicationsWatch].filter((w) => w !== undefined);
    this.#every(publishMs, this.#p.publish);
    this.#every(checkMs, () => this.check());
  }

  /** `run` an interval after start, then an interval after each run ends (neither run throws). */
  #every(intervalMs: number, run: () => Promise<void>): void {
    const task = new PeriodicTask({ clock: this.#p.clock, intervalMs, run });
    task.start();
    this.#tasks.push(task);
  }

  /** A check on the next turn of the clock, unless one is set already: a claim changed in the cluster. */
  #checkSoon(): void {
    if (this.#soon !== undefined) return;
    this.#soon = this.#p.clock.setTimer(0, () => {
      this.#soon = undefined;
      void this.check();
    });
  }

  /** Holds this node's claims and guards to the cluster's, after any check running; never throws. */
  check(): Promise<void> {
    this.#checking = this.#checking.then(() => this.#checkOnce());
    return this.#checking;
  }

  async #checkOnce(): Promise<void> {
    try {
      await this.#p.keeper.check();
      await this.#p.admissions.checkAll();
    } catch (error) {
      this.#p.notice(`checking the claims of node ${this.#p.node} failed, retrying: ${messageOf(error)}`);
    }
  }

  /** Ends every timer and closes the watches. */
  stop(): void {
    for (const task of this.#tasks) task.stop();
    this.#tasks = [];
    this.#soon?.();
    this.#soon = undefined;
    for (const watch of this.#watches) watch.close();
    this.#watches = [];
  }
}
