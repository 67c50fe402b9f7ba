/**
 * The chores of a node on a store shared by nodes, on their own interval (apart from the release
 * pipeline and its reconcile pass, whose timing they must not share a fate with):
 * - node announcement: announced at start without holding up serving (an etcd without a leader
 *   answers lease calls late), made on a later run if that failed, renewed on every run after;
 * - giving back empty blocks this node has held empty for longer than the block grace.
 * One run at a time; a chore that fails is reported (recent errors, log) and the others still run.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.ts';
import { messageOf } from '../core/errors.ts';
import { PeriodicTask } from '../core/periodic-task.ts';
import type { Allocator } from '../allocator/allocator.ts';
import type { Membership } from '../store/store.ts';
import type { RecentErrors } from './recent-errors.ts';

export interface ClusterUpkeepOptions {
  readonly membership: Membership;
  /** What giving back blocks needs of the allocator. */
  readonly allocator: Pick<Allocator, 'returnEmptyBlocks'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly errors: RecentErrors;
  readonly node: string;
  readonly version: string;
  readonly intervalMs: number;
  /** How long a block stays empty with this node before it is given back. */
  readonly blockGraceMs: number;
}

interface Chore {
  readonly name: string;
  readonly run: () => Promise<void>;
}

export class ClusterUpkeep {
  readonly #o: ClusterUpkeepOptions;
  readonly #task: PeriodicTask<void>;
  readonly #chores: readonly Chore[];
  #announced = false;
  /** The announcement under way: a run never starts a second one beside it. */
  #announcing: Promise<void> | undefined;

  constructor(options: ClusterUpkeepOptions) {
    this.#o = options;
    this.#chores = [
      { name: 'node announcement', run: () => this.#keepAnnounced() },
      { name: 'giving back empty blocks', run: () => this.#giveBack() },
    ];
    this.#task = new PeriodicTask({ clock: options.clock, intervalMs: options.intervalMs, run: () => this.#run() });
  }

  /** Announces this node now (in the background) and runs the chores every interval until `signal` aborts. */
  start(signal: AbortSignal): void {
    void this.#announce().catch((error: unknown) => this.#o.logger.warn({ err: error }, 'could not announce this node yet; will retry'));
    this.#task.start(signal);
  }

  /** One run of every chore now (after any run under way). */
  run(): Promise<void> {
    return this.#task.runNow();
  }

  async #run(): Promise<void> {
    for (const chore of this.#chores) {
      try {
        await chore.run();
      } catch (error) {
        this.#o.errors.add(`${chore.name} failed: ${messageOf(error)}`);
      }
    }
  }

  #announce(): Promise<void> {
    this.#announcing ??= this.#o.membership
      .announce(this.#o.node, { since: this.#o.clock.now(), version: this.#o.version })
      .then(async () => {
        this.#announced = true;
        // Back in the cluster: if this node was forgotten while it was away, the chore is given up
        // so that a later departure is handled again.
        await this.#o.membership.releaseTask(`forget-node/${this.#o.node}`);
      })
      .finally(() => {
        this.#announcing = undefined;
      });
    return this.#announcing;
  }

  async #keepAnnounced(): Promise<void> {
    if (this.#announcing !== undefined) return; // the first announcement is still under way
    if (!this.#announced) await this.#announce();
    else await this.#o.membership.renew();
  }

  async #giveBack(): Promise<void> {
    const outcome = await this.#o.allocator.returnEmptyBlocks(this.#o.blockGraceMs);
    if (outcome.returned.length > 0) this.#o.logger.info({ blocks: outcome.returned }, 'gave back empty blocks');
    if (outcome.errors.length > 0) throw new Error(outcome.errors.join('; '));
  }
}
