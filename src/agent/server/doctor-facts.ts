/**
 * What the running agent knows of its own setup, for `warren doctor` (GET /v1/doctor): its paths,
 * its store's health and durability, which namespace directories it can observe and where the
 * namespaces its allocations recorded lie, containerd's state, the CNI config manager's state, its
 * clock against etcd's, and etcd's history and the room left for it (store/etcd-tier/history.ts).
 * Reads only; every part that cannot be read says why instead of failing the whole answer.
 *
 * The clock against etcd: etcd answers its HTTP endpoints with a `Date` header (whole seconds,
 * truncated), so the server's time lies in [Date, Date + 1 s). The skew is this node's clock at the
 * middle of the round trip minus the middle of that second; its resolution is half a second plus
 * half the round trip. Leases and grace periods are measured on each node's own clock, so a skew
 * of seconds is worth fixing, not one of milliseconds.
 */
import { readFileSync } from 'node:fs';
import { defined } from '../../core/defined.ts';
import { nodeHttp } from '../../core/node-http.ts';
import { dirname, resolve } from 'node:path';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { CniConfigStatus, ContainerdStatus, MetricsEndpointStatus } from '../../api/status.ts';
import type { DoctorFacts } from '../../api/doctor.ts';
import type { ReservationsReport } from '../../api/protocol.ts';
import type { NodeLocalConfig } from '../../cni/node-local.ts';
import type { NetnsObserver } from '../../sources/netns.ts';
import type { Store, StoreHistory } from '../../store/store.ts';
import type { AgentOptions } from '../settings/options.ts';
import type { ApiRequestRate } from '../../store/kubernetes/api-requests.ts';
import type { EtcdRequestRate } from '../../store/etcd-tier/etcd-requests.ts';

export interface DoctorFactsDeps {
  readonly options: AgentOptions;
  readonly store: Store;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly version: string;
  readonly containerd?: (() => ContainerdStatus) | undefined;
  readonly metrics?: () => MetricsEndpointStatus;
  readonly cniConfig?: () => CniConfigStatus;
  /** On a cluster store: why this node does not allocate now. */
  readonly clusterProblem?: () => string | undefined;
  /** Present when only node-local configs are served: the config derived from the node's own CIDR, if any. */
  readonly nodeLocalOnly?: () => NodeLocalConfig | undefined;
  /** The reservations as watched (reservation-reports.ts), when they are. */
  readonly reservations?: () => Promise<ReservationsReport>;
  /** The WarrenPools the agent watches, when it does (the kubernetes store). */
  readonly warrenPools?: () => DoctorFacts['warrenPools'];
  /** The agent's requests to the Kubernetes API server, when it talks to one. */
  readonly kubeApi?: (() => ApiRequestRate) | undefined;
  /** The agent's requests to etcd, on the etcd store. */
  readonly etcdApi?: (() => EtcdRequestRate) | undefined;
}

/** What doctor judges of the reservations: a range held back whole, entries that reserve nothing. */
async function reservationFacts(
  report: (() => Promise<ReservationsReport>) | undefined,
): Promise<DoctorFacts['reservations']> {
  if (report === undefined) return undefined;
  const { watched, reservations } = await report();
  if (!watched) return undefined;
  return {
    count: reservations.length,
    wholeRanges: reservations.flatMap((r) =>
      r.covers.filter((c) => c.whole).map((c) => ({ reservation: r.name, pool: c.pool, subnet: c.subnet })),
    ),
    malformed: reservations.flatMap((r) => r.malformed.map((m) => `${r.name}: ${m}`)),
  };
}

/** How long the clock measurement waits for etcd. */
const SKEW_TIMEOUT_MS = 2_000;

export async function doctorFacts(d: DoctorFactsDeps): Promise<DoctorFacts> {
  const o = d.options;
  let error: string | undefined;
  try {
    await d.store.ping();
  } catch (e) {
    error = messageOf(e);
  }
  const containerd = d.containerd?.();
  const clusterProblem = d.clusterProblem?.();
  const metrics = d.metrics?.();
  const cniConfig = d.cniConfig?.();
  const derived = d.nodeLocalOnly?.();
  const warrenPools = d.warrenPools?.();
  const endpoint = o.etcdEndpoints[0];
  // An unreachable store would only fail this too, after another wait.
  const cluster = d.store.cluster;
  const history = cluster?.history === undefined || error !== undefined ? undefined : await historyOf(cluster.history);
  const legacy =
    cluster?.legacyLeft === undefined || error !== undefined
      ? undefined
      : await cluster.legacyLeft().catch(() => undefined);
  const legacyShown = legacy !== undefined && (Object.keys(legacy.blocks).length > 0 || legacy.ranges > 0);
  const reservations = error === undefined ? await reservationFacts(d.reservations) : undefined;
  return {
    node: o.nodeName,
    version: d.version,
    pid: process.pid,
    socket: o.socket,
    stateDir: o.stateDir,
    journalDir: o.journalDir,
    cniConfDir: o.cniConfDir,
    manageCniConfig: o.manageCniConfig,
    ...defined({ metrics }),
    ...(cniConfig === undefined
      ? {}
      : {
          cniConfig: {
            state: cniConfig.state,
            output: cniConfig.output,
            ...defined({ problem: cniConfig.problem }),
          },
        }),
    ...defined({ pluginsDir: o.pluginsDir, reservations }),
    ...(d.nodeLocalOnly === undefined ? {} : { nodeLocalOnly: derived === undefined ? {} : { derived } }),
    ...defined({ warrenPools, kubeApi: d.kubeApi?.(), etcdApi: d.etcdApi?.() }),
    store: {
      kind: o.store,
      description: d.store.description,
      healthy: error === undefined,
      ...defined({ error }),
      ...storeSettings(o),
      ...defined({ clusterProblem, history }),
      ...(legacyShown ? { legacy } : {}),
    },
    netns: d.observer.directories(),
    recordedNetns: error === undefined ? await recordedNetns(d) : [],
    ...(containerd === undefined
      ? {}
      : {
          containerd: {
            socket: containerd.socket,
            state: containerd.state,
            ...defined({ lastError: containerd.lastError }),
          },
        }),
    ...(o.store === 'etcd' && endpoint !== undefined ? { clockSkew: await etcdClockSkew(endpoint, o, d.clock) } : {}),
  };
}

