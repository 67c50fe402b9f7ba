/**
 * The Kubernetes side of the agent, built beside the release and serving sides (agent.ts): the pod
 * source (and, with a store shared by nodes, the node source), the Events it reports with and what
 * acts on them, which feed the release pipeline (a `ReleaseFeed`, release-wiring.ts); the ADD
 * planners (WarrenPools, addresses, IPAMClaims) and the cluster's reservations, which the serving
 * side consults. `start` hands every loop to the release wiring's supervision, so a loop that
 * fails or ends before the abort is a failure of the agent, and the pipeline stops only after
 * them. A module of its own because it is the only part of the agent that loads
 * @kubernetes/client-node, whose loading costs more CPU than the whole rest of an agent start:
 * agent.ts imports it only when --kubernetes is on.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { failureOfError } from '../sources/kubernetes/api-failure.ts';
import { loadKubeConfig } from '../sources/kubernetes/kubeconfig.ts';
import { NodeSource } from '../sources/kubernetes/node-source.ts';
import { PodSource } from '../sources/kubernetes/pod-source.ts';
import { type KubeObjectMeta, ListWatch } from '../sources/kubernetes/list-watch.ts';
import { ExponentialBackoff } from '../core/backoff.ts';
import type { AgentOptions } from './settings/options.ts';
import { ClusterEvents } from './kubernetes/events.ts';
import { KubernetesNodes } from './kubernetes/nodes.ts';
import type { KubernetesStatus } from '../api/status.ts';
import { KubernetesReleases } from './kubernetes/releases.ts';
import { ADDRESSES_ANNOTATION, addressPlanner } from './kubernetes/address-planner.ts';
import { messageOf } from '../core/errors.ts';
import { PodDirectory } from './kubernetes/pod-directory.ts';
import { KubernetesPlanning } from './kubernetes/planning.ts';
import { OnDemandClient } from './kubernetes/on-demand-client.ts';
import { PoolStatusWriter } from './kubernetes/pool-status.ts';
import { poolStatusWrite } from './kubernetes/pool-status-write.ts';
import { ClusterReservations } from './kubernetes/reservations.ts';
import { reservationStatusWriter } from './kubernetes/reservation-status.ts';
import { StickyRelease } from './kubernetes/sticky-release.ts';
import { ClaimApi } from './kubernetes/ipam-claims/claim-api.ts';
import { IpamClaims, storeClaimHoldings } from './kubernetes/ipam-claims/ipam-claims.ts';
import { ipamClaimPlanner } from './kubernetes/ipam-claims/claim-planner.ts';
import type { AddPlanner } from './server/add-plan.ts';
import type { ReleasePipeline } from './release/pipeline.ts';
import type { ReleaseIntent } from './release/intent.ts';
import type { Allocator } from '../allocator/allocator.ts';
import type { Clock } from '../core/clock.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { ReservedAddresses } from '../ipam/reserved.ts';
import type { Membership, Store } from '../store/store.ts';
import type { Telemetry } from './metrics/telemetry.ts';
import type { AddOutcome } from './server/add-plan.ts';
import type { WarrenPoolReport } from '../api/status.ts';
import type { Logger } from 'pino';

/** What the Kubernetes side is built on: the agent's parts, and the release pipeline it feeds. */
export interface KubernetesWiringDeps {
  readonly store: Store;
  /** The store's membership: present exactly when the options say nodes share it (settings/store-kind.ts). */
  readonly membership: Membership | undefined;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly telemetry: Telemetry;
  /** The allocator's cluster-wide reservations, filled by their watch. */
  readonly reserved?: ReservedAddresses | undefined;
}

