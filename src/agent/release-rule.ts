/**
 * The release rule: one pure function from (an intent, what its key holds, what can be observed)
 * to an action — release these owners, wait for this namespace, or drop the intent. It decides;
 * the release pipeline applies. It never reads the store, the clock or the file system, so every
 * case is a row of a table (test/agent/release-rule.test.ts).
 *
 * The principle it keeps: an address is reused only when nothing can still be using it. A
 * container record deleted, a DEL, or a network namespace gone (in a directory the agent really
 * observes) is proof; a process exiting is not, and what cannot be observed proves nothing. A
 * registered adapter's word that its container is gone is taken only where the namespace is not
 * observably there: another runtime's namespace, still present, is never freed on it.
 */
import { type Allocation, type Owner, ownerKey } from '../ipam/allocation.ts';
import type { NetnsObservation } from '../sources/netns.ts';
import type { ReleaseSource } from '../api/dashboard.ts';

/** Called by the pipeline once its intent is done with: after a committed release, or a drop. */
export type Ack = () => void;

export type ReleaseIntent =
  /** A DEL the plugin journaled (file `file`) at `recordedAt`, when it could not reach the agent. */
  | { readonly kind: 'journal-del'; readonly file: string; readonly owner: Owner; readonly recordedAt: number; readonly ack?: Ack }
  /** The runtime deleted the container record: nothing can use its addresses any more. */
  | { readonly kind: 'container-deleted'; readonly containerID: string; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /** The container's task exited or was deleted; its namespace may still carry its addresses. */
  | { readonly kind: 'task-exited'; readonly containerID: string; readonly event: 'task-exit' | 'task-delete'; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /** Look again at an exited container's namespace (a netns directory lost an entry; a reconcile pass). */
  | { readonly kind: 'namespace-recheck'; readonly containerID: string; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /**
   * The container was missing from the runtime's listing after a resubscription; allocations made
   * after `cutoff` (now minus the grace) may belong to an ADD still in flight for it.
   */
  | { readonly kind: 'absent-at-resync'; readonly containerID: string; readonly cutoff: number; readonly via?: RuntimeAdapterScope; readonly ack?: Ack }
  /** The namespace sweep judged the owner's allocation made at `createdAt` stale: `netns` is gone. */
  | { readonly kind: 'netns-gone'; readonly owner: Owner; readonly netns: string; readonly createdAt: number; readonly ack?: Ack }
  /**
   * Kubernetes no longer runs the pod (deleted, finished, or absent from a listing) since `goneAt`.
   * A pod object gone is not proof that its sandbox is: its addresses go at once only where their
   * namespace is provably gone, the rest at `releaseAfter` (the grace: a force-deleted pod's
   * sandbox may run on while its kubelet is down).
   */
  | { readonly kind: 'pod-gone'; readonly pod: PodRef; readonly because: PodGoneBecause; readonly goneAt: number; readonly releaseAfter: number; readonly ack?: Ack };

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
  /** Release only allocations created at or before this instant (ms since the epoch). */
  readonly createdAtOrBefore?: number;
  /**
   * Release only allocations still recorded in this namespace: set when the release rests on a
   * namespace being gone, which proves nothing about the owner once it lives in another one.
   */
  readonly netns?: string;
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
   * Release these owners now (perhaps none); look again at `until` (ms since the epoch), or
   * earlier when a namespace in `waitingFor` goes.
   */
  | { readonly kind: 'wait-until'; readonly owners: readonly OwnerRelease[]; readonly why: string; readonly until: number; readonly waitingFor: string }
  /** Nothing to release. `forgetExited`: the container's exited mark (if any) goes too. */
  | { readonly kind: 'drop'; readonly reason: string; readonly forgetExited: boolean };

export interface Observed {
  /** The container is marked exited (a task exit came and its namespace was still there). */
  readonly exited: boolean;
  /** What was seen of the namespaces of the held allocations, by path; a path not here is unobservable. */
  readonly namespaces: ReadonlyMap<string, NetnsObservation>;
  /** The time the intent is decided at (ms since the epoch); a deadline is never passed without it. */
  readonly now?: number;
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
  if ((intent.kind === 'container-deleted' || intent.kind === 'absent-at-resync') && intent.via !== undefined) return true;
  return intent.kind === 'task-exited' || intent.kind === 'namespace-recheck' || intent.kind === 'netns-gone' || intent.kind === 'pod-gone';
}

/** The rule. `held`: what the intent's holder holds now (for a container, on this node). */
export function decide(intent: ReleaseIntent, all: readonly Allocation[], observed: Observed): ReleaseAction {
  const via = 'via' in intent ? intent.via : undefined;
  const held = via === undefined ? all : all.filter((a) => answersFor(via, a));
  switch (intent.kind) {
    case 'journal-del': {
      // The DEL speaks for what was allocated before it was recorded: a later ADD of the same
      // attachment (the runtime retried it once the agent was back) is in use.
      if (held.some((a) => a.createdAt <= intent.recordedAt)) {
        return { kind: 'release', owners: [{ owner: intent.owner, createdAtOrBefore: intent.recordedAt }], why: 'missed delete' };
      }
      return { kind: 'drop', reason: held.length === 0 ? 'nothing is held' : 'what is held was allocated after the DEL was recorded', forgetExited: false };
    }
    case 'container-deleted':
      if (held.length === 0) return nothingHeld();
      if (via !== undefined) return onAdapterWord(held, observed, 'container deleted');
      return { kind: 'release', owners: ownersOf(held), why: 'container deleted' };
    case 'absent-at-resync': {
      if (held.length === 0) return nothingHeld();
      // Younger allocations alone may be an ADD in flight for a container being created.
      if (!held.some((a) => a.createdAt <= intent.cutoff)) return { kind: 'drop', reason: 'allocated within the resync grace period', forgetExited: false };
      const why = `container gone when ${via?.adapter ?? 'containerd'} was resynchronised`;
      if (via !== undefined) return onAdapterWord(held, observed, why);
      return { kind: 'release', owners: ownersOf(held), why };
    }
    case 'namespace-recheck':
      if (held.length === 0) return nothingHeld();
      if (!observed.exited) return { kind: 'drop', reason: 'the container is not waiting for its namespace', forgetExited: false };
      return exited(held, observed);
    case 'task-exited':
      if (held.length === 0) return nothingHeld();
      return exited(held, observed);
    case 'netns-gone': {
      // Looked at again now: a namespace back, or an allocation made after the sweep judged it, stays.
      // An owner ADDed again in another namespace since lives there now: this namespace says nothing of it.
      const gone = held.filter((a) => a.createdAt <= intent.createdAt && a.netns === intent.netns && isGone(a, observed));
      if (gone.length === 0) return { kind: 'drop', reason: `network namespace ${intent.netns} is not gone now, or what is held is newer`, forgetExited: false };
      return { kind: 'release', owners: [{ owner: intent.owner, createdAtOrBefore: intent.createdAt, netns: intent.netns }], why: 'network namespace is gone' };
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
 * A registered adapter says its container is gone. Its word alone never frees an address whose
 * namespace is observably there (an adapter may be wrong, or lie): that waits, as after a task
 * exit, for the namespace to go; the rest is released on its word.
 */
function onAdapterWord(held: readonly Allocation[], observed: Observed, why: string): ReleaseAction {
  const present = held.filter((a) => a.netns !== undefined && observed.namespaces.get(a.netns)?.kind === 'exists');
  if (present.length === 0) return { kind: 'release', owners: ownersOf(held), why };
  const waiting = new Set(present.map((a) => ownerKey(a)));
  const rest = held.filter((a) => !waiting.has(ownerKey(a)));
  const waitingFor = [...new Set(present.map((a) => a.netns as string))].join(', ');
  return { kind: 'wait-for-namespace', owners: ownersOf(rest), why: `${why}; its network namespace is still there`, waitingFor };
}

/** A task exit releases what sits in a namespace that is provably gone and waits for the rest. */
function exited(held: readonly Allocation[], observed: Observed): ReleaseAction {
  const gone = held.filter((a) => isGone(a, observed));
  const why = 'task exited and its network namespace is gone';
  const left = held.filter((a) => !gone.includes(a));
  if (left.length === 0) return { kind: 'release', owners: inTheirNamespaces(gone), why };
  const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
  return { kind: 'wait-for-namespace', owners: inTheirNamespaces(gone), why, waitingFor };
}

/**
 * A pod no longer runs: `held` is what this node allocated under its UID. An allocation made after
 * the pod was seen gone is someone's ADD in flight and stays; the rest goes where its namespace is
 * provably gone, and all of it once the grace is over.
 */
function podGone(intent: Extract<ReleaseIntent, { kind: 'pod-gone' }>, held: readonly Allocation[], observed: Observed): ReleaseAction {
  const mine = held.filter((a) => a.createdAt <= intent.goneAt);
  if (mine.length === 0) {
    return { kind: 'drop', reason: held.length === 0 ? 'nothing is held' : 'what is held was allocated after the pod was seen gone', forgetExited: false };
  }
  const limited = (allocations: readonly Allocation[]): OwnerRelease[] => ownersOf(allocations).map((o) => ({ ...o, createdAtOrBefore: intent.goneAt }));
  const gone = mine.filter((a) => isGone(a, observed));
  const left = mine.filter((a) => !gone.includes(a));
  const goneLimited = inTheirNamespaces(gone).map((o) => ({ ...o, createdAtOrBefore: intent.goneAt }));
  if (left.length === 0) return { kind: 'release', owners: goneLimited, why: POD_RELEASE_WHY.namespaceGone };
  if (observed.now !== undefined && observed.now >= intent.releaseAfter) return { kind: 'release', owners: limited(mine), why: POD_RELEASE_WHY.graceExpired };
  const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
  return { kind: 'wait-until', owners: goneLimited, why: POD_RELEASE_WHY.namespaceGone, until: intent.releaseAfter, waitingFor };
}

function isGone(a: Allocation, observed: Observed): boolean {
  return a.netns !== undefined && observed.namespaces.get(a.netns)?.kind === 'gone';
}

function nothingHeld(): ReleaseAction {
  return { kind: 'drop', reason: 'nothing is held', forgetExited: true };
}

/**
 * One release per attachment and namespace, each limited to that namespace: for releases that rest
 * on a namespace being gone, so an attachment moved to another namespace since the decision stays.
 */
function inTheirNamespaces(allocations: readonly Allocation[]): OwnerRelease[] {
  const owners = new Map<string, OwnerRelease>();
  for (const a of allocations) {
    const owner = { network: a.network, containerID: a.containerID, ifname: a.ifname };
    owners.set(JSON.stringify([ownerKey(a), a.netns]), a.netns === undefined ? { owner } : { owner, netns: a.netns });
  }
  return [...owners.values()];
}

/** Each (network, ifname) of a container's allocations once: one release per attachment. */
function ownersOf(allocations: readonly Allocation[]): OwnerRelease[] {
  const owners = new Map<string, OwnerRelease>();
  for (const a of allocations) owners.set(ownerKey(a), { owner: { network: a.network, containerID: a.containerID, ifname: a.ifname } });
  return [...owners.values()];
}
