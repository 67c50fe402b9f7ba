/**
 * The rows of the settings table (settings/table.ts) that choose the store and reach it: its kind,
 * etcd's endpoints, prefix and TLS files, and the namespace of the Kubernetes store's Leases; and
 * the rows of the chores on a shared store (giving back empty blocks, renewing this node's
 * announcement). The table lists each group where its rows sit.
 *
 * The store's default follows the Kubernetes source: with `--kubernetes on` (the DaemonSet) the
 * pools are shared through the Kubernetes API, so that no default hands one address out on two
 * nodes; without it, one node's SQLite file.
 */
import type { StoreKind } from '../../store/store.ts';
import * as read from './readers.ts';
import type { Row } from './row.ts';

/** The namespace of the Kubernetes store's Leases when neither a flag nor the pod's own says. */
export const DEFAULT_KUBE_NAMESPACE = 'warren';

export const STORE_ROWS = {
  store: {
    flag: 'store',
    env: 'WARREN_STORE',
    about:
      'sqlite (embedded, one node), kubernetes (pools shared by the nodes through the Kubernetes API) or etcd ' +
      '(pools shared through an etcd cluster)',
    default: {
      says: 'kubernetes with --kubernetes on, sqlite otherwise',
      of: (c) => (c.kubernetes?.() === true ? 'kubernetes' : 'sqlite'),
    },
    read: read.oneOf<StoreKind>(['sqlite', 'kubernetes', 'etcd']),
  },
  etcdEndpoints: {
    flag: 'etcd-endpoints',
    env: 'WARREN_ETCD_ENDPOINTS',
    about: 'comma-separated etcd client URLs (http:// or https://); required with --store etcd',
    read: read.etcdEndpoints,
    unset: [],
  },
  etcdPrefix: {
    flag: 'etcd-prefix',
    env: 'WARREN_ETCD_PREFIX',
    about: 'key prefix in etcd',
    default: '/warren/',
    read: read.etcdPrefix,
  },
  etcdCa: {
    flag: 'etcd-ca',
    env: 'WARREN_ETCD_CA',
    about: "PEM file of the CA that signed the etcd servers' certificates",
    read: read.path,
  },
  etcdCert: {
    flag: 'etcd-cert',
    env: 'WARREN_ETCD_CERT',
    about: 'PEM client certificate for etcd (mutual TLS), with --etcd-key',
    read: read.path,
  },
  etcdKey: { flag: 'etcd-key', env: 'WARREN_ETCD_KEY', about: 'PEM private key of --etcd-cert', read: read.path },
} satisfies Record<string, Row<unknown>>;

/** The chores on a shared store, listed after the rows that choose and reach it. */
export const SHARED_STORE_CHORE_ROWS = {
  blockGraceSeconds: {
    flag: 'block-grace',
    env: 'WARREN_BLOCK_GRACE',
    about: 'seconds an empty block stays with this node before it is given back',
    default: '300',
    read: read.seconds(0),
  },
  publishAhead: {
    flag: 'publish-ahead',
    env: 'WARREN_PUBLISH_AHEAD',
    about:
      'addresses of each block a publication announces this node hands out next: an ADD taking one needs no write ' +
      '(a node whose file went back to before the publication keeps them until accepted); 0 for none',
    default: '16',
    read: read.wholeNumber(256),
  },
  publishSettleSeconds: {
    flag: 'publish-settle',
    env: 'WARREN_PUBLISH_SETTLE',
    about:
      "seconds a block's change its publication covers (an announced address taken, an address released) waits for " +
      "its write: the cluster's figures lag by up to this; 0 writes every change at the next run",
    default: '600',
    read: read.seconds(0),
  },
  upkeepIntervalSeconds: {
    flag: 'upkeep-interval',
    env: 'WARREN_UPKEEP_INTERVAL',
    about:
      "seconds between the cluster chores on a shared store (renewing this node's announcement, giving back empty " +
      'blocks), apart from the reconcile passes',
    default: '10',
    read: read.seconds(0.05),
  },
} satisfies Record<string, Row<unknown>>;

/** Listed beside --kubeconfig, whose credentials the Kubernetes store uses. */
export const KUBE_NAMESPACE_ROW = {
  kubeNamespace: {
    flag: 'kube-namespace',
    env: 'WARREN_KUBE_NAMESPACE',
    about:
      "namespace of the agents' Leases with --store kubernetes (liveness, cluster chores); the store's other " +
      'records are cluster-wide',
    default: {
      says: `$POD_NAMESPACE (the DaemonSet's, from the downward API), else ${DEFAULT_KUBE_NAMESPACE}`,
      of: (c) => c.env.POD_NAMESPACE || DEFAULT_KUBE_NAMESPACE,
    },
    read: read.kubeNamespace,
  },
} satisfies Record<string, Row<unknown>>;
