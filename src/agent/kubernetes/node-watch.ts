/**
 * The one watch of the cluster's Nodes, on a store shared by nodes: only the agent holding the
 * cluster chore `nodes` (claimed through the membership, as the other chores are) lists and watches
 * Nodes, and forgets the nodes that left (nodes.ts); every other agent opens no Node watch at all.
 * Without it, each of N agents listed every Node at start and got every Node's status updates: an
 * N-fold fan-out of every change to any Node, and a herd of N chore requests on each deletion.
 *
 * The chore is asked for every `intervalMs` (the upkeep interval) and once at the start; asking for
 * a chore held is answered from memory (task-leases.ts), so holding it costs no request per ask.
 *
 * Guarantees:
 * - at most one Node watch per agent, open exactly while this agent holds the chore as last asked:
 *   opened (a fresh NodeSource: listing first) when it wins the chore, closed when it loses it or
 *   the agent stops;
 * - a holder that dies leaves the chore with its lease: the next agent to ask takes it and lists
 *   the Nodes, and that first listing finds the deletions no agent watched meanwhile (nodes.ts:
 *   nodes holding allocations or blocks in the store but not listed);
 * - a failed ask (the store away) is logged and changes nothing: the watch stays as it was until an
 *   ask answers; a forgetting loop that fails is logged and opened again at the next ask, rather
 *   than stopping the agent that happens to hold the chore.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import type { NodeSource, NodeSourceStatus } from '../../sources/kubernetes/node-source.ts';
import type { Membership } from '../../store/store.ts';
import type { KubernetesNodes } from './nodes.ts';

/** The chore whose holder watches the Nodes and forgets the ones that left. */
export const NODES_TASK = 'nodes';

export interface NodeWatchOptions {
  readonly membership: Pick<Membership, 'claimTask'>;
  /** A fresh source (a NodeSource is iterated once): one per time the chore is won. */
  readonly openSource: () => NodeSource;
  readonly forget: Pick<KubernetesNodes, 'run'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How often the chore is asked for. */
  readonly intervalMs: number;
}

export interface NodeWatchStatus extends NodeSourceStatus {
  /** Whether this agent holds the chore `nodes`, and so is the one agent watching the Nodes. */
  readonly watcher: boolean;
}

/** The watch while it is open: the source, its stop, and the forgetting loop over it (never rejects). */
interface OpenWatch {
  readonly source: NodeSource;
  readonly abort: AbortController;
  loop: Promise<void>;
  /** The loop ended before it was closed (it failed): the next ask opens the watch again. */
  ended: boolean;
}

export class NodeWatch {
  readonly #o: NodeWatchOptions;
  readonly #task: PeriodicTask<void>;
  #open: OpenWatch | undefined;
  /** The last source's state once closed, so the status still says what it saw. */
  #closed: NodeSourceStatus | undefined;
  readonly #started: string;
  /** Set once `run` ended: no ask opens a watch after it. */
  #stopped = false;

  constructor(options: NodeWatchOptions) {
    this.#o = options;
    this.#started = new Date(options.clock.now()).toISOString();
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: options.intervalMs,
      runAtStart: true,
      run: () => this.#keep(),
      onError: (error) =>
        options.logger.warn({ err: messageOf(error) }, 'could not ask for the chore of watching Nodes; will retry'),
    });
  }

  /** Asks for the chore until `signal` aborts; settles once the watch, if open, is closed. */
  async run(signal: AbortSignal): Promise<void> {
    await this.#task.runUntil(signal);
    this.#stopped = true;
    await this.#close();
  }

  /** One ask for the chore now, the watch opened or closed after it (tests, and after the run under way). */
  check(): Promise<void> {
    return this.#task.runNow();
  }

  status(): NodeWatchStatus {
    const source = this.#open?.source.status() ??
      this.#closed ?? { state: 'stopped', since: this.#started, relists: 0, reconnects: 0, nodes: 0 };
    return { ...source, watcher: this.#open !== undefined };
  }

  async #keep(): Promise<void> {
    if (this.#stopped) return;
    const held = await this.#o.membership.claimTask(NODES_TASK);
    if (this.#stopped) return;
    if (held && this.#open?.ended === true) await this.#close();
    if (held && this.#open === undefined) {
      const abort = new AbortController();
      const source = this.#o.openSource();
      this.#o.logger.info({ source: 'kubernetes' }, 'holds the chore of watching Nodes: watching them');
      const open: OpenWatch = { source, abort, loop: Promise.resolve(), ended: false };
      open.loop = this.#o.forget.run(source.events(abort.signal), abort.signal).then(
        () => {
          open.ended = true;
        },
        (error: unknown) => {
          open.ended = true;
          this.#o.logger.warn({ err: messageOf(error) }, 'the watch of Nodes failed; opened again at the next ask');
        },
      );
      this.#open = open;
    } else if (!held && this.#open !== undefined) {
      this.#o.logger.info({ source: 'kubernetes' }, 'no longer holds the chore of watching Nodes: watch closed');
      await this.#close();
    }
  }

  async #close(): Promise<void> {
    const open = this.#open;
    if (open === undefined) return;
    this.#open = undefined;
    open.abort.abort();
    await open.loop;
    this.#closed = open.source.status();
  }
}