export interface KubernetesParts {
  readonly pods: PodSource;
  readonly releases: KubernetesReleases;
  readonly events: ClusterEvents;
  readonly nodes?: { readonly source: NodeSource; readonly forget: KubernetesNodes } | undefined;
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

/** Every loop of the parts, each handed to `supervise`: they run until the signal aborts. */
function startLoops(
  kube: Omit<KubernetesParts, 'status' | 'start' | 'close'>,
  signal: AbortSignal,
  supervise: (what: string, loop: Promise<void>) => void,
): void {
  supervise('the Kubernetes pod source', kube.releases.run(kube.pods.events(signal), signal));
  supervise('the Kubernetes namespace and WarrenPool watches', kube.planning.run(signal));
  if (kube.claims !== undefined) supervise('the IPAMClaim watch', kube.claims.run(signal));
  if (kube.nodes !== undefined)
    supervise('the Kubernetes node source', kube.nodes.forget.run(kube.nodes.source.events(signal), signal));
  const reservations = kube.reservations;
  if (reservations !== undefined)
    supervise('the watch of WarrenReservations', reservations.cluster.run(reservations.watch.events(signal), signal));
}

function nodesOf(s: ReturnType<KubernetesNodes['status']>): {
  gone: readonly string[];
  forgotten: readonly string[];
  forgetError?: string;
} {
  return { gone: s.gone, forgotten: s.forgotten, ...(s.lastError === undefined ? {} : { forgetError: s.lastError }) };
}

function reservationsOf(r: NonNullable<KubernetesParts['reservations']>): KubernetesStatus['reservations'] & object {
  const { lastError, ...mine } = r.cluster.status();
  return { ...r.watch.status(), ...mine, ...(lastError === undefined ? {} : { statusError: lastError }) };
}

/** The state of every part, as GET /v1/status shows it. */
function statusOf(kube: Omit<KubernetesParts, 'status' | 'start' | 'close'>): KubernetesStatus {
  const pods = kube.pods.status();
  const events = kube.events.status();
  const nodes =
    kube.nodes === undefined ? undefined : { ...kube.nodes.source.status(), ...nodesOf(kube.nodes.forget.status()) };
  const planning = kube.planning.status();
  const reservations = kube.reservations === undefined ? undefined : reservationsOf(kube.reservations);
  const ipamClaims = kube.claims?.status();
  const watches = [pods, events, nodes, planning.namespaces, planning.pools, reservations, ipamClaims?.watch];
  const forbidden = watches.map((w) => w?.forbidden).filter((f): f is string => f !== undefined);
  return {
    pods,
    releases: kube.releases.status(),
    events,
    ...(nodes === undefined ? {} : { nodes }),
    planning,
    ...(reservations === undefined ? {} : { reservations }),
    ...(ipamClaims === undefined ? {} : { ipamClaims }),
    forbidden,
  };
}

/** The object, or undefined when the API server answers 404. */
async function orNotFound<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (error) {
    if (failureOfError(error).code === 404) return undefined;
    throw error;
  }
}

