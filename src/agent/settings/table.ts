/**
 * Agent settings: each one row of one table (`SETTINGS`), its only home: option key, flag,
 * environment variable, help, default and reader (settings/readers.ts). `--help` is made of the
 * rows, the agent's options type is derived from them, and `resolveAgentOptions` walks them
 * (settings/options.ts). Defaults: as root the system paths; as another user the
 * first state directory the agent can write (XDG state dir, ~/.local/state/warren, ./.warren), so
 * it starts anywhere. The journal's default never follows --state-dir as root: the plugin writes
 * to DEFAULT_JOURNAL_DIR unless a network config says otherwise, and cannot know the agent's flags.
 *
 * The socket's rule (`agentSocket`) is shared with the CLI, which must find a running agent
 * without creating anything: it looks for the state directory where the agent makes it
 * (settings/state-dir.ts).
 */
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { DEFAULT_MAX_RETRIES } from '../../core/rate-limited-queue.ts';
import { DEFAULT_JOURNAL_DIR } from '../../cni/journal-dir.ts';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import { DEFAULT_NETNS_DIRS } from '../../sources/netns.ts';
import { DEFAULT_CONTAINERD_SOCKET } from '../../sources/containerd/socket.ts';
import * as read from './readers.ts';
import { type DefaultContext, type Row, defaultOf, givenText, helpOf } from './row.ts';
import { DEFAULT_STATE_DIR, defaultStateDir } from './state-dir.ts';
import { KUBE_NAMESPACE_ROW, STORE_ROWS } from './store-rows.ts';

/** The default metrics address: loopback only, Prometheus' node-agent port range. */
export const DEFAULT_METRICS_ADDRESS = '127.0.0.1:9464';

/** Where runtimes look for CNI configs unless told otherwise. */
export const DEFAULT_CNI_CONF_DIR = '/etc/cni/net.d';

