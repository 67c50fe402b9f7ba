/**
 * This node's membership of the cluster on etcd: its announcement under a lease (renewed, and made
 * again after the lease was lost while etcd was away), the live nodes, and one-off cluster chores
 * claimed on the claimer's lease. Apart from the rest of the etcd tier (etcd-tier/), which owns the claims.
 *
 * One agent per node name. The announcement names the agent instance that holds it (a fresh id per
 * start, with host, pid and boot id), and is only ever created where there is none, or taken over
 * from this agent's own previous start:
 * - another instance's live announcement refuses `announce` (ALREADY_RUNNING, naming it): a second
 *   agent with the same --node-name (cloned machines share host names) never starts;
 * - the previous start of this agent (recorded in its state directory) made on this boot is dead
 *   (its state directory's lock is ours): its announcement is taken over at once and its lease
 *   revoked, so a restart after kill -9 does not wait for the lease; so is one of any instance made
 *   on this machine and boot whose process is gone (a state directory put back from an older copy
 *   records an older start). Made on another boot (a reboot,
 *   or a machine cloned with its state directory), it may be alive elsewhere: its lease is waited
 *   out (up to the lease time plus a margin), and refused if it is still renewed;
 * - an announcement found taken by another instance while this one runs halts this agent (it stops
 *   writing and says so) instead of fighting over it.
 * Before it announces again after a lost lease, it checks the store is still the one it knew
 * (the etcd tier's identity check): an ordinary lease expiry re-announces; a wiped store halts.
 * Once announced it follows the store's identity, its announcement and the recovery marker by
 * watch (followed-keys.ts): while that is live, `renew` and `keepRecovery` act on the copies and read
 * nothing, so an idle node's only traffic is its lease's keep-alives (LeaseKeepAlive messages on the
 * lease's stream: no read or write of the keyspace). Otherwise they read, as before.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Lease, Namespace } from 'etcd3';
import type { EtcdContinuity } from './continuity.ts';
import { claimantOf, nodeKey, recordOf, taskKey, waitOut } from './announcements.ts';
import { type FollowKey, FollowedKeys } from './followed-keys.ts';
import type { EtcdRecovery } from './recovery.ts';
import { type Recovery, RecoveryJoin, settled } from '../tiered/recovery.ts';
import type { AcceptReport, AnnounceInfo, Membership, NodeRecord } from '../store.ts';
import { describeInstance, goneFromThisBoot } from '../membership.ts';

export interface EtcdMembershipOptions {
  /** The store's namespace (its key prefix). */
  readonly ns: Namespace;
  /** Lifetime of the announcement when its agent stops renewing it, seconds. */
  readonly leaseSeconds: number;
  /** Runs one etcd call, turning transport failures into TRY_AGAIN that names etcd. */
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
  /** What the store has seen of etcd; halted here when the announcement is taken. */
  readonly continuity: EtcdContinuity;
  /** Checks the store's identity record (creating it in a store that never had one); halts when it is gone. */
  readonly verifyIdentity: () => Promise<void>;
  /** Writes back what this node holds after the store lost its data: its claims (etcd-tier/tiered.ts). */
  readonly republish: (node: string) => Promise<AcceptReport>;
  /** The cluster's recovery marker (etcd-tier/recovery.ts). */
  readonly recovery: EtcdRecovery;
  /** The nodes the store names as holding blocks: put on a recovery marker this node writes. */
  readonly holders: () => Promise<string[]>;
  /** A started watch of one key (tier-watches.ts), for what is followed once announced; none: read each time. */
  readonly follow?: FollowKey;
  /** Told what the operator should know while announcing (waiting out a lease). */
  readonly notice?: ((message: string) => void) | undefined;
  /** Waits this long (polling for a lease to lapse); injectable for tests. */
  readonly wait?: (ms: number) => Promise<void>;
}