/** The pod source (and, with a store shared by nodes, the node source) and what acts on them. */
export function kubernetesParts(
  o: AgentOptions,
  deps: KubernetesWiringDeps,
  pipeline: ReleasePipeline,
): KubernetesParts {
  const kubeConfig = loadKubeConfig(o.kubeconfig);
  const logger = deps.logger.child({ source: 'kubernetes' });
  const core = kubeConfig.makeApiClient(CoreV1Api);
  // The agent's one client for Warren's objects (statuses, IPAMClaims): opened at its first use.
  const warrenApi = OnDemandClient.of(kubeConfig);
  const events = new ClusterEvents({ api: core, node: o.nodeName, clock: deps.clock, logger });
  const backoff = new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 });
  const directory = new PodDirectory({
    fetchPod: (namespace, name) => orNotFound(core.readNamespacedPod({ name, namespace })),
    fetchNamespace: (name) => orNotFound(core.readNamespace({ name })),
  });
  const pods = new PodSource({
    kubeConfig,
    node: o.nodeName,
    clock: deps.clock,
    backoff,
    logger,
    observe: (item) => directory.observePods(item),
  });
  const reserved = deps.reserved;
  const reservations =
    reserved === undefined
      ? undefined
      : {
          watch: new ListWatch<KubeObjectMeta>({
            kubeConfig,
            path: '/apis/warren.dev/v1alpha1/warrenreservations',
            clock: deps.clock,
            logger,
            // Without the CRD installed (an overlay that does not carry it) the watch is refused:
            // tried again rarely, so the log is not flooded; reservations are then simply none.
            backoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
          }),
          cluster: new ClusterReservations({
            reserved,
            store: deps.store,
            node: o.nodeName,
            clock: deps.clock,
            logger,
            writer: reservationStatusWriter(warrenApi, o.nodeName),
          }),
        };
  const watch = (path: string, fieldSelector?: string) =>
    new ListWatch<KubeObjectMeta>({
      kubeConfig,
      path,
      clock: deps.clock,
      logger,
      backoff,
      ...(fieldSelector === undefined ? {} : { fieldSelector }),
    });
  const cluster = deps.store.cluster;
  const holdings = cluster?.holdings;
  // WarrenPools are custom resources of the kubernetes store's (deploy/crds/): read only on it.
  const planning = new KubernetesPlanning({
    node: o.nodeName,
    directory,
    namespaces: watch('/api/v1/namespaces'),
    ...(o.store !== 'kubernetes'
      ? {}
      : {
          pools: {
            pools: watch('/apis/warren.dev/v1alpha1/warrenpools'),
            self: watch('/api/v1/nodes', `metadata.name=${o.nodeName}`),
            status: (catalog) =>
              cluster === undefined
                ? undefined
                : new PoolStatusWriter({
                    catalog,
                    tier: {
                      published: cluster.records.published.bind(cluster.records),
                      membership: cluster.membership,
                    },
                    write: poolStatusWrite(warrenApi),
                    clock: deps.clock,
                    logger,
                    // Three upkeep rounds (30 s by default): the status is for operators, not for allocation.
                    intervalMs: o.upkeepIntervalSeconds * 3000,
                  }),
          },
        }),
    ...(holdings === undefined || cluster === undefined
      ? {}
      : {
          sticky: {
            statefulSets: watch('/apis/apps/v1/statefulsets'),
            release: new StickyRelease({
              records: holdings,
              endHolding: (key) => deps.allocator.holdings.endHolding(key),
              membership: cluster.membership,
              clock: deps.clock,
              logger,
              graceMs: o.stickyReleaseGraceSeconds * 1000,
              intervalMs: o.upkeepIntervalSeconds * 1000,
            }),
          },
        }),
  });
  const releases = new KubernetesReleases({
    pipeline,
    store: deps.store,
    clock: deps.clock,
    logger,
    node: o.nodeName,
    graceMs: o.podGoneGraceSeconds * 1000,
    maxRetries: o.podReleaseRetries,
    events,
    podExists: async (pod) => {
      const found = await orNotFound(core.readNamespacedPod({ name: pod.name, namespace: pod.namespace }));
      return found?.metadata?.uid === pod.uid;
    },
  });
  const membership = deps.membership;
  const nodes =
    membership === undefined
      ? undefined
      : {
          source: new NodeSource({ kubeConfig, clock: deps.clock, backoff, logger }),
          forget: new KubernetesNodes({
            store: deps.store,
            membership,
            allocator: deps.allocator,
            clock: deps.clock,
            logger,
            node: o.nodeName,
            recheckMs: o.nodeLeaseSeconds * 1000,
            events,
            nodeExists: async (name) => (await orNotFound(core.readNode({ name }))) !== undefined,
            telemetry: deps.telemetry,
          }),
        };
  // A claim's address is held in the cluster (allocator/holdings/): read on the kubernetes store.
  const claims =
    o.store !== 'kubernetes'
      ? undefined
      : new IpamClaims({
          kubeConfig,
          api: new ClaimApi(warrenApi),
          pod: (ref) => directory.pod(ref),
          holdings: storeClaimHoldings(deps.store, deps.allocator.holdings),
          clock: deps.clock,
          logger,
          backoff,
        });
  // Elsewhere a pod naming a claim is refused: its VM would not keep its address (code 7, why).
  const refuseClaims = ipamClaimPlanner({
    pod: (ref) => directory.pod(ref),
    claim: async () => undefined,
    unsupported: `IPAMClaims' addresses are held only on the kubernetes store (this agent runs --store ${o.store})`,
  });
  const planners: readonly AddPlanner[] = [
    ...planning.planners,
    addressPlanner({
      pods: directory,
      reserved,
      onUnreadable: (pod, error) =>
        logger.warn(
          { pod: `${pod.namespace}/${pod.name}`, err: messageOf(error) },
          `pod ${pod.namespace}/${pod.name} is not in the pod watch yet and could not be read: ` +
            `its ${ADDRESSES_ANNOTATION} annotation, if any, is not honoured for this ADD`,
        ),
    }),
    // The claims' own planners, or on another store the one refusing a pod naming a claim.
    ...(claims?.planners ?? [refuseClaims]),
  ];
  const parts = {
    pods,
    releases,
    events,
    nodes,
    planning,
    planners,
    reservations,
    claims,
    released: (intent: ReleaseIntent, released: readonly Allocation[], why: string) =>
      releases.released(intent, released, why),
    namespaceRemoved: () => releases.namespaceRemoved(),
    addressesReleased: (allocations: readonly Allocation[]) => reservations?.cluster.released(allocations),
    afterAdd: claims?.afterAdd,
    reservationObjects: reservations === undefined ? undefined : () => reservations.cluster.objects(),
    warrenPools: () => planning.status().pools?.list ?? [],
  };
  return {
    ...parts,
    status: () => statusOf(parts),
    start: (signal, supervise) => startLoops(parts, signal, supervise),
    close: () => warrenApi.close(),
  };
}
