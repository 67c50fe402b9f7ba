/**
 * Whether the etcd behind the store is still the one this agent has been writing to, judged by what
 * the agent has seen of it, and the halt that follows when it is not. Pure bookkeeping: the etcd tier
 * and EtcdMembership feed it what they see and ask it before they write.
 *
 * An etcd that lost its data (its data directory wiped and the member started again with the same
 * name and URLs, or restored from an older backup) answers every call normally, as an empty or an
 * older cluster. Taken at its word, it hands every address this node's live containers hold to the
 * next ADD. The signs, each enough on its own:
 * - a response at a revision lower than one already seen before the request was sent (etcd's
 *   revision never goes backwards; a response to a request sent before another one completed may
 *   legitimately be older than that one, so the floor is what was seen when the request left);
 * - a response from another cluster (the header's cluster_id changed);
 * - the store's identity record gone or different (identity(): a record written once per key
 *   prefix, never deleted by Warren, and checked by every commit);
 * - this node's announcement held by another agent instance (EtcdMembership): then it is not the
 *   store that changed but the node's name that is taken.
 *
 * A halt is sticky: nothing clears it but `accept` (the operator's word, `warren store accept`).
 * Every call is judged through a check begun before it left (tiered/continuity.ts StoreCheck): a
 * response to a call sent before the operator's accept judges nothing after it.
 * An ordinary lease expiry (etcd away longer than the lease) is none of these: the revision, the
 * cluster and the identity are what they were, and the node announces itself again.
 */
import type { IResponseHeader } from 'etcd3';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { StoreContinuity } from '../tiered/continuity.ts';

/** What the operator does about a store that lost its data; ends every such halt's message. */
export const STORE_LOST_RECOVERY =
  'Allocation is stopped until an operator acts: restore etcd from its latest backup, or accept the store as ' +
  'it is (`warren store accept`); see docs/recovery.md, "When etcd lost its data"';

export type { Halt, HaltKind } from '../tiered/continuity.ts';

export class EtcdContinuity extends StoreContinuity {
  /** The cluster every response so far came from. */
  #clusterId: string | undefined;

  /**
   * Runs one etcd call: a transport failure becomes TRY_AGAIN naming `where` and `what`, and the
   * response's header is checked against what was seen before the call left.
   */
  async call<T>(where: string, what: string, body: () => Promise<T>): Promise<T> {
    const check = this.begin();
    let result: T;
    try {
      result = await body();
    } catch (error) {
      if (error instanceof WarrenError) throw error;
      throw new WarrenError('TRY_AGAIN', `${where} unreachable (${what}): ${messageOf(error)}`, { cause: error });
    }
    const header = (result as { header?: { cluster_id: string; revision: string } } | undefined)?.header;
    // Sent before the operator accepted the store, the check drops it: its floor is the old store's
    // (a watch's check of the store, in flight across the accept, would halt it again).
    if (typeof header === 'object' && header !== null) check.observe(what, (floor) => this.observe(header, floor));
    return result;
  }

  /** Judges a response's header against `floor`, the revision seen when its request left. */
  observe(header: Pick<IResponseHeader, 'cluster_id' | 'revision'> | undefined, floor: number): void {
    if (header === undefined) return;
    const revision = Number(header.revision);
    if (this.#clusterId !== undefined && header.cluster_id !== this.#clusterId) {
      this.halt(
        'store-lost',
        `etcd answered from cluster ${header.cluster_id}, not cluster ${this.#clusterId} this agent has been ` +
          `using: the endpoints now reach another etcd cluster. ${STORE_LOST_RECOVERY}`,
      );
      return;
    }
    this.#clusterId ??= header.cluster_id;
    if (Number.isFinite(revision) && revision < floor) {
      this.halt(
        'store-lost',
        `etcd answered at revision ${revision}, lower than revision ${floor} this agent had already seen: ` +
          `the store went backwards (it lost its data, or was restored from an older backup). ` +
          `${STORE_LOST_RECOVERY}`,
      );
      return;
    }
    this.raise(revision);
  }

  /**
   * A revision a watch's answer carried (etcd-tier/key-watch.ts): it raises the floor and never
   * halts. A watch may be served by a member that lags the one the calls reach, and a wiped etcd
   * accepts a resumed watch silently: what a resumed watch shows is judged by the identity read
   * that follows its resumption, answered by a member with a quorum behind it.
   */
  saw(revision: number): void {
    if (Number.isFinite(revision)) this.raise(revision);
  }

  /** The operator's word: the store as it is now is the one to use. Forgets everything seen. */
  override accept(): void {
    super.accept();
    this.#clusterId = undefined;
  }
}
