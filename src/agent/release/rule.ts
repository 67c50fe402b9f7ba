/**
 * The release rule: one pure function from (an intent, what its key holds, what can be observed)
 * to an action — release these owners, wait for this namespace, or drop the intent. It decides;
 * the release pipeline applies. It never reads the store, the clock or the file system, so every
 * case is a row of a table (test/agent/release/rule.test.ts).
 *
 * The principle it keeps: an address is reused only when nothing can still be using it. A
 * container record deleted, a DEL, or a network namespace gone (in a directory the agent really
 * observes) is proof; a process exiting is not, and what cannot be observed proves nothing. A
 * registered adapter's word that its container is gone is taken only where the namespace is not
 * observably there: another runtime's namespace, still present, is never freed on it.
 *
 * And an intent speaks only for what was allocated before it was observed: every intent carries
 * that moment, and the allocations made after it (the same container ID or attachment ADDed
 * again meanwhile: a DEL + ADD while a runtime event backed off, a retried ADD after a journaled
 * DEL) are never released on its strength. Moments are ordered by the boot's monotonic clock
 * (core/moment.ts), never by two wall-clock readings, so an NTP step cannot reorder them.
 *
 * The intents themselves, and what is read off one alone (its holder, source and moment), are
 * release/intent.ts; here is what is decided on them.
 */
import { type Allocation, type Owner, createdMoment, ownerKey } from '../../ipam/allocation.ts';
import { type Moment, atOrBefore } from '../../core/moment.ts';
import type { NetnsObservation } from '../../sources/netns.ts';
import { type ReleaseIntent, type RuntimeAdapterScope, answersFor, observedAt } from './intent.ts';

/** What one release is about: an owner, and limits that keep later allocations of it safe. */
export interface OwnerRelease {
  readonly owner: Owner;
  /** Release only allocations made at or before this moment. */
  readonly createdAtOrBefore?: Moment;
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
  | {
      readonly kind: 'wait-for-namespace';
      readonly owners: readonly OwnerRelease[];
      readonly why: string;
      readonly waitingFor: string;
    }
  /**
   * Release these owners now (perhaps none); look again at `until`, or earlier when a namespace in
   * `waitingFor` goes.
   */
  | {
      readonly kind: 'wait-until';
      readonly owners: readonly OwnerRelease[];
      readonly why: string;
      readonly until: Moment;
      readonly waitingFor: string;
    }
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
  /**
   * This node, where several share the store: another node's allocations are ordered by the wall
   * clock alone (createdMoment).
   */
  readonly node?: string | undefined;
}

/** Why a pod's addresses were released, as its Event says it. */
export const POD_RELEASE_WHY = {
  namespaceGone: 'its network namespace is gone',
  graceExpired: 'the pod has been gone for the whole grace period and its namespace cannot be proven gone',
} as const;

/** Whether deciding this intent needs the held allocations' namespaces looked at. */
export function needsNamespaces(intent: ReleaseIntent): boolean {
  if ((intent.kind === 'container-deleted' || intent.kind === 'absent-at-resync') && intent.via !== undefined)
    return true;
  return (
    intent.kind === 'task-exited' ||
    intent.kind === 'namespace-recheck' ||
    intent.kind === 'netns-gone' ||
    intent.kind === 'pod-gone'
  );
}

/** What an intent saw, as its drop says when everything held is newer. */
const SEEN: Record<ReleaseIntent['kind'], string> = {
  'journal-del': 'the DEL was recorded',
  'container-deleted': 'the container was reported deleted',
  'task-exited': 'its task was reported exited',
  'namespace-recheck': 'its task was reported exited',
  'absent-at-resync': 'the runtime listed its containers',
  'netns-gone': 'the namespace sweep judged it',
  'pod-gone': 'the pod was seen gone',
};

/**
 * The rule. `all`: what the intent's holder holds now (for a container, on this node). Only what
 * was allocated by the time the intent was observed is judged, and every release it decides is
 * limited to that moment (applied again inside the release's commit round): the same container
 * ID or attachment ADDed again since keeps its address, however long the intent waited.
 */
export function decide(intent: ReleaseIntent, all: readonly Allocation[], observed: Observed): ReleaseAction {
  const via = 'via' in intent ? intent.via : undefined;
  const visible = via === undefined ? all : all.filter((a) => answersFor(via, a));
  const at = observedAt(intent);
  const held = visible.filter((a) => atOrBefore(createdMoment(a, observed.node), at, observed.boot));
  if (held.length === 0 && visible.length > 0)
    return { kind: 'drop', reason: `what is held was allocated after ${SEEN[intent.kind]}`, forgetExited: false };
  return limitedTo(judge(intent, held, observed, via), at);
}

