/**
 * The chores of a node on a store shared by nodes, on their own interval (apart from the release
 * pipeline and its reconcile pass, whose timing they must not share a fate with):
 * - node announcement: tried once before serving (`announceFirst`), so that a second agent with
 *   this node's name is refused before it serves (ALREADY_RUNNING); when etcd cannot take it then
 *   (an etcd without a leader answers lease calls late) it is made on a later run; renewed on every
 *   run after (the membership decides when a renewal writes: the Kubernetes store's every third of
 *   its lease, and only while the node holds a cluster chore, so an idle node writes nothing; its
 *   liveness is asked by a ping when it matters, kubernetes/lease-ping.ts), which also checks the
 *   store is still the one announced to and the announcement still this instance's;
 * - giving back empty blocks this node has held empty for longer than the block grace;
 * - lending addresses between nodes on the two-tier store (allocator/lending/): answering other
 *   nodes' requests (also as they come where the store tells of them, prompt-lending.ts),
 *   releasing placeholders whose grant has been gone for the block grace, giving back loans idle
 *   for the block grace, adopting addresses a migration recorded for this node, and writing back
 *   a grant someone else removed while its loan is in use here (told by name);
 * - keeping holdings (allocator/holdings/): placeholders whose record has been gone for the block
 *   grace released, this node's uses of held addresses reported into their records.
 * One run at a time; a chore that fails is reported (recent errors, log) and the others still run.
 *
 * `problem()` says why this node must not allocate: not announced yet (another agent may hold its
 * name), halted (the store lost its data, or the announcement was taken over), or the cluster in
 * recovery after its store lost its data (the marker of store/tiered/recovery.ts stands; until it was
 * read once, this node does not know, and does not allocate either); each is logged once, as an
 * error, when it is first seen. The marker is asked for on every run, after the announcement (a node
 * halted on a lost store adds itself to it then), and once before the agent serves; the membership
 * decides when that reads the store (the Kubernetes store's: when the announcement was written, and
 * while halted or while a marker stands). While this
 * node is halted or the cluster recovers, no other chore runs: nothing is claimed, given back or lent.
 *
 * `startUpkeep` is the upkeep as the agent's options configure it, started as the agent starts it.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask, type PeriodicTaskStatus } from '../../core/periodic-task.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import { WarrenError, isWarrenError } from '../../core/errors.ts';
import { recoveryProblem } from '../../store/tiered/recovery.ts';
import type { AcceptReport, AnnounceInfo, Membership } from '../../store/store.ts';
import type { RecentErrors } from '../metrics/recent-errors.ts';
import type { AgentOptions } from '../settings/options.ts';
import type { ClusterRecord } from './record.ts';

export interface ClusterUpkeepOptions {
  readonly membership: Membership;
  /** What giving back blocks needs of the allocator, and lending (absent: no lending chore). */
  readonly allocator: Pick<Allocator, 'returnEmptyBlocks'> &
    Partial<Pick<Allocator, 'lend' | 'lendPromptly' | 'holdings'>>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly errors: RecentErrors;
  readonly node: string;
  readonly version: string;
  /** This start of the agent as the announcement records it (instance id, host, pid, boot id, previous instance). */
  readonly instance?: Omit<AnnounceInfo, 'since' | 'version'>;
  /** Told each time an announcement succeeds (the agent records the store's identity then). */
  readonly onAnnounced?: () => void;
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
  /** While `accept` writes back what this node knew: no ADD may take an address meanwhile. */
  #accepting = false;
  /** The halt (or recovery) already logged, so it is logged once. */
  #loggedHalt: string | undefined;
  /** Whether the recovery marker was read once: before, this node cannot know the cluster may allocate. */
  #recoveryRead = false;

  constructor(options: ClusterUpkeepOptions) {
    this.#o = options;
    this.#chores = [
      { name: 'node announcement', run: () => this.#keepAnnounced() },
      { name: 'giving back empty blocks', run: () => this.#giveBack() },
      { name: 'lending addresses', run: () => this.#lend() },
      { name: 'keeping holdings', run: () => this.#keepHoldings() },
    ];
    this.#task = new PeriodicTask({ clock: options.clock, intervalMs: options.intervalMs, run: () => this.#run() });
  }

  /**
   * Announces this node once, before the agent serves. Throws ALREADY_RUNNING when another agent
   * instance holds this node's announcement; any other failure is logged and left to the runs.
   */
  async announceFirst(): Promise<void> {
    try {
      await this.#announce();
    } catch (error) {
      if (isWarrenError(error) && error.code === 'ALREADY_RUNNING') throw error;
      this.#o.logger.warn({ err: error }, 'could not announce this node yet; will retry (ADDs answer 11 until then)');
    }
    await this.#keepRecovery().catch((error: unknown) =>
      this.#o.logger.warn(
        { err: error },
        'could not read the recovery marker yet; will retry (ADDs answer 11 until then)',
      ),
    );
  }

  /**
   * Runs the chores every interval until `signal` aborts (announcing first if announceFirst could
   * not), and lends on the requests as they change meanwhile where the store tells of them.
   */
  start(signal: AbortSignal): void {
    this.#task.start(signal);
    this.#o.allocator.lendPromptly?.(signal, (lent, errors) => {
      if (lent.length > 0) this.#o.logger.info({ lent }, 'lent addresses between nodes');
      for (const error of errors) this.#o.errors.add(`lending addresses failed: ${error}`);
    });
  }

  /** The chores' runs: one per interval, each reading what the watches keep (no request unless something changed). */
  status(): PeriodicTaskStatus {
    return this.#task.status();
  }

  /** Why this node must not allocate now; undefined when it may. */
  problem(): string | undefined {
    if (this.#accepting)
      return 'an operator is accepting the cluster store (warren store accept): writing back what this node knew first';
    const halted = this.#o.membership.halted();
    const recovery = this.#o.membership.recovery();
    const stop = halted ?? (recovery === undefined ? undefined : recoveryProblem(recovery));
    if (stop !== undefined) {
      if (this.#loggedHalt !== stop) {
        this.#loggedHalt = stop;
        this.#o.logger.error({ node: this.#o.node }, `allocation stopped: ${stop}`);
      }
      return stop;
    }
    if (!this.#recoveryRead)
      return (
        `the cluster store's recovery marker has not been read yet (another node may have found the store lost ` +
        `its data); retrying every ${this.#o.intervalMs / 1000} s`
      );
    if (!this.#announced)
      return (
        `node ${this.#o.node} is not announced in the cluster store yet (until it is, another agent might ` +
        `hold this node name); retrying every ${this.#o.intervalMs / 1000} s`
      );
    return undefined;
  }

  /**
   * The operator's word after a halt (`warren store accept`): the store as it is now is the one to
   * use. No ADD is served while what this node knew is written back.
   */
  async accept(): Promise<AcceptReport> {
    if (this.#accepting) throw new WarrenError('BAD_REQUEST', 'the store is being accepted already');
    this.#accepting = true;
    try {
      const report = await this.#o.membership.accept();
      if (!this.#announced) await this.#announce();
      else this.#o.onAnnounced?.();
      this.#loggedHalt = undefined;
      this.#o.logger.warn(
        { node: this.#o.node, ...report },
        'the operator accepted the cluster store as it is now; wrote back what this node knew; allocating again',
      );
      return report;
    } finally {
      this.#accepting = false;
    }
  }

  /** One run of every chore now (after any run under way). */
  run(): Promise<void> {
    return this.#task.runNow();
  }

  async #run(): Promise<void> {
    for (const chore of this.#chores) {
      // Nothing is written to a store this node stopped trusting, nor while the cluster recovers; the
      // announcement chore still looks.
      const stopped = this.#o.membership.halted() !== undefined || this.#o.membership.recovery() !== undefined;
      if (chore.name !== 'node announcement' && stopped) continue;
      try {
        await chore.run();
      } catch (error) {
        this.#o.errors.add(`${chore.name} failed: ${messageOf(error)}`);
      }
    }
  }

  #announce(): Promise<void> {
    this.#announcing ??= this.#o.membership
      .announce(this.#o.node, { since: this.#o.clock.now(), version: this.#o.version, ...this.#o.instance })
      .then(async () => {
        this.#announced = true;
        this.#o.onAnnounced?.();
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
    let failure: unknown;
    try {
      if (!this.#announced) await this.#announce();
      else await this.#o.membership.renew();
    } catch (error) {
      failure = error; // the marker is still read: a halted node adds itself to it
    }
    await this.#keepRecovery();
    this.problem(); // logs a halt the renewal found
    if (failure !== undefined) throw failure;
  }

  async #keepRecovery(): Promise<void> {
    await this.#o.membership.keepRecovery();
    this.#recoveryRead = true;
  }

  async #giveBack(): Promise<void> {
    const outcome = await this.#o.allocator.returnEmptyBlocks(this.#o.blockGraceMs);
    if (outcome.returned.length > 0) this.#o.logger.info({ blocks: outcome.returned }, 'gave back empty blocks');
    if (outcome.errors.length > 0) throw new Error(outcome.errors.join('; '));
  }

  async #lend(): Promise<void> {
    const grace = this.#o.blockGraceMs;
    const report = await this.#o.allocator.lend?.({ returnGraceMs: grace, orphanGraceMs: grace });
    if (report === undefined) return;
    const { lent, released, returned, adopted, handed = [] } = report;
    if (lent.length + released.length + returned.length + adopted > 0)
      this.#o.logger.info({ lent, released, returned, adopted }, 'lent addresses between nodes');
    if (handed.length > 0) this.#o.logger.info({ handed }, 'handed blocks over to the nodes using them');
    // A grant someone else removed while its loan is in use here: said by name in the log and the
    // status (recent errors), never left to the lender to hand the address out a second time.
    for (const line of report.restored ?? []) {
      this.#o.logger.warn({ node: this.#o.node }, line);
      this.#o.errors.add(line);
    }
    if (report.errors.length > 0) throw new Error(report.errors.join('; '));
  }

  async #keepHoldings(): Promise<void> {
    const report = await this.#o.allocator.holdings?.run(this.#o.blockGraceMs);
    if (report === undefined) return;
    const { held, released, reported } = report;
    if (held.length + released.length > 0) this.#o.logger.info({ held, released, reported }, 'kept holdings');
    if (report.errors.length > 0) throw new Error(report.errors.join('; '));
  }
}

/** What the upkeep the options configure is composed over. */
export interface UpkeepDeps
  extends Pick<ClusterUpkeepOptions, 'membership' | 'allocator' | 'clock' | 'logger' | 'errors' | 'version'> {
  /** Which start of this agent last announced the node, and the store's identity then. */
  readonly record: ClusterRecord | undefined;
}

/**
 * The upkeep the options configure, announced once before the agent serves — throws
 * ALREADY_RUNNING when another agent holds this node's name — and then run until `signal` aborts.
 */
export async function startUpkeep(
  o: Pick<AgentOptions, 'nodeName' | 'upkeepIntervalSeconds' | 'blockGraceSeconds'>,
  deps: UpkeepDeps,
  signal: AbortSignal,
): Promise<ClusterUpkeep> {
  const { record, membership, ...parts } = deps;
  const upkeep = new ClusterUpkeep({
    ...parts,
    membership,
    node: o.nodeName,
    ...(record === undefined
      ? {}
      : { instance: record.instance, onAnnounced: () => record.recordIdentity(membership.identity()) }),
    intervalMs: o.upkeepIntervalSeconds * 1000,
    blockGraceMs: o.blockGraceSeconds * 1000,
  });
  record?.recordInstance();
  await upkeep.announceFirst();
  upkeep.start(signal);
  return upkeep;
}
