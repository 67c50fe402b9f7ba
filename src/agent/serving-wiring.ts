/**
 * The agent's serving side, wired beside the release and Kubernetes sides (agent.ts): the API
 * server over the operator and CNI services (server/serving.ts), told what each side answers —
 * the release pipeline applies what is pending before an ADD, the Kubernetes side plans it and
 * hears of it, the node's hand-back, readiness indicator and host-local takeover gate it, the
 * cluster's upkeep says when this node must not allocate — and the metrics address's endpoint
 * over the same service. Nothing here decides anything: it only says which part answers what.
 * Neither side is built here: this file reads them (type imports only), so the wirings stay side
 * by side and the Kubernetes side's code is still loaded only when that side is on.
 */
import type { Logger } from 'pino';
import { defined } from '../core/defined.ts';
import { WarrenError } from '../core/errors.ts';
import { isBookkeeping } from '../ipam/bookkeeping.ts';
import type { Allocator } from '../allocator/allocator.ts';
import type { MetricsEndpointStatus } from '../api/status.ts';
import type { Membership, Store } from '../store/store.ts';
import type { Clock } from '../core/clock.ts';
import type { ClusterUpkeep } from './cluster/upkeep.ts';
import { DASHBOARD_ASSETS, renderDashboardBody, renderDashboardPage } from './dashboard/page.ts';
import { type ServedMetrics, serveMetrics } from './metrics/http-server.ts';
import type { AgentMetrics } from './metrics/prometheus.ts';
import { type MetricsReadings, agentReadings } from './metrics/readings.ts';
import { bookkeepingCounts } from './server/bookkeeping-counts.ts';
import type { FailureHistory } from './metrics/failure-history.ts';
import type { ReleaseHistory } from './metrics/release-history.ts';
import type { Telemetry } from './metrics/telemetry.ts';
import { type CniConfigManager, readinessProblem } from './node/cni-config-manager.ts';
import type { NodeHandBack } from './node/hand-back.ts';
import type { HostLocalTakeover } from './node/host-local-takeover.ts';
import type { CommitHealth } from './server/commit-health.ts';
import type { AgentService } from './server/operator-service.ts';
import { type Serving, servingParts } from './server/serving.ts';
import { WARREN_VERSION } from './server/version.ts';
import type { AgentOptions } from './settings/options.ts';
import type { OpenedStore, StoreFacts } from './settings/store-kind.ts';
import type { ListenAddress } from './settings/listen-address.ts';
import type { KubernetesParts } from './kubernetes-parts.ts';
import type { ReleaseWiring } from './release-wiring.ts';
import type { ApiRequestCounter } from '../store/kubernetes/api-requests.ts';
import type { EtcdRequestCounter } from '../store/etcd-tier/etcd-requests.ts';

/** What the serving side serves from: the agent's parts and the sides built beside it. */
export interface ServingSides {
  readonly options: AgentOptions;
  readonly facts: StoreFacts;
  readonly store: Store;
  readonly published: OpenedStore['published'];
  readonly membership: Membership | undefined;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly commits: CommitHealth;
  readonly telemetry: Telemetry;
  readonly history: ReleaseHistory;
  readonly failures: FailureHistory;
  readonly releases: ReleaseWiring;
  readonly kubernetes: KubernetesParts | undefined;
  /** On a cluster store: announces the node and says when it must not allocate. */
  readonly upkeep: ClusterUpkeep | undefined;
  readonly handBack: NodeHandBack;
  readonly takeover: HostLocalTakeover | undefined;
  readonly cniConfig: CniConfigManager | undefined;
  /** Where metrics are served, once they are (set before the socket listens); undefined when off. */
  readonly metricsStatus: (() => MetricsEndpointStatus) | undefined;
  /** Every request to the Kubernetes API server (api-requests.ts): its rate in status and doctor. */
  readonly kubeRequests: ApiRequestCounter;
  /** Every request to etcd (etcd-requests.ts): its rate in status and doctor, on the etcd store. */
  readonly etcdRequests: EtcdRequestCounter;
}

