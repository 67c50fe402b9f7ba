/**
 * The base the agent's sides stand on (agent.ts's start, step 2): the store opened (or the one the
 * deps state) and, when metrics are on, measured; watched for commit health; the allocator on it
 * with the cluster's reservations; the telemetry every part reports to (the last releases, the
 * metrics, and what the sides keep of released addresses); the recent errors; the node's hand-back
 * mark; on a cluster store, its membership and this agent's cluster record. What it knows of the
 * store comes from the options' facts (settings/store-kind.ts), never from the store object. The
 * cluster's upkeep, which refuses a second agent with this node's name, is not started here: the
 * agent starts it once it holds the store to close should the refusal come.
 */
import type { Logger } from 'pino';
import { Allocator } from '../allocator/allocator.ts';
import type { Clock } from '../core/clock.ts';
import { defined } from '../core/defined.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import type { Membership, Store } from '../store/store.ts';
import { ClusterRecord } from './cluster/record.ts';
import type { ClusterUpkeep } from './cluster/upkeep.ts';
import { MeasuredStore } from './metrics/measured-store.ts';
import { AgentMetrics } from './metrics/prometheus.ts';
import { RecentErrors } from './metrics/recent-errors.ts';
import { FailureHistory } from './metrics/failure-history.ts';
import { ReleaseHistory } from './metrics/release-history.ts';
import { NO_TELEMETRY, type Telemetry, fanOut } from './metrics/telemetry.ts';
import { NodeHandBack } from './node/hand-back.ts';
import { ApiRequestCounter, kubeUserAgent } from '../store/kubernetes/api-requests.ts';
import { EtcdRequestCounter } from '../store/etcd-tier/etcd-requests.ts';
import { CommitHealth } from './server/commit-health.ts';
import { WARREN_VERSION } from './server/version.ts';
import { type ScrapedSides, scrapeReadings } from './serving-wiring.ts';
import type { AgentOptions } from './settings/options.ts';
import {
  type OpenedStore,
  type StatedStore,
  type StoreFacts,
  clusterRecordKey,
  membershipOf,
  openStore,
} from './settings/store-kind.ts';

/** What step 2 opens: the store and what stands on it. */
export interface Base {
  readonly facts: StoreFacts;
  readonly store: Store;
  readonly published: OpenedStore['published'];
  readonly membership: Membership | undefined;
  readonly allocator: Allocator;
  readonly reserved: ReservedAddresses;
  readonly errors: RecentErrors;
  readonly telemetry: Telemetry;
  readonly commits: CommitHealth;
  readonly history: ReleaseHistory;
  /** The failed CNI calls, for the dashboard. */
  readonly failures: FailureHistory;
  readonly metrics: AgentMetrics | undefined;
  readonly handBack: NodeHandBack;
  readonly upkeep: ClusterUpkeep | undefined;
  /** Every request to the Kubernetes API server, whichever client sent it (api-requests.ts). */
  readonly kubeRequests: ApiRequestCounter;
  /** Every request to etcd on the etcd store (etcd-requests.ts). */
  readonly etcdRequests: EtcdRequestCounter;
  /** What those requests carry as User-Agent: `warren/<version> (node <name>)`. */
  readonly userAgent: string;
}

/** The base before its upkeep starts, with the cluster record the upkeep keeps. */
export type OpenedBase = Omit<Base, 'upkeep'> & { readonly record: ClusterRecord | undefined };

export interface BaseWiringDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** A store to use instead of the one the options name, with its kind stated (AgentDeps.store). */
  readonly stated: StatedStore | undefined;
  /** Whether a cluster store's ranges are split into blocks (AgentDeps.blocks). */
  readonly blocks: boolean;
  /** The sides a scrape reads, once step 3 built them (throws before): the metrics ask at a scrape. */
  readonly sides: () => ScrapedSides;
  /** Released addresses, told to the parts that keep something of them once they are built. */
  readonly released: Telemetry;
  /** Prompt lending's random moment before an answer, ms (AllocatorOptions.lendJitter; tests seed it). */
  readonly lendJitter?: () => number;
}

export async function openBase(o: AgentOptions, facts: StoreFacts, deps: BaseWiringDeps): Promise<OpenedBase> {
  const { clock, logger } = deps;
  const warn = (message: string): void => logger.warn(message);
  const debug = (message: string): void => logger.debug(message);
  // On a cluster store: which start of this agent last announced the node, and the store's identity then.
  const recordKey = clusterRecordKey({ ...o, store: facts.kind });
  const record = recordKey === undefined ? undefined : new ClusterRecord(o.stateDir, recordKey, warn);
  const identity = record?.identity;
  const kubeRequests = new ApiRequestCounter(clock);
  const etcdRequests = new EtcdRequestCounter(clock);
  const userAgent = kubeUserAgent(WARREN_VERSION, o.nodeName);
  const opening = { clock, notice: warn, debug, kubeRequests, etcdRequests, userAgent, ...defined({ identity }) };
  const { store: opened, published } = deps.stated ?? (await openStore(o, opening));
  const history = new ReleaseHistory(clock);
  const failures = new FailureHistory(clock);
  // Readings are taken from the parts the next step builds, when a scrape asks.
  const metrics =
    o.metricsAddress === undefined
      ? undefined
      : new AgentMetrics({
          version: WARREN_VERSION,
          kubeRequests,
          ...(facts.kind === 'etcd' ? { etcdRequests } : {}),
          readings: scrapeReadings(o, facts, opened, deps.sides),
        });
  const handBack = new NodeHandBack(o.stateDir, clock);
  const telemetry = fanOut(history, failures, metrics ?? NO_TELEMETRY, deps.released);
  // Counting commits costs a clock read per commit: only when someone can read the figures.
  // Readiness follows the commits the allocator makes, not only the ping (server/commit-health.ts).
  const commits = new CommitHealth(clock);
  const store = commits.watch(metrics === undefined ? opened : new MeasuredStore(opened, telemetry));
  const membership = membershipOf(store, facts);
  const blocks = facts.shared && deps.blocks;
  // Cluster-wide reservations (ipam/reserved.ts): filled by their watch when Kubernetes is on.
  const reserved = new ReservedAddresses();
  const lendJitter = deps.lendJitter;
  const allocator = new Allocator({ store, clock, node: o.nodeName, blocks, reserved, ...defined({ lendJitter }) });
  const errors = new RecentErrors(clock, logger);
  const base = {
    facts,
    store,
    published,
    membership,
    allocator,
    reserved,
    errors,
    telemetry,
    commits,
    history,
    failures,
  };
  return { ...base, metrics, handBack, record, kubeRequests, etcdRequests, userAgent };
}
