/**
 * Cluster chores on the Kubernetes API: one coordination.k8s.io/v1 Lease per chore, `taskLeaseName(task)`,
 * labelled `warren.dev/lease=task`, whose holder is a node (LeaseMembership.claimTask decides who may ask).
 *
 * - A chore is held for as long as its own Lease's time runs (a lease from when it was taken) or its
 *   holder's node announcement (lease-membership.ts) lives, whichever is later: the chore's Lease is
 *   never renewed itself; its holder renews its announcement while it holds chores (`holding`), so a
 *   node that takes a chore after a long idle spell holds it at once, before its next renewal.
 * - It is taken over by an RV-guarded PUT once both lapsed (or the holder's announcement is gone), so
 *   of two nodes asking at once exactly one wins; a chore released meanwhile is claimed again. A
 *   lapse is proof enough here, unlike for a node's blocks (lease-ping.ts): a holder renews for as
 *   long as it asks for its chores, so a lapsed one stopped asking, is dead, or is cut off from the
 *   API server, and a chore run twice by a cut-off holder and its successor is what an election
 *   through the API server allows anyway (the chores are idempotent).
 * - Releasing deletes the Lease, refused while the store is halted (its data may be lost).
 * - A chore is read before it is created or taken over, so a node refused it writes nothing.
 * - Nothing is asked when nothing can have changed: a chore this node holds is answered from memory
 *   (`forget` when its announcement was made anew; `forgetLapsed` drops the chores a lapse of it may
 *   have lost), and one another node holds is not asked about again before it can have lapsed, as
 *   last read. A chore held in memory but not asked about for a whole lease is read again (one GET):
 *   the only chore another node deletes, `forget-node/<n>` given up by node n coming back, is asked
 *   again only after it lapsed, more than a lease after its holder last asked.
 *
 * Expiry compares renewTimes with this node's wall clock, as lease-membership.ts does.
 */
import type { Clock } from '../../core/clock.ts';
import type { KubeContinuity } from './continuity.ts';
import { LEASE_LABEL, NODE_LABEL, labelValue, nodeLeaseName, taskLeaseName } from './names.ts';
import { type LeaseView, leaseOf, microTime } from './lease-objects.ts';
import type { KubeObject } from './objects.ts';
import type { Resource } from './resources.ts';

const TASK_ANNOTATION = 'warren.dev/task';

export interface TaskLeasesOptions {
  readonly leases: Resource;
  readonly leaseSeconds: number;
  readonly clock: Clock;
  /** What the tier has seen of the API server: a release is refused while it is halted. */
  readonly continuity: KubeContinuity;
}

export class TaskLeases {
  readonly #o: TaskLeasesOptions;
  /** Chores this node holds: when each one's own Lease lapses as last read, and when it last asked (epoch ms). */
  readonly #held = new Map<string, { readonly lapses: number; asked: number }>();
  /** Chores another node holds, with when that node's announcement, as read, lapses. */
  readonly #refused = new Map<string, number>();
  /** Leases read renewed in the future (their holders' clocks ahead): the time as written, and when first read. */
  readonly #ahead = new Map<string, { readonly expires: number; readonly at: number }>();

  constructor(options: TaskLeasesOptions) {
    this.#o = options;
  }