/** The rule over what the intent speaks for. */
function judge(
  intent: ReleaseIntent,
  held: readonly Allocation[],
  observed: Observed,
  via: RuntimeAdapterScope | undefined,
): ReleaseAction {
  switch (intent.kind) {
    case 'journal-del':
      // The DEL speaks for what was allocated before it was recorded (decide): a later ADD of the
      // same attachment (the runtime retried it once the agent was back) is in use.
      if (held.length > 0) return { kind: 'release', owners: [{ owner: intent.owner }], why: 'missed delete' };
      return { kind: 'drop', reason: 'nothing is held', forgetExited: false };
    case 'container-deleted':
      if (held.length === 0) return nothingHeld();
      if (via !== undefined) return onAdapterWord(held, observed, 'container deleted');
      return { kind: 'release', owners: ownersOf(held), why: 'container deleted' };
    case 'absent-at-resync': {
      if (held.length === 0) return nothingHeld();
      // Younger allocations alone may be an ADD in flight for a container being created.
      if (!held.some((a) => atOrBefore(createdMoment(a, observed.node), intent.cutoff, observed.boot))) {
        return { kind: 'drop', reason: 'allocated within the resync grace period', forgetExited: false };
      }
      const why = `container gone when ${via?.adapter ?? 'containerd'} was resynchronised`;
      if (via !== undefined) return onAdapterWord(held, observed, why);
      return { kind: 'release', owners: ownersOf(held), why };
    }
    case 'namespace-recheck':
      if (held.length === 0) return nothingHeld();
      if (!observed.exited)
        return { kind: 'drop', reason: 'the container is not waiting for its namespace', forgetExited: false };
      return exited(held, observed);
    case 'task-exited':
      if (held.length === 0) return nothingHeld();
      return exited(held, observed);
    case 'netns-gone': {
      // Looked at again now: a namespace back stays (one made after the sweep judged it, decide).
      // An owner ADDed again in another namespace since lives there now: this namespace says nothing of it.
      const gone = held.filter((a) => a.netns === intent.netns && isGone(a, observed));
      if (gone.length === 0)
        return {
          kind: 'drop',
          reason: `network namespace ${intent.netns} is not gone now, or what is held is newer`,
          forgetExited: false,
        };
      return {
        kind: 'release',
        owners: [{ owner: intent.owner, netns: intent.netns }],
        why: 'network namespace is gone',
      };
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
  return {
    kind: 'wait-for-namespace',
    owners: ownersOf(rest),
    why: `${why}; its network namespace is still there`,
    waitingFor,
  };
}

/** Every release of the action limited to what was allocated by `at` (a limit already set stays). */
function limitedTo(action: ReleaseAction, at: Moment): ReleaseAction {
  if (action.kind === 'drop') return action;
  return {
    ...action,
    owners: action.owners.map((o) => (o.createdAtOrBefore === undefined ? { ...o, createdAtOrBefore: at } : o)),
  };
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
 * A pod no longer runs: `held` is what this node allocated under its UID by the time the pod was
 * seen gone (an allocation made later is someone's ADD in flight and stays: decide). It goes where
 * its namespace is provably gone, and all of it once the grace is over.
 */
function podGone(
  intent: Extract<ReleaseIntent, { kind: 'pod-gone' }>,
  held: readonly Allocation[],
  observed: Observed,
): ReleaseAction {
  if (held.length === 0) return { kind: 'drop', reason: 'nothing is held', forgetExited: false };
  const gone = held.filter((a) => isGone(a, observed));
  const left = held.filter((a) => !gone.includes(a));
  if (left.length === 0)
    return { kind: 'release', owners: inTheirNamespaces(gone), why: POD_RELEASE_WHY.namespaceGone };
  if (observed.now !== undefined && atOrBefore(intent.releaseAfter, observed.now, observed.boot))
    return { kind: 'release', owners: ownersOf(held), why: POD_RELEASE_WHY.graceExpired };
  const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
  return {
    kind: 'wait-until',
    owners: inTheirNamespaces(gone),
    why: POD_RELEASE_WHY.namespaceGone,
    until: intent.releaseAfter,
    waitingFor,
  };
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
  for (const a of allocations)
    owners.set(ownerKey(a), { owner: { network: a.network, containerID: a.containerID, ifname: a.ifname } });
  return [...owners.values()];
}