/** The API server and its services, answering from every side; not listening yet. */
export function servingSide(s: ServingSides): Serving {
  const { options: o, facts, store, handBack, takeover, cniConfig, upkeep, commits, releases, kubernetes } = s;
  const notReady = (): string | undefined =>
    handBack.reason() ?? readinessProblem(o.readinessIndicatorFile) ?? upkeep?.problem();
  return servingParts({
    options: o,
    storeKind: facts.kind,
    store,
    membership: s.membership,
    allocator: s.allocator,
    clock: s.clock,
    logger: s.logger,
    version: WARREN_VERSION,
    reconciler: releases.reconciler,
    containerd: releases.containerd,
    kubernetes: kubernetes === undefined ? undefined : () => kubernetes.status(),
    plugins: releases.plugins,
    notReady,
    addGate: (network) => notReady() ?? takeover?.gate(network),
    // A store of this node alone, on a node of a cluster: only node-local configs (cni/node-local.ts).
    ...(o.kubernetes && !facts.shared ? { nodeLocalOnly: () => cniConfig?.nodeLocal() } : {}),
    beforeAdd: releases.beforeAdd,
    runtimeOf: releases.runtimeOf,
    planners: kubernetes?.planners ?? [],
    reservations: kubernetes?.reservationObjects,
    afterAdd: kubernetes?.afterAdd,
    commits,
    published: s.published,
    ...(upkeep === undefined
      ? {}
      : {
          cluster: {
            problem: () => upkeep.problem(),
            upkeep: () => upkeep.status(),
            // What accept wrote went through: the commits that failed on the lost store say nothing now.
            // The sources' watches list again: resumed from the lost data's version, they stay silent.
            accept: () =>
              upkeep.accept().then((report) => {
                commits.committed();
                kubernetes?.relist();
                return report;
              }),
          },
        }),
    ...(cniConfig === undefined ? {} : { cniConfig: () => cniConfig.status() }),
    // Without the config manager (beside Multus, under systemd) the configs naming Warren are
    // the operator's: the node is handed back all the same, and the report says how many
    // addresses pods still hold, whose DELs still call the plugin (the CLI keeps it for them).
    uninstall: async () => {
      const held = (await store.list({ node: o.nodeName })).filter((a) => !isBookkeeping(a)).length;
      return handBack.uninstall(takeover, cniConfig, held);
    },
    telemetry: s.telemetry,
    history: s.history,
    failures: s.failures,
    ...defined({ metrics: s.metricsStatus }),
    // Only an agent that talks to an API server has a rate to show.
    ...(o.kubernetes || facts.kind === 'kubernetes' ? { kubeApi: () => s.kubeRequests.rate() } : {}),
    ...(facts.kind === 'etcd' ? { etcdApi: () => s.etcdRequests.rate() } : {}),
  });
}

/**
 * Health, metrics and the dashboard on the metrics address, from the operator service; the
 * readiness probe answers NOT_READY unless `serving` says the CNI socket is served.
 */
export function serveMetricsEndpoint(
  address: ListenAddress,
  metrics: AgentMetrics,
  service: AgentService,
  serving: () => boolean,
  logger: Logger,
): Promise<ServedMetrics> {
  return serveMetrics(
    {
      exposition: async () => ({ contentType: metrics.contentType, text: await metrics.exposition() }),
      dashboard: () => service.dashboard(),
      page: (data) => renderDashboardPage(data),
      fragment: (data) => renderDashboardBody(data),
      assets: DASHBOARD_ASSETS,
      // The probes' answers (liveness: the event loop turns; readiness: an ADD can commit now).
      readiness: () => (serving() ? service.readiness() : Promise.reject(new WarrenError('NOT_READY', NOT_SERVING))),
      onError: (error, path) => logger.error({ err: error, path }, 'metrics request failed'),
    },
    address,
    logger,
  );
}

/** The sides a scrape reads, once they are built. */
export type ScrapedSides = Pick<ServingSides, 'membership' | 'releases' | 'kubernetes'> & {
  readonly service: AgentService;
};

/**
 * What a scrape reads. The metrics are made before the sides they read (the store they measure is
 * what the sides are built on), so the sides are asked for when a scrape asks, never before.
 */
export function scrapeReadings(
  o: AgentOptions,
  facts: StoreFacts,
  opened: Store,
  sides: () => ScrapedSides,
): MetricsReadings {
  return agentReadings({
    node: o.nodeName,
    pools: () => sides().service.pools(),
    // This node's allocations tell borrowed blocks apart; a store of one node has none.
    ownAllocations: facts.shared ? () => opened.list({ node: o.nodeName }) : undefined,
    pendingJournal: () => sides().releases.pendingJournal(),
    journalDir: o.journalDir,
    queueDepth: () => sides().releases.queueDepth(),
    readiness: () => sides().service.readiness(),
    bookkeeping: () => bookkeepingCounts(opened),
    warrenPools: () => sides().kubernetes?.warrenPools() ?? [],
    ...(facts.shared
      ? {
          cluster: () => ({
            halted: sides().membership?.halted() !== undefined,
            recovering: sides().membership?.recovery() !== undefined,
          }),
        }
      : {}),
  });
}

const NOT_SERVING = 'the agent is not serving CNI calls yet (starting) or any more (stopping)';
