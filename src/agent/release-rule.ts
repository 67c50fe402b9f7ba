/**
 * The release rule: one pure function from (an intent, what its key holds, what can be observed)
 * to an action — release these owners, wait for this namespace, or drop the intent. It decides;
 * the release pipeline applies. It never reads the store, the clock or the file system, so every
 * case is a row of a table (test/agent/release-rule.test.ts).
 *
 * The principle it keeps: an address is reused only when nothing can still be using it. A
 * container record deleted, a DEL, or a network namespace gone (in a directory the agent really
 * observes) is proof; a process exiting is not, and what cannot be observed proves nothing.
 *
 * And an intent speaks only for what was allocated before it was observed: every intent carries
 * that moment, and the allocations made after it (the same container ID or attachment ADDed
 * again meanwhile: a DEL + ADD while a runtime event backed off, a retried ADD after a journaled
 * DEL) are never released on its strength. Moments are ordered by the boot's monotonic clock
 * (core/moment.ts), never by two wall-clock readings, so an NTP step cannot reorder them.
 */
import { type Allocation, type Owner, createdMoment, ownerKey } from '../ipam/allocation.ts';
import { type Moment, atOrBefore } from '../core/moment.ts';
import type { NetnsObservation } from '../sources/netns.ts';
import type { ReleaseSource } from '../api/dashboard.ts';

/** Called by the pipeline once its intent is done with: after a committed release, or a drop. */
export type Ack = () => void;

