/**
 * Agents' membership of the cluster on the Kubernetes API: coordination.k8s.io/v1 Leases in the agent's
 * namespace (the contract of Membership in store.ts, as etcd-tier/membership.ts keeps it on etcd).
 *
 * - A node's announcement is the Lease `nodeLeaseName(node)`, labelled `warren.dev/lease=node`:
 *   `holderIdentity` is the agent instance (a fresh id per start), the NodeRecord is its annotation
 *   `warren.dev/record`, and it lives until `renewTime + leaseDurationSeconds` (MicroTime, six
 *   fractional digits, as the API server demands). `renew` writes a new renewTime, guarded by the
 *   resourceVersion this instance last wrote, only once a third of the lease has passed since the
 *   last write (RENEW_FRACTION): asked on every upkeep run, it makes no request in between, so an
 *   idle agent writes once per 100 s at the kubernetes store's default lease of 300 s
 *   (settings/serving-rows.ts), and two renewals may fail before the lease lapses.
 * - One agent per node name: a Lease of another instance refuses `announce` (ALREADY_RUNNING) while
 *   unexpired; an expired one, this instance's own, or its previous start's on this boot is taken
 *   over by an RV-guarded PUT (so of two takers one wins); so is its previous start's on another boot
 *   when Kubernetes' Node of this name reports this agent's boot ID (the machine booted since that
 *   start: one GET of the Node, at announce only; lease-takeover.ts), so an agent serves after a power
 *   loss once its kubelet reported the boot; else it is waited out, up to the lease (a clone may renew it).
 * - Once announced, this node's Lease and the store's state object are watched (tier-watches.ts
 *   `one`, field selector `metadata.name`: listed once, then watched, no periodic request). The
 *   Lease found held by another instance while this one runs halts this agent (sticky until
 *   `accept`) instead of fighting over it: seen on the watch as it happens, or at the next renewal.
 * - The API server's data loss is noticed (kubernetes/continuity.ts): this instance's Lease gone (on
 *   the watch, or at a renewal), or back at a resourceVersion older than the one it last wrote (at
 *   a renewal), while its lease time runs, halts it as a store that lost its data; so do the
 *   store's identity object gone or replaced (on its watch, or read), and any answer gone backwards
 *   (cluster-state.ts, resources.ts; announcement-watch.ts judges the watch). The identity object,
 *   which also carries the cluster's recovery marker (recovery.ts), is read by `keepRecovery` only
 *   while its watch is not live (after the announcement was written, or to see a marker lifted)
 *   and while this node is halted, never per upkeep run; a marker
 *   written or lifted by another node is known from the watch as it happens; a node halted on a
 *   lost store adds itself to it. An ordinary expiry (the API server away longer than the lease)
 *   is none of this: the node announces itself again.
 * - A chore (`claimTask`) is claimed only by a node announced and holding its Lease, on a store not
 *   halted; the chore's own Lease is task-leases.ts's, which is told when this node's announcement
 *   was made anew (chores it held may have been taken meanwhile).
 *
 * Liveness is Warren's own Lease, not the kubelet's (kube-node-lease/<node>) nor the Node object's
 * conditions: what depends on it is whether Warren's agent — not the kubelet — still holds the node
 * name, its chores and its blocks (an agent crashed on a node whose kubelet runs must give up its
 * chores; an agent serving on a node whose kubelet is down must keep its name), and which instance
 * and boot holds it (the takeover rules above), which the kubelet's Lease does not say. The Node
 * object is consulted besides where it decides: a node's blocks are freed only once Kubernetes no
 * longer has its Node *and* its announcement lapsed (agent/kubernetes/nodes.ts). The cost of the
 * Lease is kept to one write per 100 s by default instead (the kubelet's own is one per 10 s).
 *
 * Expiry compares the writer's renewTime with this node's wall clock: the nodes' clocks are assumed
 * to agree within a fraction of the lease (as they must for Kubernetes' own node leases).
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, isWarrenError } from '../../core/errors.ts';
import { describeInstance } from '../membership.ts';
import { type Recovery, joinRecovery } from '../tiered/recovery.ts';
import type { AcceptReport, AnnounceInfo, Membership, NodeRecord } from '../store.ts';
import type { KubeClusterState } from './cluster-state.ts';
import { verdictOf, watchAnnouncement } from './announcement-watch.ts';
import { API_LOST_RECOVERY, type KubeContinuity, revisionOf } from './continuity.ts';
import { LEASE_LABEL, nodeLeaseName, selectorOf } from './names.ts';
import { type LeaseView, type Predecessor, announcementObject, leaseOf, recordOf } from './lease-objects.ts';
import { holderRebooted, takenOverMessage, waitOut } from './lease-takeover.ts';
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
  /** This instance's Lease as last written: what the next renewal is guarded by. */
  #held: LeaseView | undefined;
  readonly #tasks: TaskLeases;
  /** Whether the identity object is to be read at the next `keepRecovery` (the announcement was written since). */
  #stateDue = true;
  /** Stops the watches of this node's Lease and the state object, once announced. */
  #unwatch: (() => void) | undefined;

  constructor(options: LeaseMembershipOptions) {
    this.#o = options;
    this.#tasks = new TaskLeases(options);
  }

  async announce(node: string, info: AnnounceInfo): Promise<void> {
    const { previous, ...published } = info;
    const instance = info.instance ?? randomUUID();
    this.#announced = {
      node,
      instance,
      record: { node, ...published, instance },
      ...defined({ previous }),
    };
    await this.#claim();
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

  async keepRecovery(): Promise<void> {
    const halted = this.#o.continuity.halted() !== undefined;
    const following = this.#o.state.following(); // the watch tells of a marker and of the identity
    const marker = this.#o.state.recovery() !== undefined && !following;
    if ((!this.#stateDue || following) && !halted && !marker) return;
    await this.#o.state.verify();
    this.#stateDue = false;
    await joinRecovery({
      halt: this.#o.continuity.halted(),
      node: this.#announced?.node,
      recovery: this.#o.state.recovery(),
      holders: () => this.#o.holders(),
      join: (nodes, reason) => this.#o.state.join(nodes, reason),
    });
  }

  leaveRecovery(node: string): Promise<void> {
    return this.#o.state.leave(node);
  }

  async accept(): Promise<AcceptReport> {
    const a = this.#announced;
    if (a === undefined)
      throw new WarrenError('TRY_AGAIN', 'this agent has not announced a node yet: there is nothing to accept');
    // Only a store that lost its data lacks what this node held; a name taken over lost nothing.
    const lost = this.#o.continuity.halted()?.kind === 'store-lost';
    this.#o.continuity.accept();
    this.#held = undefined;
    await this.#claim();
    const report = lost ? await this.#o.republish(a.node) : { addresses: 0, blocks: 0, conflicts: [] };
    // Its blocks are claimed again: this node no longer holds the cluster in recovery.
    await this.#o.state.leave(a.node);
    return report;
  }

  #body(a: Announced, lease: Predecessor | undefined, acquire: boolean): KubeObject {
    const at = { now: this.#o.clock.now(), leaseSeconds: this.#o.leaseSeconds };
    return announcementObject({ node: a.node, instance: a.instance, record: a.record }, at, lease, acquire);
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
    this.#unwatch = watchAnnouncement({ ...this.#o, watches }, a.node, (change, name) => {
      const held = this.#held;
      if (this.#announced !== a || held === undefined || this.#o.continuity.halted() !== undefined) return;
      const verdict = verdictOf(change, held, a.instance, this.#o.clock.now());
      if (verdict === 'gone') this.#lost(name, 'is gone');
      if (verdict === 'taken-over' && change.type !== 'deleted') this.#takenOver(a, name, change.value);
    });
  }

  /** This node's name was taken by another instance: stop rather than fight over it. */
  #takenOver(a: Announced, name: string, lease: LeaseView): void {
    this.#held = undefined;
    this.#o.continuity.halt('taken-over', takenOverMessage(a.node, name, recordOf(lease)));
  }

  /** Whether a third of the lease has passed since this instance last wrote its Lease. */
  #renewalDue(held: LeaseView): boolean {
    const leaseMs = this.#o.leaseSeconds * 1000;
    return this.#o.clock.now() >= held.expires - leaseMs + leaseMs * RENEW_FRACTION;
  }

  /** Creates the announcement, or takes over an expired one or this agent's own; refuses another's. */
  async #claim(): Promise<void> {
    const a = this.#announced;
    if (a === undefined) return;
    await this.#o.state.verify();
    this.#o.continuity.refuseWhileHalted();
    const leases = this.#o.leases;
    const name = nodeLeaseName(a.node);
    let waited = false;
    /** Kubernetes' Node says this machine booted since the previous start that holds the Lease. */
    let rebooted = false;
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const created = await leases.create('announce this node', this.#body(a, undefined, true));
      if (created.kind === 'created') return this.#adopt(created.object, true);
      const lease = leaseOf(await leases.get('read the node announcement', name));
      if (lease === undefined) continue; // gone since: create it again
      const holder = recordOf(lease);
      const mine = lease.holder === a.instance;
      const previous = a.previous !== undefined && lease.holder === a.previous;
      const sameBoot = previous && holder?.bootId !== undefined && holder.bootId === a.record.bootId;
      const expired = lease.expires <= this.#o.clock.now();
      if (mine || sameBoot || expired || (previous && rebooted)) {
        const taken = await leases.replace('take over the node announcement', this.#body(a, lease, !mine));
        if (taken.kind === 'replaced') return this.#adopt(taken.object, !mine || expired);
        continue;
      }
      if (previous && !waited) {
        waited = true;
        rebooted = await holderRebooted(this.#o, a.node, a.record.bootId, holder);
        if (!rebooted) await waitOut(this.#o, name, lease, holder);
        continue;
      }
      const refusal =
        `node ${a.node} is already announced in the Kubernetes API (Lease ${name}) by ${describeInstance(holder)}: ` +
        `two agents must not share a node name (give this one another --node-name; if that agent is gone, its ` +
        `Lease lapses within ${this.#o.leaseSeconds} s of its last renewal)`;
      this.#o.continuity.halt('taken-over', `${refusal}; this agent stopped allocating (then \`warren store accept\`)`);
      throw new WarrenError('ALREADY_RUNNING', refusal);
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
      if (held === undefined) return this.#claim();
      if (round === 1 && !this.#renewalDue(held)) return;
      const alive = held.expires > this.#o.clock.now();
      const renewed = await this.#o.leases.replace('renew the node announcement', this.#body(a, held, false));
      if (renewed.kind === 'replaced') return this.#adopt(renewed.object, !alive);
      if (renewed.kind === 'missing') {
        if (alive) return this.#lost(name, 'is gone');
        this.#held = undefined;
        return this.#claim(); // lapsed while the API server was away, and removed: announce again
      }
      const lease = leaseOf(await this.#o.leases.get('read the node announcement', name));
      if (lease === undefined) {
        if (alive) return this.#lost(name, 'is gone');
        this.#held = undefined;
        return this.#claim();
      }
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

  async liveNodes(): Promise<NodeRecord[]> {
    const items = await this.#o.leases.listAll('list live nodes', selectorOf({ [LEASE_LABEL]: 'node' }));
    const now = this.#o.clock.now();
    const out: NodeRecord[] = [];
    for (const item of items) {
      const lease = leaseOf(item);
      const record = recordOf(lease);
      if (lease !== undefined && record !== undefined && lease.expires > now) out.push(record);
    }
    return out.sort((x, y) => (x.node < y.node ? -1 : x.node > y.node ? 1 : 0));
  }

  async claimTask(task: string): Promise<boolean> {
    const a = this.#announced;
    const held = this.#held;
    if (a === undefined || held === undefined || this.#o.continuity.halted() !== undefined) return false;
    // Lapsed while renewals failed: another node may have taken this node's chores meanwhile.
    if (held.expires <= this.#o.clock.now()) this.#tasks.forget();
    return this.#tasks.claim(task, a.node);
  }

  releaseTask(task: string): Promise<void> {
    return this.#tasks.release(task);
  }
}
