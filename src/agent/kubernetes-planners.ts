/**
 * The ADD planners of the Kubernetes side (kubernetes-wiring.ts builds it on them), in order
 * (add-plan.ts): WarrenPools (and, with the cluster's holdings, the sticky addresses of
 * StatefulSets' pods), a pod's addresses annotation, then KubeVirt's IPAMClaims; and the watches
 * they read, on the pod directory the pod source keeps. WarrenPools are read (and their status
 * written) only on the kubernetes store, and IPAMClaims honoured only there: on another store a pod
 * naming a claim is refused, never given an address its VM would not keep. Imported only by
 * kubernetes-wiring.ts, so loaded only when --kubernetes is on.
 */
import type { Logger } from 'pino';
import type { Allocator } from '../allocator/allocator.ts';
import type { ExponentialBackoff } from '../core/backoff.ts';
import type { Clock } from '../core/clock.ts';
import { defined } from '../core/defined.ts';
import { messageOf } from '../core/errors.ts';
import type { ReservedAddresses } from '../ipam/reserved.ts';
import { type KubeObjectMeta, ListWatch } from '../sources/kubernetes/list-watch.ts';
import type { Store } from '../store/store.ts';
import { ADDRESSES_ANNOTATION, addressPlanner } from './kubernetes/address-planner.ts';
import { ClaimApi } from './kubernetes/ipam-claims/claim-api.ts';
import { ipamClaimPlanner } from './kubernetes/ipam-claims/claim-planner.ts';
import { IpamClaims, storeClaimHoldings } from './kubernetes/ipam-claims/ipam-claims.ts';
import type { OnDemandClient, RequestAccounting } from '../sources/kubernetes/on-demand-client.ts';
import type { KubeAccess } from '../store/kubernetes/kube-access.ts';
import type { PodDirectory } from './kubernetes/pod-directory.ts';
import { KubernetesPlanning } from './kubernetes/planning.ts';
import { PoolStatusWriter } from './kubernetes/pool-status.ts';
import { poolStatusWrite } from './kubernetes/pool-status-write.ts';
import { StickyRelease } from './kubernetes/sticky-release.ts';
import type { AddPlanner } from './server/add-plan.ts';
import type { AgentOptions } from './settings/options.ts';

/** What the planners are built on: the agent's parts and what the Kubernetes side already opened. */
export interface KubernetesPlannersDeps {
  readonly store: Store;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly kubeConfig: KubeAccess;
  /** The agent's one client for Warren's objects (statuses, IPAMClaims). */
  readonly warrenApi: OnDemandClient;
  /** The pods (fed by the pod source) and namespaces the planners read. */
  readonly directory: PodDirectory;
  readonly backoff: ExponentialBackoff;
  /** The allocator's cluster-wide reservations: the addresses planner refuses a reserved address. */
  readonly reserved: ReservedAddresses | undefined;
  /** Where every request to the API server is counted, and the User-Agent it carries. */
  readonly accounting: RequestAccounting;
}

export interface KubernetesPlanners {
  /** What the ADD planners read (pods, namespaces, WarrenPools) and the pool and sticky planners. */
  readonly planning: KubernetesPlanning;
  /** KubeVirt's IPAMClaims (kubernetes store only: a claim's address is held in the cluster). */
  readonly claims: IpamClaims | undefined;
  /** Every planner, in order: pools (and sticky), addresses, then IPAMClaims. */
  readonly planners: readonly AddPlanner[];
}

export function kubernetesPlanners(o: AgentOptions, deps: KubernetesPlannersDeps): KubernetesPlanners {
  const { kubeConfig, warrenApi, directory, backoff, logger, reserved } = deps;
  const watch = (path: string, fieldSelector?: string) =>
    new ListWatch<KubeObjectMeta>({
      kubeConfig,
      client: warrenApi,
      accounting: deps.accounting,
      path,
      clock: deps.clock,
      logger,
      backoff,
      ...defined({ fieldSelector }),
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
  // A claim's address is held in the cluster (allocator/holdings/): read on the kubernetes store.
  const claims =
    o.store !== 'kubernetes'
      ? undefined
      : new IpamClaims({
          kubeConfig,
          client: warrenApi,
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
  return { planning, claims, planners };
}