  /** Whether `node` holds `task` now, taking it if it is free or its holder's announcement is gone. */
  async claim(task: string, node: string): Promise<boolean> {
    const now = this.#o.clock.now();
    const held = this.#held.get(task);
    if (held !== undefined && now - held.asked < this.#o.leaseSeconds * 1000) {
      held.asked = now;
      return true;
    }
    if ((this.#refused.get(task) ?? 0) > now) return false;
    this.#held.delete(task);
    this.#refused.delete(task);
    const lapses = await this.#ask(task, node);
    if (lapses !== undefined) this.#held.set(task, { lapses, asked: now });
    return lapses !== undefined;
  }

  /** Whether this node holds a chore it asked for within the last lease: its announcement must live. */
  holding(): boolean {
    const now = this.#o.clock.now();
    for (const held of this.#held.values()) if (now - held.asked < this.#o.leaseSeconds * 1000) return true;
    return false;
  }

  /** Forgets what this node knew of the chores: its announcement was made anew. */
  forget(): void {
    this.#held.clear();
    this.#refused.clear();
  }

  /**
   * Forgets the chores that lapsed with this node's announcement, which lapsed at `expired`: each
   * whose own Lease ran out too (a lease after it was taken) may have been taken over meanwhile.
   */
  forgetLapsed(expired: number): void {
    const now = this.#o.clock.now();
    for (const [task, held] of this.#held) if (Math.max(expired, held.lapses) <= now) this.#held.delete(task);
  }

  async release(task: string): Promise<void> {
    this.#o.continuity.refuseWhileHalted();
    this.#held.delete(task);
    this.#refused.delete(task);
    await this.#o.leases.remove('release a task', taskLeaseName(task));
  }

  /** When the chore's own Lease lapses once `node` holds it; undefined when another node holds it. */
  async #ask(task: string, node: string): Promise<number | undefined> {
    const leases = this.#o.leases;
    for (let round = 1; round <= 2; round++) {
      // Read first: a node refused a chore writes nothing (issue 36), not a create refused with 409.
      const lease = leaseOf(await leases.get('read a task', taskLeaseName(task)));
      if (lease === undefined) {
        const created = await leases.create('claim a task', this.#body(task, node));
        if (created.kind === 'created') return this.#lapsesOwn(created.object);
        continue; // created by another meanwhile: read it
      }
      if (lease.holder === node) return lease.expires;
      const lapses = await this.#lapses(lease);
      if (lapses > this.#o.clock.now()) {
        this.#refused.set(task, lapses);
        return undefined;
      }
      const taken = await leases.replace('take over a task', this.#body(task, node, lease));
      return taken.kind === 'replaced' ? this.#lapsesOwn(taken.object) : undefined;
    }
    return undefined;
  }

  /** When a chore's Lease as written lapses by its own time. */
  #lapsesOwn(object: unknown): number {
    return leaseOf(object)?.expires ?? this.#o.clock.now() + this.#o.leaseSeconds * 1000;
  }

  /** When the chore `lease` lapses: its own time, or later its holder's announcement as it reads now. */
  async #lapses(lease: LeaseView): Promise<number> {
    if (lease.holder === undefined) return 0;
    const own = this.#observed(lease.name, lease.expires);
    // Taken within a lease: held. Unless its holder's clock runs ahead: its announcement is first read now, too.
    if (own > this.#o.clock.now() && !this.#ahead.has(lease.name)) return own;
    const name = nodeLeaseName(lease.holder);
    const announcement = leaseOf(await this.#o.leases.get('read a node announcement', name));
    return Math.max(own, announcement?.holder === undefined ? 0 : this.#observed(name, announcement.expires));
  }

  /**
   * When a Lease whose time as written runs out at `expires` lapses, judged on this node's clock: a
   * renewal written in the future (its holder's clock ahead of this node's) counts from when this
   * node first read it, as Kubernetes' own leader election counts from when it observed a renewal.
   * Without it a holder an hour ahead kept its chores an hour after it died (found by the soak,
   * kubernetes seed 3817: the Node watch's holder lost, and no node forgotten for 80 s and more).
   */
  #observed(lease: string, expires: number): number {
    const now = this.#o.clock.now();
    const leaseMs = this.#o.leaseSeconds * 1000;
    if (expires <= now + leaseMs) {
      this.#ahead.delete(lease);
      return expires;
    }
    const seen = this.#ahead.get(lease);
    if (seen?.expires === expires) return seen.at + leaseMs;
    this.#ahead.set(lease, { expires, at: now });
    return now + leaseMs;
  }

  #body(task: string, node: string, lease?: LeaseView): KubeObject {
    const now = microTime(this.#o.clock.now());
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: taskLeaseName(task),
        labels: { [LEASE_LABEL]: 'task', [NODE_LABEL]: labelValue(node) },
        annotations: { [TASK_ANNOTATION]: task },
        ...(lease === undefined ? {} : { resourceVersion: lease.version }),
      },
      spec: {
        holderIdentity: node,
        leaseDurationSeconds: this.#o.leaseSeconds,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: lease === undefined ? 0 : lease.transitions + 1,
      },
    };
  }
}
