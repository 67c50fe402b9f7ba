/**
 * Agents' membership of the cluster on the Kubernetes API: coordination.k8s.io/v1 Leases in the agent's
 * namespace (the contract of Membership in store.ts, as etcd-tier/membership.ts keeps it on etcd).
 *
 * - A node's announcement is the Lease `nodeLeaseName(node)`, labelled `warren.dev/lease=node`, held
 *   by the agent instance (a fresh id per start), its NodeRecord in the annotation `warren.dev/record`.
 *   It is written at announce, then only while this node holds a chore (task-leases.ts `holding`):
 *   `renew`, asked every upkeep run, writes a renewTime (guarded by the resourceVersion last written)
 *   once a third of the lease passed, so the few chore holders write once per 100 s at the default
 *   lease (300 s) and a node holding none writes nothing while idle (issue 36: O(chores), not
 *   O(nodes)). A lapsed Lease therefore proves nothing: liveness is asked (lease-ping.ts) — `alive`
 *   pings a lapsed holder, which counts as gone only when it does not answer; `liveNodes` lists the
 *   nodes announced and not found gone. What frees a node's things asks; what only spares them reads.
 * - One agent per node name (lease-takeover.ts `Takeover`): another instance's Lease refuses
 *   `announce` (ALREADY_RUNNING) while it runs or when its holder answers a ping; this instance's own,
 *   its previous start's on this boot, a vacated one, one whose holder did not answer, or its previous
 *   start's on another boot that Kubernetes' Node says is over (bootID) is taken over by an RV-guarded
 *   PUT (of two takers one wins); that previous start's is otherwise waited out while it runs.
 * - Once announced, this node's Lease and the store's state object are watched (announcement-watch.ts:
 *   listed once, then watched, no periodic request). There this agent answers pings (each once, at
 *   most one answer per 5 s), and sees its Lease held by another instance or vacated, which halts it
 *   (sticky until `accept`) instead of fighting over it; a chore holder's renewal sees the same.
 * - The API server's data loss is noticed (continuity.ts): this instance's Lease gone at any time,
 *   lapsed or not (nobody but this agent removes it: on the watch, a relisting's deletions included,
 *   or at a renewal), or back at an older resourceVersion (on the watch; at a renewal) halts it as a
 *   store that lost its data; so do the identity object gone or replaced, and any answer gone
 *   backwards (cluster-state.ts, resources.ts). The identity object, with the recovery marker
 *   (recovery.ts), is read by `keepRecovery` only while its watch is not live (after the announcement
 *   was written, or to see a marker lifted), while halted, and to join a marker (recovery.ts).
 * - A chore (`claimTask`) is claimed only by a node announced and holding its Lease, on a store not
 *   halted (task-leases.ts, told when this announcement was made anew or lapsed).
 *
 * Liveness is Warren's own Lease, asked, not the kubelet's (kube-node-lease/<node>) nor the Node's
 * conditions: what depends on it is whether Warren's agent — not the kubelet — holds the node name,
 * its chores and its blocks, and which instance and boot holds it. The Node is consulted where it
 * decides: a node's blocks are freed only once Kubernetes has no Node of it *and* its agent does not
 * answer (agent/kubernetes/nodes.ts). Expiry compares the writer's renewTime with this node's clock
 * (the nodes' clocks agree within a fraction of the lease, as Kubernetes' own node leases need); a
 * ping's deadline is on the asker's clock alone.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, isWarrenError } from '../../core/errors.ts';
import { type Recovery, RecoveryJoin, settled } from '../tiered/recovery.ts';
import type { AcceptReport, AliveQuestion, AnnounceInfo, Membership, NodeRecord } from '../store.ts';
import type { KubeClusterState } from './cluster-state.ts';
import { watchAnnouncement } from './announcement-watch.ts';
import { API_LOST_RECOVERY, type KubeContinuity, revisionOf } from './continuity.ts';
import { nodeLeaseName } from './names.ts';
import { type LeaseView, type Predecessor, announcementObject, leaseOf, recordOf } from './lease-objects.ts';
import { DEFAULT_PING_SECONDS, PingAnswers, announcedNodes, nodeAlive } from './lease-ping.ts';
import { Takeover, takenOverMessage } from './lease-takeover.ts';
import type { KubeObject } from './objects.ts';
import type { Resource } from './resources.ts';
import { TaskLeases } from './task-leases.ts';
import type { KubeTierWatches } from './tier-watches.ts';

/** Rounds of create-or-take-over against a Lease that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 5;
/** The part of the lease after which `renew` writes: two renewals may fail before it lapses. */
const RENEW_FRACTION = 1 / 3;

