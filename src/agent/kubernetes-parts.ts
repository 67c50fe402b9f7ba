/**
 * What the Kubernetes side of the agent is, as the agent and the serving side see it (the
 * `KubernetesParts` kubernetes-wiring.ts builds): its sources and chores, its ADD planners, and the
 * two things every part of it is asked for together: its state, as GET /v1/status shows it
 * (`statusOf`), and its loops, each handed to the release wiring's supervision (`startLoops`).
 * Types and plain functions of the parts only: it loads nothing, so agent.ts and serving-wiring.ts
 * name the side without loading it (kubernetes-wiring.ts, its sources and clients, is imported only
 * when --kubernetes is on).
 */
import type { KubernetesStatus, WarrenPoolReport } from '../api/status.ts';
import { defined } from '../core/defined.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { KubeObjectMeta, ListWatch } from '../sources/kubernetes/list-watch.ts';
import type { PodSource } from '../sources/kubernetes/pod-source.ts';
import type { ClusterEvents } from './kubernetes/events.ts';
import type { IpamClaims } from './kubernetes/ipam-claims/ipam-claims.ts';
import type { NodeWatch } from './kubernetes/node-watch.ts';
import type { KubernetesNodes } from './kubernetes/nodes.ts';
import type { KubernetesPlanning } from './kubernetes/planning.ts';
import type { KubernetesReleases } from './kubernetes/releases.ts';
import type { ClusterReservations } from './kubernetes/reservations.ts';
import type { ReleaseIntent } from './release/intent.ts';
import type { AddOutcome, AddPlanner } from './server/add-plan.ts';

export interface KubernetesParts {
  readonly pods: PodSource;
  readonly releases: KubernetesReleases;
  readonly events: ClusterEvents;
  /** The watch of Nodes, open only while this agent holds the chore `nodes`, and the forgetting it feeds. */
  readonly nodes?: { readonly watch: NodeWatch; readonly forget: KubernetesNodes } | undefined;
  /** What the ADD planners read (pods, namespaces, WarrenPools) and the planners themselves. */
  readonly planning: KubernetesPlanning;
  /** The ADD planners, in order (add-plan.ts): pools (and sticky), addresses, then IPAMClaims. */
  readonly planners: readonly AddPlanner[];
  /** The list-watch of WarrenReservations into the allocator's reservations, with deps.reserved. */
  readonly reservations?:
    | { readonly watch: ListWatch<KubeObjectMeta>; readonly cluster: ClusterReservations }
    | undefined;
  /** KubeVirt's IPAMClaims (kubernetes store only: a claim's address is held in the cluster). */
  readonly claims?: IpamClaims | undefined;
  /** The sources' state and what they released and reported. */
  status(): KubernetesStatus;
  /** Closes the agent's client for Warren's objects (once every part has stopped). */
  close(): void;
  /**
   * Every watch of the parts lists again (OnDemandClient.relist): the operator accepted a cluster
   * store that lost its data, and the API server's with it, whose watches resumed from where the
   * old data was would stay silent until the restored server passed it.
   */
  relist(): void;
  /** Starts every loop, each handed to `supervise` (release-wiring.ts's `ReleaseFeed`). */
  start(signal: AbortSignal, supervise: (what: string, loop: Promise<void>) => void): void;
  /** Told of every release committed: reported as an Event on the pod. */
  released(intent: ReleaseIntent, released: readonly Allocation[], why: string): void;
  /** A namespace file disappeared: a gone pod's address may be free now. */
  namespaceRemoved(): void;
  /** Addresses released: a reservation's status stops listing them soon. */
  addressesReleased(allocations: readonly Allocation[]): void;
  /** Told of each ADD: one that took an IPAMClaim's addresses is written to its status. */
  readonly afterAdd: ((outcome: AddOutcome) => void) | undefined;
  /** The reservations as watched, for `warren reservations`; undefined without their watch. */
  readonly reservationObjects: (() => ReturnType<ClusterReservations['objects']>) | undefined;
  /** The WarrenPools as watched, with their status (a metric). */
  warrenPools(): readonly WarrenPoolReport[];
}

/** The parts themselves, before `status`, `start` and `close` are made of them. */
export type KubernetesPartsBuilt = Omit<KubernetesParts, 'status' | 'start' | 'close' | 'relist'>;

/** Every loop of the parts, each handed to `supervise`: they run until the signal aborts. */
export function startLoops(
  kube: KubernetesPartsBuilt,
  signal: AbortSignal,
  supervise: (what: string, loop: Promise<void>) => void,
): void {
  supervise('the Kubernetes pod source', kube.releases.run(kube.pods.events(signal), signal));
  supervise('the Kubernetes namespace and WarrenPool watches', kube.planning.run(signal));
  if (kube.claims !== undefined) supervise('the IPAMClaim watch', kube.claims.run(signal));
  if (kube.nodes !== undefined) supervise('the chore of watching Kubernetes nodes', kube.nodes.watch.run(signal));
  const reservations = kube.reservations;
  if (reservations !== undefined)
    supervise('the watch of WarrenReservations', reservations.cluster.run(reservations.watch.events(signal), signal));
}

function nodesOf(s: ReturnType<KubernetesNodes['status']>): {
  gone: readonly string[];
  forgotten: readonly string[];
  forgetError?: string;
} {
  return { gone: s.gone, forgotten: s.forgotten, ...defined({ forgetError: s.lastError }) };
}

function reservationsOf(r: NonNullable<KubernetesParts['reservations']>): KubernetesStatus['reservations'] & object {
  const { lastError, ...mine } = r.cluster.status();
  return { ...r.watch.status(), ...mine, ...defined({ statusError: lastError }) };
}

/** The state of every part, as GET /v1/status shows it. */
export function statusOf(kube: KubernetesPartsBuilt): KubernetesStatus {
  const pods = kube.pods.status();
  const events = kube.events.status();
  const nodes =
    kube.nodes === undefined ? undefined : { ...kube.nodes.watch.status(), ...nodesOf(kube.nodes.forget.status()) };
  const planning = kube.planning.status();
  const reservations = kube.reservations === undefined ? undefined : reservationsOf(kube.reservations);
  const ipamClaims = kube.claims?.status();
  const watches = [pods, events, nodes, planning.namespaces, planning.pools, reservations, ipamClaims?.watch];
  const forbidden = watches.map((w) => w?.forbidden).filter((f): f is string => f !== undefined);
  return {
    pods,
    releases: kube.releases.status(),
    events,
    ...defined({ nodes }),
    planning,
    ...defined({ reservations, ipamClaims }),
    forbidden,
  };
}
