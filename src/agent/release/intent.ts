/**
 * Release intents: what a source observed that may free addresses (a DEL the plugin journaled, a
 * container deleted or its task exited, a container absent at a resync, a namespace the sweep
 * found gone, a pod gone), and the pure facts read off one: whose addresses it is about (its
 * holder, the pipeline's queue key: release/keys.ts), where it came from, and the moment it speaks
 * for. What is done about an intent is the release rule's (release/rule.ts).
 *
 * Guarantees:
 * - Every intent carries the moment it was observed (`observedAt`): it speaks only for what was
 *   allocated by then. Moments are on the boot's monotonic clock (core/moment.ts), never two
 *   wall-clock readings, so an NTP step cannot reorder them.
 * - A container intent that came `via` a runtime adapter answers only for the allocations whose
 *   recorded namespace lies under that adapter's prefixes (`answersFor`); without `via` it is
 *   containerd's, which answers for every container of its namespaces.
 * - Every function here is total over the intent kinds: a new kind fails to compile until each
 *   one says what it means for it.
 */
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import type { Moment } from '../../core/moment.ts';
import type { ReleaseSource } from '../../api/dashboard.ts';

/** Called by the pipeline once its intent is done with: after a committed release, or a drop. */
export type Ack = () => void;

export type ReleaseIntent =
  /** A DEL the plugin journaled (file `file`) at `recordedAt`, when it could not reach the agent. */
  | {
      readonly kind: 'journal-del';
      readonly file: string;
      readonly owner: Owner;
      readonly recordedAt: Moment;
      readonly ack?: Ack;
    }
  /** The runtime deleted the container record (seen at `observedAt`): nothing can use its addresses any more. */
  | {
      readonly kind: 'container-deleted';
      readonly containerID: string;
      readonly observedAt: Moment;
      readonly via?: RuntimeAdapterScope;
      readonly ack?: Ack;
    }
  /** The container's task exited or was deleted; its namespace may still carry its addresses. */
  | {
      readonly kind: 'task-exited';
      readonly containerID: string;
      readonly event: 'task-exit' | 'task-delete';
      readonly observedAt: Moment;
      readonly via?: RuntimeAdapterScope;
      readonly ack?: Ack;
    }
  /**
   * Look again at an exited container's namespace (a netns directory lost an entry; a reconcile
   * pass); `observedAt` is when its exit was seen.
   */
  | {
      readonly kind: 'namespace-recheck';
      readonly containerID: string;
      readonly observedAt: Moment;
      readonly via?: RuntimeAdapterScope;
      readonly ack?: Ack;
    }
  /**
   * The container was missing from the runtime's listing taken at `observedAt` after a
   * resubscription; allocations made after `cutoff` (then minus the grace) may belong to an ADD
   * still in flight for it.
   */
  | {
      readonly kind: 'absent-at-resync';
      readonly containerID: string;
      readonly observedAt: Moment;
      readonly cutoff: Moment;
      readonly via?: RuntimeAdapterScope;
      readonly ack?: Ack;
    }
  /** The namespace sweep judged the owner's allocation made at `createdAt` stale: `netns` is gone. */
  | {
      readonly kind: 'netns-gone';
      readonly owner: Owner;
      readonly netns: string;
      readonly createdAt: Moment;
      readonly ack?: Ack;
    }
  /**
   * Kubernetes no longer runs the pod (deleted, finished, or absent from a listing) since `goneAt`.
   * A pod object gone is not proof that its sandbox is: its addresses go at once only where their
   * namespace is provably gone, the rest at `releaseAfter` (the grace: a force-deleted pod's
   * sandbox may run on while its kubelet is down).
   */
  | {
      readonly kind: 'pod-gone';
      readonly pod: PodRef;
      readonly because: PodGoneBecause;
      readonly goneAt: Moment;
      readonly releaseAfter: Moment;
      readonly ack?: Ack;
    };

/**
 * A runtime adapter (a registered `warren.event-source` plugin) and what it answers for: the
 * allocations whose network namespace path, recorded at ADD, begins with one of its prefixes
 * (podman's are /run/netns/netns-*). A container intent that came `via` an adapter judges only
 * those: another runtime's containers are not the adapter's to report gone. Intents without `via`
 * come from containerd, which Warren asks about every container of its namespaces.
 */
export interface RuntimeAdapterScope {
  readonly adapter: string;
  readonly netnsPrefixes: readonly string[];
}

/**
 * Where an intent came from, as metrics and the last-releases list name it: a container intent
 * `via` an adapter is a plugin's word, without one containerd's.
 */
export function sourceOf(intent: ReleaseIntent): ReleaseSource {
  switch (intent.kind) {
    case 'journal-del':
      return 'journal';
    case 'netns-gone':
      return 'netns';
    case 'pod-gone':
      return 'kubernetes';
    case 'container-deleted':
    case 'task-exited':
    case 'namespace-recheck':
    case 'absent-at-resync':
      return intent.via === undefined ? 'containerd' : 'plugin';
    default: {
      const never: never = intent;
      throw new Error(`unhandled intent ${JSON.stringify(never)}`);
    }
  }
}

export function answersFor(scope: RuntimeAdapterScope, a: Allocation): boolean {
  const netns = a.netns;
  return netns !== undefined && scope.netnsPrefixes.some((prefix) => netns.startsWith(prefix));
}

/** A pod, by the UID Kubernetes gave it; namespace and name only describe it (they are reused). */
export interface PodRef {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
}

/** How Warren learnt that the pod no longer runs. */
export type PodGoneBecause = 'deleted' | 'succeeded' | 'failed' | 'absent-from-listing';

/** Whose addresses an intent is about: an owner's, a container's or a pod's (also its queue key, release/keys.ts). */
export type AddressHolder =
  | { readonly kind: 'owner'; readonly owner: Owner }
  | { readonly kind: 'container'; readonly containerID: string }
  | { readonly kind: 'pod'; readonly podUID: string };

export function addressHolderOf(intent: ReleaseIntent): AddressHolder {
  switch (intent.kind) {
    case 'journal-del':
    case 'netns-gone':
      return { kind: 'owner', owner: intent.owner };
    case 'container-deleted':
    case 'task-exited':
    case 'namespace-recheck':
    case 'absent-at-resync':
      return { kind: 'container', containerID: intent.containerID };
    case 'pod-gone':
      return { kind: 'pod', podUID: intent.pod.uid };
    default: {
      const never: never = intent;
      throw new Error(`unhandled intent ${JSON.stringify(never)}`);
    }
  }
}

/**
 * When the intent was observed: it speaks only for allocations made by then (the DEL's recording,
 * the event's arrival, the listing, the allocation the sweep judged, the pod seen gone).
 */
export function observedAt(intent: ReleaseIntent): Moment {
  switch (intent.kind) {
    case 'journal-del':
      return intent.recordedAt;
    case 'netns-gone':
      return intent.createdAt;
    case 'pod-gone':
      return intent.goneAt;
    case 'container-deleted':
    case 'task-exited':
    case 'namespace-recheck':
    case 'absent-at-resync':
      return intent.observedAt;
    default: {
      const never: never = intent;
      throw new Error(`unhandled intent ${JSON.stringify(never)}`);
    }
  }
}