/** etcd's history and room, or why they could not be read. */
async function historyOf(history: StoreHistory): Promise<NonNullable<DoctorFacts['store']['history']>> {
  try {
    return await history.read();
  } catch (e) {
    return { error: messageOf(e) };
  }
}

/** What doctor shows of the store's settings: its durability, or where the cluster's records are. */
function storeSettings(o: AgentOptions): Partial<DoctorFacts['store']> {
  switch (o.store) {
    case 'sqlite':
      return { synchronous: o.synchronous };
    case 'etcd':
      // The node's own addresses are in its SQLite file, as on Kubernetes.
      return { synchronous: o.synchronous, etcdEndpoints: o.etcdEndpoints };
    case 'kubernetes':
      // The node's own addresses are in its SQLite file, as on a store of one node.
      return { synchronous: o.synchronous, kubeNamespace: o.kubeNamespace };
    default:
      return ((never: never) => never)(o.store);
  }
}

/** This node's allocations by the netns directory their recorded namespace lies in. */
async function recordedNetns(d: DoctorFactsDeps): Promise<DoctorFacts['recordedNetns']> {
  const dirs = d.options.netnsDirs.map((dir) => resolve(dir));
  const byDir = new Map<string, { allocations: number; example: string }>();
  let outside: { allocations: number; example: string } | undefined;
  let unrecorded = 0;
  for (const a of await d.store.list({ node: d.options.nodeName })) {
    // A bookkeeping record (ipam/bookkeeping.ts) has no namespace to record: it is no container's.
    if (isBookkeeping(a)) continue;
    if (a.netns === undefined || a.netns === '') {
      unrecorded += 1;
      continue;
    }
    const parent = dirname(resolve(a.netns));
    const dir = dirs.find((x) => x === parent);
    if (dir === undefined) {
      outside =
        outside === undefined
          ? { allocations: 1, example: a.netns }
          : { ...outside, allocations: outside.allocations + 1 };
    } else {
      const entry = byDir.get(dir);
      byDir.set(
        dir,
        entry === undefined ? { allocations: 1, example: a.netns } : { ...entry, allocations: entry.allocations + 1 },
      );
    }
  }
  return [
    ...[...byDir].map(([dir, e]) => ({ dir, ...e })),
    ...(outside === undefined ? [] : [outside]),
    ...(unrecorded === 0 ? [] : [{ unrecorded: true, allocations: unrecorded }]),
  ];
}

/** This node's clock against the etcd member at `endpoint`; see the module header. */
export async function etcdClockSkew(
  endpoint: string,
  o: Pick<AgentOptions, 'etcdCa' | 'etcdCert' | 'etcdKey'>,
  clock: Clock,
): Promise<NonNullable<DoctorFacts['clockSkew']>> {
  try {
    const url = new URL('/version', endpoint);
    const tls = url.protocol === 'https:' ? tlsOf(o) : {};
    const sent = clock.now();
    const date = await new Promise<string>((resolveDate, reject) => {
      // node:https (and TLS) only when asked: an import would load them at every agent start.
      const send =
        url.protocol === 'https:'
          ? (process.getBuiltinModule('node:https') as typeof import('node:https')).request
          : nodeHttp.request;
      const request = send(url, { method: 'GET', timeout: SKEW_TIMEOUT_MS, ...tls }, (res) => {
        res.resume();
        const header = res.headers.date;
        if (header === undefined) reject(new Error(`${endpoint} answered without a Date header`));
        else resolveDate(header);
      });
      request.on('timeout', () =>
        request.destroy(new Error(`${endpoint} did not answer within ${SKEW_TIMEOUT_MS} ms`)),
      );
      request.on('error', reject);
      request.end();
    });
    const received = clock.now();
    const server = Date.parse(date);
    if (Number.isNaN(server))
      throw new Error(`${endpoint} answered a Date that is not a date: ${JSON.stringify(date)}`);
    const roundTrip = received - sent;
    return {
      endpoint,
      skewMs: Math.round((sent + received) / 2 - (server + 500)),
      resolutionMs: Math.round(500 + roundTrip / 2),
    };
  } catch (error) {
    return { endpoint, error: `could not read etcd's clock: ${messageOf(error)}` };
  }
}

function tlsOf(o: Pick<AgentOptions, 'etcdCa' | 'etcdCert' | 'etcdKey'>): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  return {
    ...(o.etcdCa === undefined ? {} : { ca: readFileSync(o.etcdCa) }),
    ...(o.etcdCert === undefined ? {} : { cert: readFileSync(o.etcdCert) }),
    ...(o.etcdKey === undefined ? {} : { key: readFileSync(o.etcdKey) }),
  };
}
