/**
 * The store the options choose: what the agent knows of it from them, and opening it.
 *
 * What the agent knows of its store comes from the options (`--store`), never from asking the
 * store object what it is: which kind it runs on (the CNI service refuses a network asking for
 * another), whether nodes share it (the cluster chores, blocks, judging only this node's
 * allocations), and which database file it opens itself (locked against a second agent, removed
 * when the node is handed back): SQLite's, and on Kubernetes and etcd too, where it holds the
 * node's own addresses beside the cluster tier (one rule: --database). A store handed to the
 * agent instead (tests) comes with its kind stated, and is never a file of the agent's own.
 */
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { SqliteStore } from '../../store/sqlite/store.ts';
import type { PublishedView } from '../../store/cluster.ts';
import type { Membership, Store, StoreKind } from '../../store/store.ts';
import type { AgentOptions } from './options.ts';
import type { ApiRequestCounter } from '../../store/kubernetes/api-requests.ts';
import type { EtcdRequestCounter } from '../../store/etcd-tier/etcd-requests.ts';

export interface StoreFacts {
  readonly kind: StoreKind;
  /** Shared by the nodes of a cluster (Kubernetes, etcd); a store of one node (SQLite) is not. */
  readonly shared: boolean;
  /**
   * The SQLite database file the agent opens itself: the store on SQLite, the node's own addresses
   * on Kubernetes and etcd (their cluster tier holds only claims and what is published); undefined
   * for a store handed to it.
   */
  readonly database?: string;
}

/** A store handed to the agent instead of the one its options name, and what kind it is. */
export interface StatedStore extends OpenedStore {
  readonly kind: StoreKind;
}

/** A store as opened, with the published view of every node's allocations when it keeps one (Kubernetes, etcd). */
export interface OpenedStore {
  readonly store: Store;
  readonly published?: PublishedView;
}

/** The facts of the store the options name, or of `stated`, the store handed to the agent instead. */
export function storeFacts(o: Pick<AgentOptions, 'store' | 'database'>, stated?: StatedStore): StoreFacts {
  const kind = stated?.kind ?? o.store;
  const own = stated === undefined;
  return { kind, shared: kind !== 'sqlite', ...(own ? { database: o.database } : {}) };
}

/**
 * The membership of a store the facts say is shared; undefined for one that is not. A shared
 * store without one is a wiring mistake (a test's stated kind that its store does not fit).
 */
export function membershipOf(store: Store, facts: StoreFacts): Membership | undefined {
  if (!facts.shared) return undefined;
  if (store.cluster === undefined) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `the ${facts.kind} store ${store.description} is shared by nodes but keeps no membership`,
    );
  }
  return store.cluster.membership;
}

/** What opening a store needs besides the options. */
export interface StoreOpening {
  readonly clock: Clock;
  /** The cluster store's identity when this node last announced itself there (cluster/record.ts). */
  readonly identity?: string;
  /**
   * Told what the cluster store notices (etcd: a lost lease, a store that is no longer the one it
   * was; Kubernetes: a block object of this node's that vanished).
   */
  readonly notice: (message: string) => void;
  /** Told what is logged at debug (the cluster store: an outcome a check begun before an accept dropped). */
  readonly debug?: (message: string) => void;
  /** Told of every request to the Kubernetes API server, and the User-Agent they carry (api-requests.ts). */
  readonly kubeRequests?: ApiRequestCounter;
  /** Told of every request to etcd (etcd-requests.ts). */
  readonly etcdRequests?: EtcdRequestCounter;
  readonly userAgent?: string;
}

/**
 * Opens the store the options name: SQLite's file; or the two-tier store on Kubernetes or etcd (the
 * node's SQLite file beside the cluster tier, started here: its publication and claim checks run
 * from now until it is closed). The clients of the cluster stores are loaded only when named.
 */
export async function openStore(o: AgentOptions, opening: StoreOpening): Promise<OpenedStore> {
  switch (o.store) {
    case 'sqlite':
      return { store: sqliteOf(o, opening) };
    case 'kubernetes':
      return openKubernetes(o, opening);
    case 'etcd':
      return openEtcd(o, opening);
    default:
      return ((never: never) => never)(o.store);
  }
}

function sqliteOf(o: AgentOptions, opening: StoreOpening): SqliteStore {
  const busyTimeoutMs = o.dbBusyTimeoutSeconds * 1000;
  return new SqliteStore({ path: o.database, synchronous: o.synchronous, clock: opening.clock, busyTimeoutMs });
}

/**
 * The two-tier store on the Kubernetes API, with the credentials of --kubeconfig or the pod's
 * service account whether the pod source is on or not: refused, naming what is missing, without.
 */