export interface LeaseMembershipOptions {
  readonly leases: Resource;
  /** Kubernetes' Nodes (core/v1): the boot a node's kubelet reports, read at announce only. */
  readonly nodes?: Resource | undefined;
  /** Where this node's Lease and the state object are watched from once announced. */
  readonly watches?: KubeTierWatches | undefined;
  readonly leaseSeconds: number;
  /** How long another node's agent has to answer a ping before it counts as gone (default 30 s). */
  readonly pingSeconds?: number | undefined;
  readonly clock: Clock;
  /** What the tier has seen of the API server; halted here. */
  readonly continuity: KubeContinuity;
  /** The store's identity object and recovery marker. */
  readonly state: KubeClusterState;
  /** The nodes the store names as holding blocks: put on a recovery marker this node writes. */
  readonly holders: () => Promise<string[]>;
  /** Writes back what this node holds after the store lost its data: its claims (KubeTier.onAccept). */
  readonly republish: (node: string) => Promise<AcceptReport>;
  readonly notice?: ((message: string) => void) | undefined;
}

interface Announced {
  readonly node: string;
  readonly record: NodeRecord;
  readonly instance: string;
  readonly previous?: string;
}

export class LeaseMembership implements Membership {
  readonly #o: LeaseMembershipOptions;
  #announced: Announced | undefined;
  readonly #recoveryJoin = new RecoveryJoin(
    () => this.#o.holders(),
    (n, why) => this.#o.state.join(n, why),
  );
  /** This instance's Lease as last written: what the next renewal is guarded by. */
  #held: LeaseView | undefined;
  readonly #tasks: TaskLeases;
  /** Whether the identity object is to be read at the next `keepRecovery` (the announcement was written since). */
  #stateDue = true;
  /** Stops the watches of this node's Lease and the state object, once announced. */
  #unwatch: (() => void) | undefined;
  readonly #answers: PingAnswers; // answers the pings its watch sees on this node's Lease
  readonly #pingMs: number;

  constructor(options: LeaseMembershipOptions) {
    this.#o = options;
    this.#tasks = new TaskLeases(options);
    this.#pingMs = (options.pingSeconds ?? DEFAULT_PING_SECONDS) * 1000;
    this.#answers = new PingAnswers(options.clock, this.#pingMs, (id) => this.#answer(id));
  }

  async announce(node: string, info: AnnounceInfo): Promise<void> {
    const { previous, ...published } = info;
    const instance = info.instance ?? randomUUID();
    // The same instance again, not holding it: its start's failed (API away) and it may serve: late (Takeover).
    const late = this.#announced?.node === node && this.#announced.instance === instance && !this.#held;
    this.#announced = { node, instance, record: { node, ...published, instance }, ...defined({ previous }) };
    await this.#claim(late);
  }

  halted(): string | undefined {
    return this.#o.continuity.halted()?.message;
  }

  identity(): string | undefined {
    return this.#o.continuity.identity;
  }

  recovery(): Recovery | undefined {
    return this.#o.state.recovery();
  }

  async keepRecovery(taken?: string): Promise<void> {
    const halted = this.#o.continuity.halted() !== undefined;
    const following = this.#o.state.following(); // the watch tells of a marker and of the identity
    const seen = this.#o.state.recovery();
    // A range halted on a block another node holds joins a recovery under way (recovery.ts `RecoveryJoin`).
    const joins = taken !== undefined && seen?.pending.includes(this.#announced?.node ?? '') === false;
    if ((!this.#stateDue || following) && !halted && (seen === undefined || following) && !joins) return;
    await this.#o.state.verify();
    this.#stateDue = false;
    // The marker read again: the verify may have read it.
    const [halt, node, recovery] = [this.#o.continuity.halted(), this.#announced?.node, this.#o.state.recovery()];
    await this.#recoveryJoin.keep({ halt, taken, node, recovery });
  }

  leaveRecovery(node: string): Promise<void> {
    return this.#o.state.leave(node);
  }

  async accept(): Promise<AcceptReport> {
    const a = this.#announced;
    if (a === undefined)
      throw new WarrenError('TRY_AGAIN', 'this agent has not announced a node yet: there is nothing to accept');
    const halt = this.#o.continuity.halted(); // claims lost: the store lost its data, or the marker waits for it
    const lost = halt?.kind === 'store-lost' || this.#o.state.recovery()?.pending.includes(a.node);
    // On the marker first, should no look have written it yet (recovery.ts `RecoveryJoin` says why).
    if (halt?.kind === 'store-lost') await this.#recoveryJoin.keep({ halt, node: a.node, recovery: this.recovery() });
    this.#o.continuity.accept();
    this.#held = undefined;
    await this.#claim();
    const report = lost ? await this.#o.republish(a.node) : { addresses: 0, blocks: 0, conflicts: [] };
    // Its blocks claimed again, it no longer holds the cluster in recovery (tiered/recovery.ts `settled`).
    if (settled(report)) await this.#o.state.leave(a.node);
    return report;
  }

  #body(a: Announced, lease: Predecessor | undefined, acquire: boolean, id?: string): KubeObject {
    const at = { now: this.#o.clock.now(), leaseSeconds: this.#o.leaseSeconds };
    return announcementObject({ node: a.node, instance: a.instance, record: a.record }, at, lease, acquire, id);
  }

  /** Keeps the Lease as written; `anew` when it was not this instance's unexpired Lease before. */
  #adopt(object: unknown, anew: boolean): void {
    const lease = leaseOf(object);
    if (lease !== undefined) this.#held = lease;
    this.#stateDue = true;
    if (anew) this.#tasks.forget(); // chores are held by a live announcement: another may have taken them
    this.#follow();
  }

  /** Watches this node's Lease and the state object from the first announcement on (idempotent). */
  #follow(): void {
    const [a, watches] = [this.#announced, this.#o.watches];
    if (a === undefined || watches === undefined || this.#unwatch !== undefined) return;
    this.#unwatch = watchAnnouncement({ ...this.#o, watches }, a.node, a.instance, {
      held: () => (this.#announced !== a || this.#o.continuity.halted() !== undefined ? undefined : this.#held),
      lost: (name, how) => this.#lost(name, how),
      takenOver: (name, lease) => this.#takenOver(a, name, lease),
      own: (lease) => {
        this.#held = lease;
        this.#answers.seen(lease);
      },
    });
  }

  /** Answers ping `id` on this node's Lease: its renewal, with the pong. True once written. */
  async #answer(id: string): Promise<boolean> {
    const [a, held] = [this.#announced, this.#held];
    if (a === undefined || held === undefined || this.#o.continuity.halted() !== undefined) return false;
    const body = this.#body(a, held, false, id);
    const answered = await this.#o.leases.replace('answer a ping of the node announcement', body);
    if (answered.kind !== 'replaced') return false; // changed since (its watch tells) or gone
    this.#tasks.forgetLapsed(held.expires);
    this.#adopt(answered.object, false);
    return true;
  }

  /** This node's name was taken by another instance: stop rather than fight over it. */
  #takenOver(a: Announced, name: string, lease: LeaseView): void {
    this.#held = undefined;
    const message = takenOverMessage(a.node, name, recordOf(lease), lease.holder === undefined);
    this.#o.continuity.halt('taken-over', message);
  }

  /** Whether this node holds a chore and a third of the lease has passed since this instance last wrote its Lease. */
  #renewalDue(held: LeaseView): boolean {
    const leaseMs = this.#o.leaseSeconds * 1000;
    return this.#tasks.holding() && this.#o.clock.now() >= held.expires - leaseMs + leaseMs * RENEW_FRACTION;
  }

  /** Creates the announcement, or takes over an expired one or this agent's own; refuses others' (`late`: Takeover). */
  async #claim(late = false): Promise<void> {
    const a = this.#announced;
    if (a === undefined) return;
    await this.#o.state.verify();
    this.#o.continuity.refuseWhileHalted();
    const leases = this.#o.leases;
    const takeover = new Takeover({ ...this.#o, pingMs: this.#pingMs }, a, late);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const created = await leases.create('announce this node', this.#body(a, undefined, true));
      if (created.kind === 'created') return this.#adopt(created.object, true);
      const lease = leaseOf(await leases.get('read the node announcement', nodeLeaseName(a.node)));
      if (lease === undefined) continue; // gone since: create it again
      const judged = await takeover.judge(lease);
      if (judged.kind === 'again') continue;
      if (judged.kind === 'refuse') {
        this.#o.continuity.halt(
          'taken-over',
          `${judged.refusal}; this agent stopped allocating (then \`warren store accept\`)`,
        );
        throw new WarrenError('ALREADY_RUNNING', judged.refusal);
      }
      const mine = lease.holder === a.instance;
      const taken = await leases.replace('take over the node announcement', this.#body(a, judged.over, !mine));
      if (taken.kind !== 'replaced') continue; // answered after all, or changed: look again
      if (judged.notice !== undefined) this.#o.notice?.(judged.notice);
      if (mine) this.#tasks.forgetLapsed(lease.expires);
      return this.#adopt(taken.object, !mine);
    }
    throw new WarrenError(
      'TRY_AGAIN',
      `the announcement of node ${a.node} kept changing while this agent announced itself; try again`,
    );
  }

  /**
   * This instance's Lease vanished, or went back, while its lease time ran: nobody but this agent
   * removes it then, so the API server lost what it was told.
   */
  #lost(name: string, how: string): void {
    this.#held = undefined;
    this.#o.continuity.halt(
      'store-lost',
      `${this.#o.continuity.where} lost its data: this node's Lease ${name} ${how} while this agent held it ` +
        `(its etcd was restored from an older backup, or wiped). ${API_LOST_RECOVERY}`,
    );
  }

  async renew(): Promise<void> {
    const a = this.#announced;
    if (a === undefined || this.#o.continuity.halted() !== undefined) return;
    const name = nodeLeaseName(a.node);
    for (let round = 1; round <= 2; round++) {
      const held = this.#held;
      if (held === undefined) return this.#claim(true);
      if (round === 1 && !this.#renewalDue(held)) return;
      const renewed = await this.#o.leases.replace('renew the node announcement', this.#body(a, held, false));
      if (renewed.kind === 'replaced') {
        this.#tasks.forgetLapsed(held.expires); // lapsed while renewals failed: chores may have passed on
        return this.#adopt(renewed.object, false);
      }
      // Nobody but this agent removes its Lease, lapsed or not: the API server lost it.
      if (renewed.kind === 'missing') return this.#lost(name, 'is gone');
      const lease = leaseOf(await this.#o.leases.get('read the node announcement', name));
      if (lease === undefined) return this.#lost(name, 'is gone');
      const [now, last] = [revisionOf(lease.version), revisionOf(held.version)];
      if (now !== undefined && last !== undefined && now < last)
        return this.#lost(name, `is back at resourceVersion ${now}, older than ${last} it last wrote`);
      if (lease.holder !== a.instance) return this.#takenOver(a, name, lease);
      this.#held = lease; // renewed by this instance meanwhile (a renewal that timed out but landed)
    }
  }

  /** Best effort: an announcement the API server cannot be told to drop lapses within the lease. */
  async withdraw(): Promise<void> {
    const a = this.#announced;
    const held = this.#held;
    this.#announced = undefined;
    this.#held = undefined;
    this.#unwatch?.();
    this.#unwatch = undefined;
    this.#answers.close();
    if (a === undefined || held === undefined) return;
    const name = nodeLeaseName(a.node);
    let pre = { uid: held.uid, resourceVersion: held.version };
    try {
      for (let round = 1; round <= 2; round++) {
        const done = await this.#o.leases.remove('withdraw the node announcement', name, pre);
        if (done !== 'conflict') return;
        const lease = leaseOf(await this.#o.leases.get('read the node announcement', name));
        if (lease === undefined || lease.holder !== a.instance) return; // another instance's now: not ours
        pre = { uid: lease.uid, resourceVersion: lease.version };
      }
    } catch (error) {
      if (!isWarrenError(error, 'TRY_AGAIN')) throw error;
      this.#o.notice?.(`${error.message}; the announcement of node ${a.node} lapses within ${this.#o.leaseSeconds} s`);
    }
  }

  liveNodes(): Promise<NodeRecord[]> {
    return announcedNodes(this.#o.leases);
  }

  async claimTask(task: string): Promise<boolean> {
    const a = this.#announced;
    const held = this.#held;
    if (a === undefined || held === undefined || this.#o.continuity.halted() !== undefined) return false;
    // Lapsed while renewals failed: another node may have taken this node's chores meanwhile.
    this.#tasks.forgetLapsed(held.expires);
    return this.#tasks.claim(task, a.node);
  }

  /** This node's agent, or another one asked (lease-ping.ts `nodeAlive`: pinged when lapsed, or when told gone). */
  alive(node: string, told?: AliveQuestion): Promise<boolean> {
    const a = this.#announced;
    if (a?.node === node && this.#held !== undefined) return Promise.resolve(true);
    const asker = a === undefined ? 'unannounced' : `${a.node}/${a.instance}`;
    return nodeAlive({ ...this.#o, pingMs: this.#pingMs }, node, asker, told?.toldGone === true);
  }

  releaseTask(task: string): Promise<void> {
    return this.#tasks.release(task);
  }
}
