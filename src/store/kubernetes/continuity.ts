/**
 * Whether the API server behind the kubernetes store still holds the data this agent has been
 * writing to it, judged by what the agent has seen of it, and the halt that follows when it does
 * not (the Kubernetes counterpart of etcd-tier/continuity.ts; pure bookkeeping: Resource, the cluster
 * state object and LeaseMembership feed it what they see and ask it before they write).
 *
 * An API server whose etcd was restored from an older snapshot, or wiped, answers every request
 * normally: the objects created since are simply not there. Taken at its word, the store would let
 * another node claim the blocks this node's live containers use. The signs, each enough on its own:
 * - a resourceVersion lower than one already seen before the request was sent, where the answer
 *   carries the store's revision at that moment: a list read from etcd (no resourceVersion asked:
 *   its `metadata.resourceVersion` is the current revision) and a created or replaced object (the
 *   revision of that write). ASSUMPTION, stated because the API conventions call resourceVersions
 *   opaque: the kube-apiserver's resourceVersion is its etcd's revision as a decimal string, one
 *   counter for every resource (measured, ../KUBERNETES-API.md in the project's notes: "global"),
 *   and etcd's revision never goes backwards. So comparing is only done on decimal strings, and
 *   never on an object's own resourceVersion read back (its last change, not the revision now). A
 *   restore with `etcdutl snapshot restore --bump-revision` keeps the revision going forward: then
 *   the next two signs are the ones that notice;
 * - the store's identity object (a WarrenClusterState, kubernetes/cluster-state.ts) gone or different;
 * - this node's own Lease gone while this agent holds it, lapsed or not (an idle agent renews nothing:
 *   nobody but its agent removes its Lease; others take it over by a PUT, or vacate it), or back at
 *   an older resourceVersion (lease-membership.ts; announcement-watch.ts sees both on the watch);
 * - this node's Lease held by another agent instance: then it is not the store that changed but the
 *   node's name that is taken (kind 'taken-over').
 *
 * A halt is sticky: nothing clears it but `accept` (the operator's word, `warren store accept`).
 * Every answer is judged through a check begun before its request left (tiered/continuity.ts
 * StoreCheck, the floor a Resource hands back): an answer to a request sent before the operator's
 * accept judges nothing after it.
 */
import { StoreContinuity } from '../tiered/continuity.ts';
import type { RevisionObserver } from './resources.ts';

/** What the operator does about an API server that lost its data; ends every such halt's message. */
export const API_LOST_RECOVERY =
  "Allocation is stopped until an operator acts: restore the API server's etcd from its latest backup, or " +
  'accept the store as it is (`warren store accept` on every node); see docs/recovery.md, "When the API server lost ' +
  'its data"';

/** A resourceVersion as the etcd revision it is; undefined for one that is not a decimal string. */
export function revisionOf(resourceVersion: unknown): number | undefined {
  return typeof resourceVersion === 'string' && /^[0-9]{1,15}$/.test(resourceVersion)
    ? Number(resourceVersion)
    : undefined;
}

export class KubeContinuity extends StoreContinuity {
  readonly #where: string;

  /** `where` names the API server in messages. */
  constructor(where: string, now: () => number = Date.now, debug?: (message: string) => void) {
    super(now, debug);
    this.#where = where;
  }

  /** What Resource is told and asks: guarded ones refuse writes while halted, unguarded ones only report. */
  observer(guarded: boolean): RevisionObserver {
    return {
      floor: () => this.begin(),
      // An answer to a request sent before the operator accepted the store is judged against nothing
      // seen since (the check drops it): its floor is the old store's, which was accepted away.
      observe: (resourceVersion, check, what) =>
        check.observe(what, (floor) => this.observe(resourceVersion, floor, what)),
      beforeWrite: guarded ? () => this.refuseWhileHalted() : () => undefined,
      whenAccepted: (listener) => this.whenAccepted(listener),
    };
  }

  /** Checks the revision an answer carries against what was seen before its request left. */
  observe(resourceVersion: unknown, floor: number, what: string): void {
    const revision = revisionOf(resourceVersion);
    if (revision === undefined) return;
    if (revision < floor) {
      this.halt(
        'store-lost',
        `${this.#where} answered "${what}" at resourceVersion ${revision}, lower than ${floor} this agent had ` +
          `already seen: its data went backwards (its etcd was restored from an older backup, or wiped). ` +
          API_LOST_RECOVERY,
      );
      return;
    }
    this.raise(revision);
  }

  get where(): string {
    return this.#where;
  }
}