/** The rows, in the order --help lists them; a row's key is the option's. */
const TABLE = {
  stateDir: {
    flag: 'state-dir',
    env: 'WARREN_STATE_DIR',
    about: 'state directory (database; socket and journal too when not root)',
    default: {
      says:
        `${DEFAULT_STATE_DIR} as root, otherwise the first writable of $XDG_STATE_HOME/warren, ` +
        '~/.local/state/warren, ./.warren',
      of: (c) => defaultStateDir(c.env, c.uid, c.cwd),
    },
    read: read.path,
  },
  socket: {
    flag: 'socket',
    env: 'WARREN_SOCKET',
    about: 'agent API socket',
    default: {
      says: `${DEFAULT_SOCKET} as root, <state-dir>/warren.sock otherwise`,
      of: (c) => (c.uid === 0 ? DEFAULT_SOCKET : join(c.stateDir(), 'warren.sock')),
    },
    read: read.socketPath,
  },
  database: {
    flag: 'database',
    env: 'WARREN_DATABASE',
    about: 'SQLite database file',
    default: { says: '<state-dir>/warren.db', of: (c) => join(c.stateDir(), 'warren.db') },
    read: read.path,
  },
  nodeName: {
    flag: 'node-name',
    env: 'WARREN_NODE_NAME',
    about: 'name this node records on its allocations',
    default: { says: 'the host name', of: () => hostname() },
    read: read.verbatim,
  },
  synchronous: {
    flag: 'sync',
    env: 'WARREN_SYNC',
    about: 'FULL (survives power loss) or NORMAL (survives a process crash)',
    default: 'FULL',
    read: read.oneOf(['FULL', 'NORMAL'], (text) => text.toUpperCase()),
  },
  logLevel: {
    flag: 'log-level',
    env: 'WARREN_LOG_LEVEL',
    about: 'debug, info, warn or error',
    default: 'info',
    read: read.oneOf(['debug', 'info', 'warn', 'error']),
  },
  journalDir: {
    flag: 'journal-dir',
    env: 'WARREN_JOURNAL_DIR',
    about: 'missed-delete journal',
    default: {
      says:
        `${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says (where the plugin writes unless a config names ` +
        'ipam.journal_dir), <state-dir>/journal as another user ' +
        '(network configs must then name it in ipam.journal_dir)',
      of: (c) => (c.uid === 0 ? DEFAULT_JOURNAL_DIR : join(c.stateDir(), 'journal')),
    },
    read: read.path,
  },
  netnsDirs: {
    flag: 'netns-dirs',
    env: 'WARREN_NETNS_DIRS',
    about: 'comma-separated netns directories the agent may judge, matched by real path; empty for none',
    default: DEFAULT_NETNS_DIRS.join(','),
    emptyIsAValue: true,
    read: read.directories,
  },
  reconcileIntervalSeconds: {
    flag: 'reconcile-interval',
    env: 'WARREN_RECONCILE_INTERVAL',
    about: 'seconds between reconcile passes',
    default: '10',
    read: read.seconds(0.05),
  },
  netnsGraceSeconds: {
    flag: 'netns-grace',
    env: 'WARREN_NETNS_GRACE',
    about: 'seconds before a new allocation is judged by its namespace',
    default: '60',
    read: read.seconds(0),
  },
  ...STORE_ROWS,
  blockGraceSeconds: {
    flag: 'block-grace',
    env: 'WARREN_BLOCK_GRACE',
    about: 'seconds an empty block stays with this node before it is given back',
    default: '300',
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
  containerd: {
    flag: 'containerd',
    env: 'WARREN_CONTAINERD',
    about: 'on: release what containers deleted in containerd held, or off',
    default: 'on',
    read: read.onOff,
  },
  containerdSocket: {
    flag: 'containerd-socket',
    env: 'WARREN_CONTAINERD_SOCKET',
    about: "containerd's gRPC socket",
    default: DEFAULT_CONTAINERD_SOCKET,
    read: read.path,
  },
  containerdNamespaces: {
    flag: 'containerd-namespaces',
    env: 'WARREN_CONTAINERD_NAMESPACES',
    about: 'comma-separated containerd namespaces to follow',
    default: 'k8s.io',
    read: read.containerdNamespaces,
  },
  containerdGraceSeconds: {
    flag: 'containerd-grace',
    env: 'WARREN_CONTAINERD_GRACE',
    about: 'seconds a new allocation is spared by a resync with containerd',
    default: '60',
    read: read.seconds(0),
  },
  eventRetrySeconds: {
    flag: 'event-retry',
    env: 'WARREN_EVENT_RETRY',
    about: 'seconds before a failed container event is retried, doubling each time',
    default: '1',
    read: read.seconds(0.01),
  },
  eventRetryMaxSeconds: {
    flag: 'event-retry-max',
    env: 'WARREN_EVENT_RETRY_MAX',
    about: 'longest wait between retries of a failed container event, seconds',
    default: '300',
    read: read.seconds(0.01),
  },
  kubernetes: {
    flag: 'kubernetes',
    env: 'WARREN_KUBERNETES',
    about: "on: watch this node's pods in Kubernetes and release what gone pods held (Events on the pod), or off",
    default: 'off',
    read: read.onOff,
  },
  kubeconfig: {
    flag: 'kubeconfig',
    env: 'WARREN_KUBECONFIG',
    about: 'kubeconfig file for --kubernetes on and --store kubernetes; without it, the in-cluster service account',
    read: read.path,
  },
  ...KUBE_NAMESPACE_ROW,
  podGoneGraceSeconds: {
    flag: 'pod-gone-grace',
    env: 'WARREN_POD_GONE_GRACE',
    about:
      'seconds a gone pod keeps its addresses while its network namespace cannot be proven gone ' +
      "(a force-deleted pod's sandbox may still run)",
    default: '600',
    read: read.seconds(0),
  },
  stickyReleaseGraceSeconds: {
    flag: 'sticky-release-grace',
    env: 'WARREN_STICKY_RELEASE_GRACE',
    about:
      "seconds a StatefulSet ordinal's sticky address is kept after the StatefulSet stops covering the " +
      'ordinal (scaled below it, or deleted), so a scale-down undone in time keeps it',
    default: '300',
    read: read.seconds(0),
  },
  podReleaseRetries: {
    flag: 'pod-release-retries',
    env: 'WARREN_POD_RELEASE_RETRIES',
    about: "retries of a gone pod's release before a Warning Event on it",
    // The work queue's own default (core cannot read this table), so the two cannot differ.
    default: String(DEFAULT_MAX_RETRIES),
    read: read.wholeNumber(100),
  },
  warmUpRounds: {
    flag: 'warm-up',
    env: 'WARREN_WARM_UP',
    about:
      'ADD/DEL rounds the agent answers itself on a throwaway in-memory store, in process, beside serving from ' +
      'its start, so the first pods do not wait for V8 to compile the ADD path; 0 for none',
    // Enough for V8 to have compiled and optimised the ADD path (BENCHMARKS.md); about 0.2 s.
    default: '150',
    read: read.wholeNumber(10_000),
  },
  gcGraceSeconds: {
    flag: 'gc-grace',
    env: 'WARREN_GC_GRACE',
    about: "seconds a new allocation is spared by CNI GC (ADDs that raced the runtime's list)",
    default: '60',
    read: read.seconds(0),
  },
  dbBusyTimeoutSeconds: {
    flag: 'db-busy-timeout',
    env: 'WARREN_DB_BUSY_TIMEOUT',
    about: 'seconds a call waits while another process holds the database, then answers try-again (CNI 11)',
    default: '5',
    read: read.seconds(0),
  },
  manageCniConfig: {
    flag: 'manage-cni-config',
    env: 'WARREN_MANAGE_CNI_CONFIG',
    about:
      "on: write Warren's config into the CNI conf dir, derived from the node's primary config and kept in step " +
      'with it, or off',
    default: 'off',
    read: read.onOff,
  },
  cniConfDir: {
    flag: 'cni-conf-dir',
    env: 'WARREN_CNI_CONF_DIR',
    about: "the runtime's CNI conf dir",
    default: DEFAULT_CNI_CONF_DIR,
    read: read.path,
  },
  primaryConfig: {
    flag: 'primary-config',
    env: 'WARREN_PRIMARY_CONFIG',
    about:
      'the primary CNI config to derive from (a path, or a name in the conf dir); without it, the lexically ' +
      "first config that is not Warren's",
    read: read.verbatim,
  },
  primaryWaitSeconds: {
    flag: 'primary-wait',
    env: 'WARREN_PRIMARY_WAIT',
    about: 'seconds to wait for a primary config before reporting there is none',
    default: '300',
    read: read.seconds(0),
  },
  readinessIndicatorFile: {
    flag: 'readiness-indicator-file',
    env: 'WARREN_READINESS_INDICATOR_FILE',
    about:
      "while this file is missing the agent is not ready (CNI STATUS 50, ADD 11); Warren's config stays first " +
      '(fails closed)',
    read: read.path,
  },
  cniVersionMax: {
    flag: 'cni-version-max',
    env: 'WARREN_CNI_VERSION_MAX',
    about: "newest cniVersion the runtime accepts (containerd 1.6 and 1.7: 1.0.0); Warren's config is capped at it",
    default: '1.0.0',
    read: read.cniVersion,
  },
  cleanupConfigOnExit: {
    flag: 'cleanup-config-on-exit',
    env: 'WARREN_CLEANUP_CONFIG_ON_EXIT',
    about:
      "on: remove Warren's config when the agent stops cleanly and holds no address of its network (else it " +
      'stays; `warren uninstall` hands a node back), or off',
    default: 'off',
    read: read.onOff,
  },
  pluginsDir: {
    flag: 'plugins-dir',
    env: 'WARREN_PLUGINS_DIR',
    about:
      'directory, watched recursively, where plugins such as runtime adapters register with a unix socket ' +
      "(kubelet's handshake); empty turns the registry off",
    default: {
      says: `plugins beside the agent socket (${join(dirname(DEFAULT_SOCKET), 'plugins')} as root)`,
      // Beside the socket actually used: a private socket gets a private registry.
      of: (c) => pluginsDirBeside(c.socket?.() ?? agentSocket(undefined, c)),
    },
    emptyIsAValue: true,
    read: read.directoryOrOff,
  },
  metricsAddress: {
    flag: 'metrics-address',
    env: 'WARREN_METRICS_ADDRESS',
    about:
      'host:port where the health endpoints (/livez, /readyz), Prometheus metrics (/metrics) and the dashboard (/) ' +
      'are served over HTTP, apart from the socket ([::1]:9464 for IPv6; port 0 picks a free one); empty turns all ' +
      'of them off',
    default: DEFAULT_METRICS_ADDRESS,
    emptyIsAValue: true,
    read: read.listenAddressOrOff,
  },
  nodeLeaseSeconds: {
    flag: 'node-lease',
    env: 'WARREN_NODE_LEASE',
    about: "seconds a stopped agent's node stays listed alive (etcd lease TTL, or the Kubernetes Lease's duration)",
    default: '10',
    read: read.seconds(2),
  },
} satisfies Record<string, Row<unknown>>;

/** The table's type: what settings/options.ts derives the options type from. */
export type Table = typeof TABLE;

/** The option key of every setting. */
export type SettingKey = keyof Table;

/** Every setting, in the order --help lists them, each with its help line. */
export const SETTINGS = Object.fromEntries(
  Object.entries(TABLE).map(([key, spec]) => [key, { ...spec, help: helpOf(spec) }]),
) as { readonly [K in SettingKey]: Table[K] & { readonly help: string } };

/** The option keys in the table's order. */
export const SETTING_KEYS = Object.keys(TABLE) as SettingKey[];

/** The text a flag or the environment gives a setting; undefined when neither does. */
export function givenSetting(
  key: SettingKey,
  flags: Partial<Record<SettingKey, string>>,
  env: NodeJS.ProcessEnv,
): string | undefined {
  return givenText(SETTINGS[key], flags[key], env);
}

/**
 * The agent's socket, one rule for the agent and for the CLI looking for it: --socket, else
 * WARREN_SOCKET, else the default (DEFAULT_SOCKET as root, <state-dir>/warren.sock otherwise).
 * Creates nothing: the context's `stateDir` is asked only when the default needs it, and is the
 * caller's to find (the agent makes its state directory, `defaultStateDir`; the CLI only looks
 * for one, `findStateDir`).
 */
export function agentSocket(flag: string | undefined, context: DefaultContext): string {
  return givenText(SETTINGS.socket, flag, context.env) ?? defaultOf(SETTINGS.socket, context);
}

/** The plugins directory that goes with an agent socket: `plugins` beside it. */
function pluginsDirBeside(socket: string): string {
  return join(dirname(socket), 'plugins');
}
