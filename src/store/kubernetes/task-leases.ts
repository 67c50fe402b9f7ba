/**
 * Cluster chores on the Kubernetes API: one coordination.k8s.io/v1 Lease per chore, `taskLeaseName(task)`,
 * labelled `warren.dev/lease=task`, whose holder is a node (LeaseMembership.claimTask decides who may ask).
 *
 * - A chore is held for as long as its holder's node announcement (lease-membership.ts) lives: the chore's
 *   Lease is never renewed itself.
 * - It is taken over by an RV-guarded PUT once the holder's announcement is gone or expired, so of two nodes
 *   asking at once exactly one wins; a chore released meanwhile is claimed again.
 * - Releasing deletes the Lease, refused while the store is halted (its data may be lost).
 * - Nothing is asked when nothing can have changed: a chore this node holds is answered from memory (it
 *   holds it while its announcement lives; `forget` when that was made anew), and one another node holds
 *   is not asked about again before that node's announcement, as last read, can have lapsed. A chore held
 *   in memory but not asked about for a whole lease is read again (one GET): the only chore another node
 *   deletes, `forget-node/<n>` given up by node n coming back, is asked again only after n's new
 *   announcement lapsed, more than a lease after its holder last asked.
 *
 * Expiry compares the announcement's renewTime with this node's wall clock, as lease-membership.ts does.
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
  /** Chores this node holds, with when it last asked for each (ms since the epoch). */
  readonly #held = new Map<string, number>();
  /** Chores another node holds, with when that node's announcement, as read, lapses. */
  readonly #refused = new Map<string, number>();

  constructor(options: TaskLeasesOptions) {
    this.#o = options;
  }

  /** Whether `node` holds `task` now, taking it if it is free or its holder's announcement is gone. */
  async claim(task: string, node: string): Promise<boolean> {
    const now = this.#o.clock.now();
    const asked = this.#held.get(task);
    if (asked !== undefined && now - asked < this.#o.leaseSeconds * 1000) {
      this.#held.set(task, now);
      return true;
    }
    if ((this.#refused.get(task) ?? 0) > now) return false;
    this.#held.delete(task);
    this.#refused.delete(task);
    const held = await this.#ask(task, node);
    if (held) this.#held.set(task, now);
    return held;
  }

  /** Forgets what this node knew of the chores: its announcement was made anew. */
  forget(): void {
    this.#held.clear();
    this.#refused.clear();
  }

  async release(task: string): Promise<void> {
    this.#o.continuity.refuseWhileHalted();
    this.#held.delete(task);
    this.#refused.delete(task);
    await this.#o.leases.remove('release a task', taskLeaseName(task));
  }

  async #ask(task: string, node: string): Promise<boolean> {
    const leases = this.#o.leases;
    for (let round = 1; round <= 2; round++) {
      const created = await leases.create('claim a task', this.#body(task, node));
      if (created.kind === 'created') return true;
      const lease = leaseOf(await leases.get('read a task', taskLeaseName(task)));
      if (lease === undefined) continue; // released since: claim it again
      if (lease.holder === node) return true;
      const lapses = lease.holder === undefined ? 0 : await this.#lapses(lease.holder);
      if (lapses > this.#o.clock.now()) {
        this.#refused.set(task, lapses);
        return false;
      }
      const taken = await leases.replace('take over a task', this.#body(task, node, lease));
      return taken.kind === 'replaced';
    }
    return false;
  }

  /** When `node`'s announcement lapses as it reads now (0: it is gone). */
  async #lapses(node: string): Promise<number> {
    const lease = leaseOf(await this.#o.leases.get('read a node announcement', nodeLeaseName(node)));
    return lease?.expires ?? 0;
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
