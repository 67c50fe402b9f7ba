/**
 * The cluster's recovery after its store lost its data: one marker in the store (etcd: the key
 * `recovery` under the prefix, etcd-tier/recovery.ts; Kubernetes: `spec.recovery` of the WarrenClusterState,
 * kubernetes/cluster-state.ts) that every agent honours, pure bookkeeping here.
 *
 * Why a marker: after a store lost its data (wiped, restored from an older backup) the blocks claimed
 * since are gone from it while nodes' containers still use their addresses. A node that noticed
 * halts by itself; but an agent that starts afterwards (a new node, or one whose state directory is
 * new) has nothing to compare with and would take the store at its word, claiming a halted node's
 * blocks and handing out its live addresses. So the first node that notices writes the marker, each
 * one that notices adds itself to it, and while it stands no agent allocates (ADD 11, STATUS 50,
 * status, doctor and metrics say why): not a new one, and not one that accepted already (another
 * node's blocks may still be missing from the store). A node leaves the marker when an operator
 * accepts the store on it (`warren store accept`: its blocks are claimed again first) or forgets it
 * (`warren node forget`: its blocks are given up); the last one to leave removes the marker.
 *
 * An accept that could not claim every block of its node again (another node's claim stands there:
 * often one a restore brought back, which its node gives back unused at its next check,
 * tiered/stray-claims.ts) leaves its node on the marker: until it is, another node could claim such a
 * block afresh and hand out the addresses this node's containers hold (found by the soak, etcd seed
 * 3943). The operator accepts again once the conflicts are gone (`warren store accept` names them).
 *
 * The marker names the nodes that noticed the loss, and the nodes the store still names when each
 * of them joins (announced, or holding blocks): after a restore from a backup those are the nodes
 * whose claims the backup may lack. A node that was down during the loss and notices at its start
 * (its recorded identity) adds itself then, and writes the marker again if it was removed; one that
 * finds a block of its own another node's while a recovery is under way joins it (`RecoveryJoin`).
 */

import type { AcceptReport } from '../store.ts';
import type { Recovery } from '../membership.ts';
import type { Halt } from './continuity.ts';

export type { Recovery };

/** Why no node allocates while `recovery` stands: for ADD's error, status, doctor. */
export function recoveryProblem(recovery: Recovery): string {
  const pending = recovery.pending;
  return (
    `the cluster store is in recovery since ${new Date(recovery.since).toISOString()} (it lost its data: ` +
    `${recovery.reason}): no node allocates until every node listed has accepted the store ` +
    `(\`warren store accept\` on that node) or been forgotten (\`warren node forget\`); waiting for ` +
    `${pending.length === 0 ? 'no node (the marker is being removed)' : pending.join(', ')}`
  );
}

/** The marker with `nodes` added (a new marker when there is none). */
export function joined(
  recovery: Recovery | undefined,
  nodes: readonly string[],
  reason: string,
  now: number,
): Recovery {
  const pending = [...new Set([...(recovery?.pending ?? []), ...nodes])].sort();
  return { since: recovery?.since ?? now, reason: recovery?.reason ?? reason, pending };
}

/** Whether an accept that wrote back `report` takes its node off the marker: every block claimed again. */
export function settled(report: AcceptReport): boolean {
  return report.conflicts.length === 0;
}

/** The marker without `node`; undefined when no node is left (the marker goes). */
export function left(recovery: Recovery, node: string): Recovery | undefined {
  const pending = recovery.pending.filter((n) => n !== node);
  return pending.length === 0 ? undefined : { ...recovery, pending };
}

/** A marker read from JSON the store holds; undefined for one Warren did not write. */
export function recoveryOf(value: unknown): Recovery | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as { since?: unknown; reason?: unknown; pending?: unknown };
  if (typeof r.since !== 'number' || typeof r.reason !== 'string' || !Array.isArray(r.pending)) return undefined;
  const pending = r.pending.filter((n): n is string => typeof n === 'string');
  return { since: r.since, reason: r.reason, pending: [...new Set(pending)].sort() };
}

/** The first line of a halt's message: what was noticed, without the operator's instructions. */
export function reasonOf(message: string): string {
  const cut = message.indexOf('. Allocation is stopped');
  return (cut === -1 ? message : message.slice(0, cut)).slice(0, 400);
}

/**
 * What a node's `keepRecovery` writes, on either tier:
 * - halted because its store lost its data: its node and every node the store names as holding
 *   blocks, once for that halt whatever the marker lists, and again whenever the marker does not
 *   list its node. A marker may stand already that is stale: a restore from a backup taken during an
 *   earlier recovery brings that marker back, listing the nodes of then (often this one), while a
 *   node that was down during the restore cannot notice it (the same identity) and its claims made
 *   since the backup are gone (found by the soak, etcd seed 3943: the recovery ended without that
 *   node, and another handed out its containers' addresses). At worst a node that accepted already
 *   is listed again and accepts again;
 * - `taken` (why a range of its node is halted: another node's claim stands on a block where its
 *   file holds addresses, tiered/reclaim.ts): its node, onto a marker that stands and does not list
 *   it. In a recovery that other claim is most often one the restore brought back, and its node would
 *   hand out these addresses once the recovery ended without this one. With no recovery under way the
 *   halt stays the node's own (most often its own file went back and holds addresses long released).
 * An accept of a halt of the first kind writes it first, as a look would have, should none have run
 * since the halt: an operator (or a script) that accepts at once otherwise cleared the halt before
 * its node was ever on the marker, and a conflict of that accept then held no other node back (found
 * by the soak, kubernetes seed 3839 step 37062: another node gave back the claim a restore brought
 * back, claimed the block afresh and handed out two addresses this node's containers held).
 * Anything else writes nothing.
 */
export class RecoveryJoin {
  /** The nodes the store names as holding blocks. */
  readonly #holders: () => Promise<string[]>;
  /** Writes `nodes` onto the marker (a new one, with `reason`, when none stands). */
  readonly #join: (nodes: readonly string[], reason: string) => Promise<void>;
  /** The halt this node joined the marker for, with the store's holders. */
  #joinedFor: Halt | undefined;

  constructor(holders: () => Promise<string[]>, join: (nodes: readonly string[], reason: string) => Promise<void>) {
    this.#holders = holders;
    this.#join = join;
  }

  /** One look: `recovery` the marker as read now, `taken` why a range of `node` is halted (if it is). */
  async keep(o: {
    readonly halt: Halt | undefined;
    readonly taken?: string | undefined;
    readonly node: string | undefined;
    readonly recovery: Recovery | undefined;
  }): Promise<void> {
    if (o.node === undefined) return;
    const listed = o.recovery?.pending.includes(o.node) === true;
    if (o.halt?.kind === 'store-lost' && (!listed || this.#joinedFor !== o.halt)) {
      const holders = await this.#holders().catch(() => []);
      await this.#join([o.node, ...holders], reasonOf(o.halt.message));
      this.#joinedFor = o.halt;
    } else if (o.taken !== undefined && o.recovery !== undefined && !listed) await this.#join([o.node], o.taken);
  }
}