export class EtcdMembership implements Membership {
  readonly #o: EtcdMembershipOptions;
  #lease: Lease | undefined;
  #announced: { node: string; record: NodeRecord; previous?: string } | undefined;
  readonly #recoveryJoin = new RecoveryJoin(
    () => this.#o.holders(),
    (n, why) => this.#o.recovery.join(n, why),
  );
  /** What is followed by watch once announced: the identity, this node's announcement, the marker. */
  #followed: FollowedKeys | undefined;
  /** Whether the lease's last keep-alive was answered (etcd answers this node now). */
  #keptAlive = false;

  constructor(options: EtcdMembershipOptions) {
    this.#o = options;
  }

  async announce(node: string, info: AnnounceInfo): Promise<void> {
    const { previous, ...published } = info;
    this.#announced = { node, record: { node, ...published }, ...defined({ previous }) };
    await this.#claim();
    this.#follow(node);
  }

  /** Opens the watches of what renew and keepRecovery would read, once. */
  #follow(node: string): void {
    const follow = this.#o.follow;
    if (follow === undefined || this.#followed !== undefined) return;
    this.#followed = new FollowedKeys(follow, node, nodeKey(node), (marker) => this.#o.recovery.seen(marker));
  }

  /** Whether what renew reads is followed live (followed-keys.ts): etcd answers, the copies stand for a read. */
  followed(): boolean {
    return this.#followed?.live(this.#o.continuity.identity, this.#keptAlive) === true;
  }

  halted(): string | undefined {
    return this.#o.continuity.halted()?.message;
  }

  identity(): string | undefined {
    return this.#o.continuity.identity;
  }

  recovery(): Recovery | undefined {
    return this.#o.recovery.current();
  }

  async keepRecovery(taken?: string): Promise<void> {
    const halt = this.#o.continuity.halted();
    // Read while halted (this node may join the marker) or while the watch does not follow it.
    const live = halt === undefined && this.#followed?.recoveryFollowed() === true;
    await this.#recoveryJoin.keep({
      halt,
      taken,
      node: this.#announced?.node,
      recovery: live ? this.#o.recovery.current() : await this.#o.recovery.read(),
    });
  }

  leaveRecovery(node: string): Promise<void> {
    return this.#o.recovery.leave(node);
  }

  async accept(): Promise<AcceptReport> {
    const announced = this.#announced;
    if (announced === undefined)
      throw new WarrenError('TRY_AGAIN', 'this agent has not announced a node yet: there is nothing to accept');
    // Only a store that lost its data lacks what this node held; a name taken over lost nothing. A
    // node the recovery marker waits for lost its claims made since the backup all the same, though it
    // may not have noticed (started again since, or stopped by the marker before it read the store).
    const halt = this.#o.continuity.halted();
    const lost = halt?.kind === 'store-lost';
    // On the marker first, should no look have written it yet (recovery.ts `RecoveryJoin` says why).
    if (lost) await this.#recoveryJoin.keep({ halt, node: announced.node, recovery: await this.#o.recovery.read() });
    this.#o.continuity.accept();
    // The announcement first: an accept that another live instance's announcement refuses writes nothing.
    await this.#claim();
    const waitedFor = (await this.#o.recovery.read())?.pending.includes(announced.node) === true;
    const report =
      lost || waitedFor ? await this.#o.republish(announced.node) : { addresses: 0, blocks: 0, conflicts: [] };
    // Its blocks are claimed again: this node no longer holds the cluster in recovery (recovery.ts `settled`).
    if (settled(report)) await this.#o.recovery.leave(announced.node);
    return report;
  }

  #refuseWhileHalted(): void {
    const halt = this.#o.continuity.halted();
    if (halt !== undefined) throw new WarrenError('TRY_AGAIN', halt.message);
  }

  /**
   * Creates the announcement on a fresh lease where there is none, or takes over this agent's own
   * (this instance's, or its previous start's); refuses another instance's. Called at announce,
   * after a lost lease, and at accept.
   */
  async #claim(): Promise<void> {
    const announced = this.#announced;
    if (announced === undefined) return;
    await this.#o.verifyIdentity();
    this.#refuseWhileHalted();
    const key = nodeKey(announced.node);
    const value = JSON.stringify(announced.record);
    let waited = false;
    // The key changing between our reads (another starter, a lapse) is retried a few times, not forever.
    for (let round = 1; ; round++) {
      if (round > 5)
        throw new WarrenError(
          'TRY_AGAIN',
          `the announcement of node ${announced.node} kept changing while this agent announced itself; try again`,
        );
      const lease = this.#o.ns.lease(this.#o.leaseSeconds);
      try {
        const id = await this.#o.call('announce node', () => lease.grant());
        const created = await this.#o.call('announce node', () =>
          this.#o.ns
            .if(key, 'Create', '==', 0)
            .then(this.#o.ns.put(key).value(value).lease(id))
            .else(this.#o.ns.get(key))
            .commit(),
        );
        if (created.succeeded) return this.#adopt(lease);
        const kv = created.responses[0]?.response_range?.kvs[0];
        if (kv === undefined) {
          await lease.revoke().catch(() => undefined);
          continue; // gone since: create it again
        }
        const holder = recordOf(kv.value);
        const mine = holder?.instance !== undefined && holder.instance === announced.record.instance;
        const previous = holder?.instance !== undefined && holder.instance === announced.previous;
        const sameBoot = previous && holder.bootId !== undefined && holder.bootId === announced.record.bootId;
        if (mine || sameBoot || goneFromThisBoot(holder, announced.record)) {
          const taken = await this.#o.call('announce node', () =>
            this.#o.ns
              .if(key, 'Mod', '==', Number(kv.mod_revision))
              .then(this.#o.ns.put(key).value(value).lease(id))
              .commit(),
          );
          if (!taken.succeeded) {
            await lease.revoke().catch(() => undefined);
            continue;
          }
          // The old lease held nothing else of ours worth keeping (its chore claims go with it).
          if (kv.lease !== '0' && kv.lease !== id)
            await this.#o
              .call('revoke the old announcement', () => this.#o.ns.leaseClient.leaseRevoke({ ID: kv.lease }))
              .catch(() => undefined);
          return this.#adopt(lease);
        }
        await lease.revoke().catch(() => undefined);
        if (previous && !waited) {
          waited = true;
          await waitOut(this.#o, key, kv.mod_revision, holder);
          continue;
        }
        const refusal =
          `node ${announced.node} is already announced in etcd by ${describeInstance(holder)}: two agents must ` +
          `not share a node name ` +
          `(give this one another --node-name; if that agent is gone, its announcement lapses within ` +
          `${this.#o.leaseSeconds} s of its last renewal)`;
        // Refused while running (the first announcement came late, or the lease was lost meanwhile):
        // this instance must not write either.
        this.#o.continuity.halt(
          'taken-over',
          `${refusal}; this agent stopped allocating (then \`warren store accept\`)`,
        );
        throw new WarrenError('ALREADY_RUNNING', refusal);
      } catch (error) {
        // A round that failed midway (etcd away) lets go of its lease: none is kept alive unused,
        // nor holding the agent's process open after its store closed (announce-lease.test.ts).
        if (!lease.revoked()) void lease.revoke().catch(() => undefined);
        throw error;
      }
    }
  }

  #adopt(lease: Lease): void {
    // Withdrawn while it announced (the agent stopping): the lease is not kept alive past the close.
    if (this.#announced === undefined) return void lease.revoke().catch(() => undefined);
    const old = this.#lease;
    this.#lease = lease;
    this.#keptAlive = true; // granted just now
    const alive = (answered: boolean) => () => {
      if (this.#lease === lease) this.#keptAlive = answered;
    };
    lease.on('keepaliveSucceeded', alive(true));
    lease.on('keepaliveFailed', alive(false));
    lease.on('lost', () => {
      if (this.#lease === lease) {
        this.#lease = undefined;
        this.#keptAlive = false;
      }
    });
    if (old !== undefined && old !== lease) old.release();
  }

  /**
   * Checks the store and the announcement, and announces again after a lost lease (etcd was away
   * longer than the lease). One read of the node's key when all is well.
   */
  async renew(): Promise<void> {
    const announced = this.#announced;
    if (announced === undefined) return;
    const followed = this.followed();
    // Followed: the identity is the one known (else it is read, and halts) and the announcement is the copy's.
    if (!followed) await this.#o.verifyIdentity();
    if (this.#o.continuity.halted() !== undefined) return;
    const kv = followed
      ? this.#followed?.announcement()
      : (await this.#o.call('read the announcement', () => this.#o.ns.get(nodeKey(announced.node)).exec())).kvs[0];
    const holder = recordOf(kv?.value);
    if (kv !== undefined && holder?.instance !== announced.record.instance) {
      this.#o.continuity.halt(
        'taken-over',
        `this node's announcement (node ${announced.node}) was taken over by ${describeInstance(holder)}: ` +
          `two agents share this node name, and this one stopped allocating rather than fight over it (stop ` +
          `one of them, give it another --node-name, then run \`warren store accept\` on the one that stays)`,
      );
      return;
    }
    const lease = this.#lease;
    if (kv === undefined || lease === undefined || lease.revoked() || kv.lease === '0') await this.#claim();
  }

  /**
   * One transaction: the claim is put on this node's lease when the key is free, and read back
   * when it is not. A claim this node already holds is won again: a winner whose chore failed
   * halfway takes it up at its next try instead of being refused by its own claim, while every
   * other node is refused until the claim is released or goes with the winner's lease.
   */
  async claimTask(task: string): Promise<boolean> {
    const lease = this.#lease;
    const announced = this.#announced;
    if (lease === undefined || announced === undefined || this.#o.continuity.halted() !== undefined) return false;
    const id = await this.#o.call('claim a task', () => lease.grant());
    const key = taskKey(task);
    const claim = JSON.stringify({ node: announced.node, at: Date.now() });
    const result = await this.#o.call('claim a task', () =>
      this.#o.ns
        .if(key, 'Create', '==', 0)
        .then(this.#o.ns.put(key).value(claim).lease(id))
        .else(this.#o.ns.get(key))
        .commit(),
    );
    if (result.succeeded) return true;
    return claimantOf(result.responses[0]?.response_range?.kvs[0]?.value) === announced.node;
  }

  async releaseTask(task: string): Promise<void> {
    this.#refuseWhileHalted();
    await this.#o.call('release a task', () => this.#o.ns.delete().key(taskKey(task)).exec());
  }

  async liveNodes(): Promise<NodeRecord[]> {
    const response = await this.#o.call('list nodes', () => this.#o.ns.getAll().prefix('nodes/').exec());
    const out: NodeRecord[] = [];
    // A node key Warren did not write is not a node.
    for (const kv of response.kvs) {
      const record = recordOf(kv.value);
      if (record !== undefined) out.push(record);
    }
    return out.sort((a, b) => (a.node < b.node ? -1 : 1));
  }

  async alive(node: string): Promise<boolean> {
    return (await this.liveNodes()).some((n) => n.node === node);
  }

  async withdraw(): Promise<void> {
    const lease = this.#lease;
    this.#announced = undefined;
    this.#lease = undefined;
    if (lease !== undefined) await lease.revoke().catch(() => undefined);
  }
}
