/**
 * The Kubernetes side of the agent, built beside the release and serving sides (agent.ts) as
 * `KubernetesParts` (kubernetes-parts.ts): its sources, which feed the release pipeline (a
 * `ReleaseFeed`, release-wiring.ts): the pod source and the pod releases it drives, and, with a
 * store shared by nodes, the watch of Nodes (opened only by the agent holding the chore `nodes`,
 * kubernetes/node-watch.ts) and the forgetting of gone nodes; the Events they report
 * with; the watch of WarrenReservations into the allocator's reservations, whose status it writes;
 * and the ADD planners the serving side consults (kubernetes-planners.ts: WarrenPools, sticky
 * addresses, addresses, IPAMClaims). `start` hands every loop to the release wiring's supervision,
 * so a loop that fails or ends before the abort is a failure of the agent, and the pipeline stops
 * only after them. Everything it asks of the API server goes through one client, opened at its
 * first use (sources/kubernetes/on-demand-client.ts), with the credentials of Warren's own
 * kubeconfig loader (sources/kubernetes/kubeconfig.ts): @kubernetes/client-node is not loaded by
 * the agent. A module of its own, imported by agent.ts only when --kubernetes is on.
 */
import type { Logger } from 'pino';
import type { Allocator } from '../allocator/allocator.ts';
import { ExponentialBackoff } from '../core/backoff.ts';
import type { Clock } from '../core/clock.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { ReservedAddresses } from '../ipam/reserved.ts';
import { failureOfError } from '../sources/kubernetes/api-failure.ts';
import { CoreApi } from '../sources/kubernetes/core-api.ts';
import { loadKubeConfig } from '../sources/kubernetes/kubeconfig.ts';
import { type KubeObjectMeta, ListWatch } from '../sources/kubernetes/list-watch.ts';
import { NodeSource } from '../sources/kubernetes/node-source.ts';
import { OnDemandClient, type RequestAccounting } from '../sources/kubernetes/on-demand-client.ts';
import { PodSource } from '../sources/kubernetes/pod-source.ts';
import type { Membership, Store } from '../store/store.ts';
import { type KubernetesParts, type KubernetesPartsBuilt, startLoops, statusOf } from './kubernetes-parts.ts';
import { kubernetesPlanners } from './kubernetes-planners.ts';
import { ClusterEvents } from './kubernetes/events.ts';
import { NodeWatch } from './kubernetes/node-watch.ts';
import { KubernetesNodes } from './kubernetes/nodes.ts';
import { PodDirectory } from './kubernetes/pod-directory.ts';
import { KubernetesReleases } from './kubernetes/releases.ts';
import { reservationStatusWriter } from './kubernetes/reservation-status.ts';
import { ClusterReservations } from './kubernetes/reservations.ts';
import type { Telemetry } from './metrics/telemetry.ts';
import type { ReleaseIntent } from './release/intent.ts';
import type { ReleasePipeline } from './release/pipeline.ts';
import type { AgentOptions } from './settings/options.ts';

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
  /** Where every request to the API server is counted, and the User-Agent it carries. */
  readonly accounting: RequestAccounting;
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

/** The Kubernetes side on the agent's parts: its sources, the reservations' watch and the ADD planners. */
export function kubernetesParts(
  o: AgentOptions,
  deps: KubernetesWiringDeps,
  pipeline: ReleasePipeline,
): KubernetesParts {
  const kubeConfig = loadKubeConfig(o.kubeconfig);
  const logger = deps.logger.child({ source: 'kubernetes' });
  const { accounting } = deps;
  // The agent's one client beside its store's (sources, reads, Events, statuses): opened at its first use.
  const warrenApi = OnDemandClient.of(kubeConfig, accounting);
  const core = new CoreApi(warrenApi);
  const events = new ClusterEvents({ api: core, node: o.nodeName, clock: deps.clock, logger });
  const backoff = new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 });
  const directory = new PodDirectory({
    fetchPod: (namespace, name) => orNotFound(core.readNamespacedPod({ name, namespace })),
    fetchNamespace: (name) => orNotFound(core.readNamespace({ name })),
  });
  const pods = new PodSource({
    kubeConfig,
    client: warrenApi,
    accounting,
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
            client: warrenApi,
            accounting,
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
  const { planning, claims, planners } = kubernetesPlanners(o, {
    ...deps,
    logger,
    kubeConfig,
    warrenApi,
    directory,
    backoff,
    reserved,
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
  const forget =
    membership === undefined
      ? undefined
      : new KubernetesNodes({
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
        });
  // Only the holder of the chore `nodes` watches the Nodes (node-watch.ts): one watch per cluster.
  const nodes =
    membership === undefined || forget === undefined
      ? undefined
      : {
          forget,
          watch: new NodeWatch({
            membership,
            openSource: () =>
              new NodeSource({ kubeConfig, client: warrenApi, accounting, clock: deps.clock, backoff, logger }),
            forget,
            clock: deps.clock,
            logger,
            intervalMs: o.upkeepIntervalSeconds * 1000,
          }),
        };
  const parts: KubernetesPartsBuilt = {
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
    relist: () => warrenApi.relist(),
  };
}
