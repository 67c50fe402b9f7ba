/**
 * Membership and one-off chores of a MemoryTier cluster (memory-tier.ts), for unit tests: what
 * coordination.k8s.io Leases give the Kubernetes tier, on an injected Clock.
 *
 * Guarantees (as the Membership contract in src/store/store.ts states them):
 * - an announcement lives `leaseSeconds` on the clock's monotonic time after its last renewal;
 * - another instance's live announcement of a node refuses `announce` (ALREADY_RUNNING); one taken
 *   from under a running instance halts it at its next `renew`;
 * - a chore is held by exactly one node while that node's announcement lives.
 *
 * One `MemoryCluster` is the cluster; each `MemoryMembership` is one agent's view of it (the node it
 * announced, whether it halted), so several agents can share one cluster.
 */
import type { Clock } from '../../../src/core/clock.ts';
import { WarrenError } from '../../../src/core/errors.ts';
import { type Recovery, RecoveryJoin, joined } from '../../../src/store/tiered/recovery.ts';
import type { AcceptReport, AnnounceInfo, Membership, NodeRecord } from '../../../src/store/store.ts';

interface Announcement {
  readonly record: NodeRecord;
  /** Monotonic milliseconds after which the announcement has lapsed. */
  readonly until: number;
}

/** What every agent of one memory cluster shares: the announcements and the chores' holders. */
export class MemoryCluster {
  readonly clock: Clock;
  readonly leaseSeconds: number;
  readonly announcements = new Map<string, Announcement>();
  /** Chore → the node holding it. */
  readonly tasks = new Map<string, string>();
  /** The recovery marker (a memory store never loses its data: only a test sets it). */
  recovery: Recovery | undefined;

  constructor(clock: Clock, leaseSeconds: number) {
    this.clock = clock;
    this.leaseSeconds = leaseSeconds;
  }

  /** The node's announcement if it has not lapsed. */
  live(node: string): Announcement | undefined {
    const a = this.announcements.get(node);
    return a !== undefined && a.until > this.clock.monotonic() ? a : undefined;
  }

  leaseEnd(): number {
    return this.clock.monotonic() + this.leaseSeconds * 1000;
  }
}

export class MemoryMembership implements Membership {
  /** The cluster this agent is a member of. */
  readonly #cluster: MemoryCluster;
  /** Throws (TRY_AGAIN) when the cluster is away: the tier's switch. */
  readonly #reach: () => void;
  /** What this agent announced last, to announce again after a lapse. */
  #announced: { node: string; info: AnnounceInfo } | undefined;
  #halted: string | undefined;
  readonly #recoveryJoin = new RecoveryJoin(
    async () => [],
    async (nodes, reason) => {
      this.#cluster.recovery = joined(this.#cluster.recovery, nodes, reason, this.#cluster.clock.now());
    },
  );

  constructor(cluster: MemoryCluster, reach: () => void) {
    this.#cluster = cluster;
    this.#reach = reach;
  }

  async announce(node: string, info: AnnounceInfo): Promise<void> {
    this.#reach();
    const held = this.#cluster.live(node);
    const theirs = held?.record.instance;
    if (held !== undefined && theirs !== info.instance && (theirs === undefined || theirs !== info.previous))
      throw new WarrenError('ALREADY_RUNNING', `node ${node} is announced by instance ${theirs ?? '(none)'}`);
    const { previous: _previous, ...published } = info;
    this.#cluster.announcements.set(node, { record: { node, ...published }, until: this.#cluster.leaseEnd() });
    this.#announced = { node, info };
  }

  halted(): string | undefined {
    return this.#halted;
  }

  async accept(): Promise<AcceptReport> {
    this.#halted = undefined;
    const a = this.#announced;
    if (a !== undefined) {
      this.#cluster.announcements.delete(a.node);
      await this.announce(a.node, a.info);
      await this.leaveRecovery(a.node); // nothing to claim again here: every accept settles
    }
    return { addresses: 0, blocks: 0, conflicts: [] };
  }

  identity(): string | undefined {
    return this.#announced === undefined ? undefined : 'memory';
  }

  recovery(): Recovery | undefined {
    return this.#cluster.recovery;
  }

  /** A memory store never loses its data: only a range halted on a block another node holds joins a marker. */
  async keepRecovery(taken?: string): Promise<void> {
    this.#reach();
    await this.#recoveryJoin.keep({
      halt: undefined,
      taken,
      node: this.#announced?.node,
      recovery: this.#cluster.recovery,
    });
  }

  async leaveRecovery(node: string): Promise<void> {
    const r = this.#cluster.recovery;
    if (r === undefined) return;
    const pending = r.pending.filter((n) => n !== node);
    this.#cluster.recovery = pending.length === 0 ? undefined : { ...r, pending };
  }

  async liveNodes(): Promise<NodeRecord[]> {
    this.#reach();
    return [...this.#cluster.announcements.keys()]
      .map((node) => this.#cluster.live(node)?.record)
      .filter((r): r is NodeRecord => r !== undefined);
  }

  async alive(node: string): Promise<boolean> {
    return (await this.liveNodes()).some((n) => n.node === node);
  }

  async renew(): Promise<void> {
    this.#reach();
    const a = this.#announced;
    if (a === undefined || this.#halted !== undefined) return;
    const held = this.#cluster.live(a.node);
    if (held === undefined) return this.announce(a.node, a.info);
    if (held.record.instance !== a.info.instance) {
      this.#halted = `node ${a.node}'s announcement was taken over by instance ${held.record.instance ?? '(none)'}`;
      return;
    }
    this.#cluster.announcements.set(a.node, { record: held.record, until: this.#cluster.leaseEnd() });
  }

  async withdraw(): Promise<void> {
    const a = this.#announced;
    if (a === undefined) return;
    if (this.#cluster.announcements.get(a.node)?.record.instance === a.info.instance)
      this.#cluster.announcements.delete(a.node);
  }

  async claimTask(task: string): Promise<boolean> {
    this.#reach();
    const me = this.#announced?.node;
    if (me === undefined || this.#halted !== undefined) return false;
    const holder = this.#cluster.tasks.get(task);
    if (holder !== undefined && holder !== me && this.#cluster.live(holder) !== undefined) return false;
    this.#cluster.tasks.set(task, me);
    return true;
  }

  async releaseTask(task: string): Promise<void> {
    this.#reach();
    if (this.#cluster.tasks.get(task) === this.#announced?.node) this.#cluster.tasks.delete(task);
  }
}