export type ReleaseIntent =
  /** A DEL the plugin journaled (file `file`) at `recordedAt`, when it could not reach the agent. */
  | { readonly kind: 'journal-del'; readonly file: string; readonly owner: Owner; readonly recordedAt: Moment; readonly ack?: Ack }
  /** The runtime deleted the container record (seen at `observedAt`): nothing can use its addresses any more. */
  | { readonly kind: 'container-deleted'; readonly containerID: string; readonly observedAt: Moment; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /** The container's task exited or was deleted; its namespace may still carry its addresses. */
  | { readonly kind: 'task-exited'; readonly containerID: string; readonly event: 'task-exit' | 'task-delete'; readonly observedAt: Moment; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /**
   * Look again at an exited container's namespace (a netns directory lost an entry; a reconcile
   * pass); `observedAt` is when its exit was seen.
   */
  | { readonly kind: 'namespace-recheck'; readonly containerID: string; readonly observedAt: Moment; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /**
   * The container was missing from the runtime's listing taken at `observedAt` after a
   * resubscription; allocations made after `cutoff` (then minus the grace) may belong to an ADD
   * still in flight for it.
   */
  | { readonly kind: 'absent-at-resync'; readonly containerID: string; readonly observedAt: Moment; readonly cutoff: Moment; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /** The namespace sweep judged the owner's allocation made at `createdAt` stale: `netns` is gone. */
  | { readonly kind: 'netns-gone'; readonly owner: Owner; readonly netns: string; readonly createdAt: Moment; readonly ack?: Ack }
  /**
   * Kubernetes no longer runs the pod (deleted, finished, or absent from a listing) since `goneAt`.
   * A pod object gone is not proof that its sandbox is: its addresses go at once only where their
   * namespace is provably gone, the rest at `releaseAfter` (the grace: a force-deleted pod's
   * sandbox may run on while its kubelet is down).
   */
  | { readonly kind: 'pod-gone'; readonly pod: PodRef; readonly because: PodGoneBecause; readonly goneAt: Moment; readonly releaseAfter: Moment; readonly ack?: Ack };

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

/** What one release is about: an owner, and limits that keep later allocations of it safe. */
export interface OwnerRelease {
  readonly owner: Owner;
  /** Release only allocations made at or before this moment. */
  readonly createdAtOrBefore?: Moment;
}

export type ReleaseAction =
  /** Release these owners; the container (for container intents) is done with. */
  | { readonly kind: 'release'; readonly owners: readonly OwnerRelease[]; readonly why: string }
  /**
   * Release these owners now (perhaps none), and keep the container marked exited until the
   * namespaces in `waitingFor` are gone or the container is deleted.
   */
  | { readonly kind: 'wait-for-namespace'; readonly owners: readonly OwnerRelease[]; readonly why: string; readonly waitingFor: string }
  /**
   * Release these owners now (perhaps none); look again at `until`, or earlier when a namespace in
   * `waitingFor` goes.
   */
  | { readonly kind: 'wait-until'; readonly owners: readonly OwnerRelease[]; readonly why: string; readonly until: Moment; readonly waitingFor: string }
  /** Nothing to release. `forgetExited`: the container's exited mark (if any) goes too. */
  | { readonly kind: 'drop'; readonly reason: string; readonly forgetExited: boolean };

export interface Observed {
  /** The container is marked exited (a task exit came and its namespace was still there). */
  readonly exited: boolean;
  /** What was seen of the namespaces of the held allocations, by path; a path not here is unobservable. */
  readonly namespaces: ReadonlyMap<string, NetnsObservation>;
  /** The moment the intent is decided at; a deadline is never passed without it. */
  readonly now?: Moment;
  /** The boot running now: moments of an earlier boot came before it (core/moment.ts). */
  readonly boot?: string | undefined;
  /** This node, where several share the store: another node's allocations are ordered by the wall clock alone (createdMoment). */
  readonly node?: string | undefined;
}

/** Why a pod's addresses were released, as its Event says it. */
export const POD_RELEASE_WHY = {
  namespaceGone: 'its network namespace is gone',
  graceExpired: 'the pod has been gone for the whole grace period and its namespace cannot be proven gone',
} as const;

/** The store key an intent is held under: owner intents by owner, container intents by container. */
export type Holder =
  | { readonly kind: 'owner'; readonly owner: Owner }
  | { readonly kind: 'container'; readonly containerID: string }
  | { readonly kind: 'pod'; readonly podUID: string };

export function holderOf(intent: ReleaseIntent): Holder {
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

/** Whether deciding this intent needs the held allocations' namespaces looked at. */
export function needsNamespaces(intent: ReleaseIntent): boolean {
  return intent.kind === 'task-exited' || intent.kind === 'namespace-recheck' || intent.kind === 'netns-gone' || intent.kind === 'pod-gone';
}

/** The rule. `held`: what the intent's holder holds now (for a container, on this node). */
export function decide(intent: ReleaseIntent, all: readonly Allocation[], observed: Observed): ReleaseAction {
  const via = 'via' in intent ? intent.via : undefined;
  const held = via === undefined ? all : all.filter((a) => answersFor(via, a));
  const madeBy = (at: Moment) => (a: Allocation) => atOrBefore(createdMoment(a, observed.node), at, observed.boot);
  switch (intent.kind) {
    case 'journal-del': {
      // The DEL speaks for what was allocated before it was recorded: a later ADD of the same
      // attachment (the runtime retried it once the agent was back) is in use.
      if (held.some(madeBy(intent.recordedAt))) {
        return { kind: 'release', owners: [{ owner: intent.owner, createdAtOrBefore: intent.recordedAt }], why: 'missed delete' };
      }
      return { kind: 'drop', reason: held.length === 0 ? 'nothing is held' : 'what is held was allocated after the DEL was recorded', forgetExited: false };
    }
    case 'container-deleted': {
      if (held.length === 0) return nothingHeld();
      const seen = held.filter(madeBy(intent.observedAt));
      if (seen.length === 0) return newer('the container was reported deleted');
      return { kind: 'release', owners: ownersOf(seen, intent.observedAt), why: 'container deleted' };
    }
    case 'absent-at-resync': {
      if (held.length === 0) return nothingHeld();
      const seen = held.filter(madeBy(intent.observedAt));
      if (seen.length === 0) return newer('the runtime listed its containers');
      // Younger allocations alone may be an ADD in flight for a container being created.
      if (!seen.some(madeBy(intent.cutoff))) return { kind: 'drop', reason: 'allocated within the resync grace period', forgetExited: false };
      return { kind: 'release', owners: ownersOf(seen, intent.observedAt), why: `container gone when ${via?.adapter ?? 'containerd'} was resynchronised` };
    }
    case 'namespace-recheck': {
      if (held.length === 0) return nothingHeld();
      if (!observed.exited) return { kind: 'drop', reason: 'the container is not waiting for its namespace', forgetExited: false };
      const seen = held.filter(madeBy(intent.observedAt));
      if (seen.length === 0) return newer('its task was reported exited');
      return exited(seen, observed, intent.observedAt);
    }
    case 'task-exited': {
      if (held.length === 0) return nothingHeld();
      const seen = held.filter(madeBy(intent.observedAt));
      if (seen.length === 0) return newer('its task was reported exited');
      return exited(seen, observed, intent.observedAt);
    }
    case 'netns-gone': {
      // Looked at again now: a namespace back, or an allocation made after the sweep judged it, stays.
      const gone = held.filter((a) => madeBy(intent.createdAt)(a) && isGone(a, observed));
      if (gone.length === 0) return { kind: 'drop', reason: `network namespace ${intent.netns} is not gone now, or what is held is newer`, forgetExited: false };
      return { kind: 'release', owners: [{ owner: intent.owner, createdAtOrBefore: intent.createdAt }], why: 'network namespace is gone' };
    }
    case 'pod-gone':
      return podGone(intent, held, observed);
    default: {
      const never: never = intent;
      throw new Error(`unhandled intent ${JSON.stringify(never)}`);
    }
  }
}

/**
 * A task exit (seen at `at`) releases what sits in a namespace that is provably gone and waits for
 * the rest; `held` is what was allocated by then.
 */
function exited(held: readonly Allocation[], observed: Observed, at: Moment): ReleaseAction {
  const gone = held.filter((a) => isGone(a, observed));
  const why = 'task exited and its network namespace is gone';
  const left = held.filter((a) => !gone.includes(a));
  if (left.length === 0) return { kind: 'release', owners: ownersOf(gone, at), why };
  const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
  return { kind: 'wait-for-namespace', owners: ownersOf(gone, at), why, waitingFor };
}

/** What is held was allocated after the intent was observed: the container ID was ADDed again since. */
function newer(when: string): ReleaseAction {
  return { kind: 'drop', reason: `what is held was allocated after ${when}`, forgetExited: false };
}

/**
 * A pod no longer runs: `held` is what this node allocated under its UID. An allocation made after
 * the pod was seen gone is someone's ADD in flight and stays; the rest goes where its namespace is
 * provably gone, and all of it once the grace is over.
 */
function podGone(intent: Extract<ReleaseIntent, { kind: 'pod-gone' }>, held: readonly Allocation[], observed: Observed): ReleaseAction {
  const mine = held.filter((a) => atOrBefore(createdMoment(a, observed.node), intent.goneAt, observed.boot));
  if (mine.length === 0) {
    return { kind: 'drop', reason: held.length === 0 ? 'nothing is held' : 'what is held was allocated after the pod was seen gone', forgetExited: false };
  }
  const limited = (allocations: readonly Allocation[]): OwnerRelease[] => ownersOf(allocations, intent.goneAt);
  const gone = mine.filter((a) => isGone(a, observed));
  const left = mine.filter((a) => !gone.includes(a));
  if (left.length === 0) return { kind: 'release', owners: limited(gone), why: POD_RELEASE_WHY.namespaceGone };
  if (observed.now !== undefined && atOrBefore(intent.releaseAfter, observed.now, observed.boot)) return { kind: 'release', owners: limited(mine), why: POD_RELEASE_WHY.graceExpired };
  const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
  return { kind: 'wait-until', owners: limited(gone), why: POD_RELEASE_WHY.namespaceGone, until: intent.releaseAfter, waitingFor };
}

function isGone(a: Allocation, observed: Observed): boolean {
  return a.netns !== undefined && observed.namespaces.get(a.netns)?.kind === 'gone';
}

function nothingHeld(): ReleaseAction {
  return { kind: 'drop', reason: 'nothing is held', forgetExited: true };
}

/**
 * Each (network, ifname) of a container's allocations once: one release per attachment, of what
 * was allocated at or before `at` (when the intent was observed).
 */
function ownersOf(allocations: readonly Allocation[], at: Moment): OwnerRelease[] {
  const owners = new Map<string, OwnerRelease>();
  for (const a of allocations) owners.set(ownerKey(a), { owner: { network: a.network, containerID: a.containerID, ifname: a.ifname }, createdAtOrBefore: at });
  return [...owners.values()];
}