async function openKubernetes(o: AgentOptions, opening: StoreOpening): Promise<OpenedStore> {
  const [{ loadKubeConfig }, { openKubeTier }, { TieredStore }, { claimAgain }] = await Promise.all([
    import('../../sources/kubernetes/kubeconfig.ts'),
    import('../../store/kubernetes/tier.ts'),
    import('../../store/tiered/store.ts'),
    import('../../store/tiered/claim-again.ts'),
  ]);
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  try {
    kubeConfig = loadKubeConfig(o.kubeconfig);
  } catch (error) {
    throw new WarrenError('INVALID_CONFIG', `--store kubernetes needs Kubernetes credentials: ${messageOf(error)}`, {
      cause: error,
    });
  }
  const { clock, notice } = opening;
  const local = sqliteOf(o, opening);
  try {
    const tier = await openKubeTier({
      kubeConfig,
      namespace: o.kubeNamespace,
      leaseSeconds: Math.ceil(o.nodeLeaseSeconds),
      pingSeconds: o.nodePingSeconds,
      clock,
      notice,
      ...defined({
        identity: opening.identity,
        requests: opening.kubeRequests,
        userAgent: opening.userAgent,
        debug: opening.debug,
      }),
    });
    // Before anything is published: an API server that lost its data halts the tier here. One that
    // cannot be reached now is checked by the upkeep, before this node allocates (cluster/upkeep.ts).
    await tier
      .verifyStore()
      .catch((error: unknown) => notice(`could not check the store's identity yet: ${messageOf(error)}`));
    const halted = tier.membership.halted();
    if (halted !== undefined) notice(halted);
    // A clean stop withdraws this node's Lease at once, as the etcd store's close withdraws its
    // announcement: otherwise the node stays listed alive, and its chores held, until it lapses.
    const store = new (class extends TieredStore {
      override async close(): Promise<void> {
        await this.cluster.membership
          .withdraw()
          .catch((error: unknown) =>
            notice(`could not withdraw this node's Lease (it lapses by itself): ${messageOf(error)}`),
          );
        await super.close();
      }
    })({ local, tier, node: o.nodeName, clock, notice, ...publishing(o) });
    // What `warren store accept` writes back after the API server lost its data: this node's claims.
    tier.onAccept((node) => claimAgain(store, local, tier, node));
    store.start();
    return { store, published: (filter, page) => tier.published(filter, page) };
  } catch (error) {
    await local.close();
    throw error;
  }
}

/** How a two-tier store publishes (tiered/publisher.ts): what it announces, how long a covered change waits. */
function publishing(o: AgentOptions): { publishAhead: number; publishSettleMs: number } {
  return { publishAhead: o.publishAhead, publishSettleMs: o.publishSettleSeconds * 1000 };
}

/** The two-tier store on etcd: the node's SQLite file beside the etcd tier, under --etcd-prefix. */
async function openEtcd(o: AgentOptions, opening: StoreOpening): Promise<OpenedStore> {
  const { openEtcdTiered } = await import('../../store/etcd-tier/tiered.ts');
  const tls = {
    ...defined({ ca: o.etcdCa, cert: o.etcdCert, key: o.etcdKey }),
  };
  const local = sqliteOf(o, opening);
  try {
    const store = await openEtcdTiered({
      local,
      node: o.nodeName,
      clock: opening.clock,
      endpoints: o.etcdEndpoints,
      prefix: o.etcdPrefix,
      leaseSeconds: Math.ceil(o.nodeLeaseSeconds),
      notice: opening.notice,
      ...publishing(o),
      ...defined({ identity: opening.identity, debug: opening.debug, requests: opening.etcdRequests }),
      ...(Object.keys(tls).length === 0 ? {} : { tls }),
    });
    store.start();
    const tier = store.etcd;
    return { store, published: (filter, page) => tier.published(filter, page) };
  } catch (error) {
    await local.close();
    throw error;
  }
}

/**
 * Where the cluster record (cluster/record.ts) files what it saw of this store: etcd's key prefix,
 * or the Kubernetes store's Lease namespace; undefined for a store of one node.
 */
export function clusterRecordKey(o: Pick<AgentOptions, 'store' | 'etcdPrefix' | 'kubeNamespace'>): string | undefined {
  switch (o.store) {
    case 'sqlite':
      return undefined;
    case 'etcd':
      return o.etcdPrefix;
    case 'kubernetes':
      return `kubernetes:${o.kubeNamespace}`;
    default:
      return ((never: never) => never)(o.store);
  }
}
