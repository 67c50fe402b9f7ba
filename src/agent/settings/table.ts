/**
 * Agent settings: every one a flag and an environment variable, and its default, in one table
 * (`SETTINGS`) from which both `--help` and `resolveAgentOptions` (settings/options.ts) read. Defaults
 * follow DESIGN.md: as root the system paths; as another user the first state directory the agent
 * can write (XDG state dir, ~/.local/state/warren, ./.warren), so it starts anywhere. The
 * journal's default never follows --state-dir as root: the plugin writes to DEFAULT_JOURNAL_DIR
 * unless a network config says otherwise, and cannot know the agent's flags.
 *
 * The socket's rule (`agentSocket`) is shared with the CLI, which must find a running agent
 * without creating anything: it looks for the state directory where the agent makes it
 * (settings/state-dir.ts).
 */
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { DEFAULT_MAX_RETRIES } from '../../core/rate-limited-queue.ts';
import { DEFAULT_JOURNAL_DIR } from '../../cni/journal-dir.ts';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import { DEFAULT_NETNS_DIRS } from '../../sources/netns.ts';
import { DEFAULT_CONTAINERD_SOCKET } from '../../sources/containerd/socket.ts';
import type { AgentOptions } from './options.ts';
import { DEFAULT_STATE_DIR, defaultStateDir } from './state-dir.ts';

/** The default metrics address: loopback only, Prometheus' node-agent port range. */
export const DEFAULT_METRICS_ADDRESS = '127.0.0.1:9464';

/** Where runtimes look for CNI configs unless told otherwise. */
export const DEFAULT_CNI_CONF_DIR = '/etc/cni/net.d';

/** What a default may depend on: who runs the agent, from where, and its state directory. */
export interface DefaultContext {
  readonly uid: number;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** The state directory chosen; asked only by the defaults that live in it. */
  readonly stateDir: () => string;
}

/** A default that depends on the context: what --help says it is, and the rule. */
export interface DefaultRule {
  readonly says: string;
  readonly of: (context: DefaultContext) => string;
}

/** One setting as the table states it. */
export interface SettingSpec {
  readonly flag: string;
  readonly env: string;
  /** What it is, for --help; the default is added from `default`. */
  readonly about: string;
  /**
   * The default, written as a flag would give it (so it passes the same parsing and checks), or
   * a rule; none when the setting is optional or required.
   */
  readonly default?: string | DefaultRule;
  /** An empty environment variable is a value (netns dirs: none), not an unset one. */
  readonly emptyIsAValue?: boolean;
}

/** One setting: its flag, its environment variable, its default and the help --help shows for it. */
export interface Setting extends SettingSpec {
  /** `about` and the default in words: the line of `warren agent --help`. */
  readonly help: string;
}

/** The help line of a setting, generated from its default. */
function helpOf(spec: SettingSpec): string {
  if (spec.default === undefined) return spec.about;
  return `${spec.about}; default ${typeof spec.default === 'string' ? spec.default : spec.default.says}`;
}

const TABLE = {
  stateDir: {
    flag: 'state-dir',
    env: 'WARREN_STATE_DIR',
    about: 'state directory (database; socket and journal too when not root)',
    default: {
      says: `${DEFAULT_STATE_DIR} as root, otherwise the first writable of $XDG_STATE_HOME/warren, ` + `~/.local/state/warren, ./.warren`,
      of: (c) => defaultStateDir(c.env, c.uid, c.cwd),
    },
  },
  socket: {
    flag: 'socket',
    env: 'WARREN_SOCKET',
    about: 'agent API socket',
    default: { says: `${DEFAULT_SOCKET} as root, <state-dir>/warren.sock otherwise`, of: (c) => (c.uid === 0 ? DEFAULT_SOCKET : join(c.stateDir(), 'warren.sock')) },
  },
  database: { flag: 'database', env: 'WARREN_DATABASE', about: 'SQLite database file', default: { says: '<state-dir>/warren.db', of: (c) => join(c.stateDir(), 'warren.db') } },
  nodeName: { flag: 'node-name', env: 'WARREN_NODE_NAME', about: 'name this node records on its allocations', default: { says: 'the host name', of: () => hostname() } },
  synchronous: { flag: 'sync', env: 'WARREN_SYNC', about: 'FULL (survives power loss) or NORMAL (survives a process crash)', default: 'FULL' },
  logLevel: { flag: 'log-level', env: 'WARREN_LOG_LEVEL', about: 'debug, info, warn or error', default: 'info' },
  journalDir: {
    flag: 'journal-dir',
    env: 'WARREN_JOURNAL_DIR',
    about: 'missed-delete journal',
    default: {
      says:
        `${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says (where the plugin writes unless a config ` + `names ipam.journal_dir), ` +
        '<state-dir>/journal as another user (network configs must then name it in ipam.journal_dir)',
      of: (c) => (c.uid === 0 ? DEFAULT_JOURNAL_DIR : join(c.stateDir(), 'journal')),
    },
  },
  netnsDirs: {
    flag: 'netns-dirs',
    env: 'WARREN_NETNS_DIRS',
    about: 'comma-separated netns directories the agent may judge, matched by real path; empty for none',
    default: DEFAULT_NETNS_DIRS.join(','),
    emptyIsAValue: true,
  },
  reconcileIntervalSeconds: { flag: 'reconcile-interval', env: 'WARREN_RECONCILE_INTERVAL', about: 'seconds between reconcile passes', default: '10' },
  netnsGraceSeconds: { flag: 'netns-grace', env: 'WARREN_NETNS_GRACE', about: 'seconds before a new allocation is judged by its namespace', default: '60' },
  store: { flag: 'store', env: 'WARREN_STORE', about: 'sqlite (embedded, one node) or etcd (pools shared by many nodes)', default: 'sqlite' },
  etcdEndpoints: { flag: 'etcd-endpoints', env: 'WARREN_ETCD_ENDPOINTS', about: 'comma-separated etcd client URLs (http:// or https://); required with --store etcd' },
  etcdPrefix: { flag: 'etcd-prefix', env: 'WARREN_ETCD_PREFIX', about: 'key prefix in etcd', default: '/warren/' },
  etcdCa: { flag: 'etcd-ca', env: 'WARREN_ETCD_CA', about: "PEM file of the CA that signed the etcd servers' certificates" },
  etcdCert: { flag: 'etcd-cert', env: 'WARREN_ETCD_CERT', about: 'PEM client certificate for etcd (mutual TLS), with --etcd-key' },
  etcdKey: { flag: 'etcd-key', env: 'WARREN_ETCD_KEY', about: 'PEM private key of --etcd-cert' },
  blocks: { flag: 'blocks', env: 'WARREN_BLOCKS', about: 'on: nodes claim blocks of a range (with --store etcd); off: one key per range (for comparison)', default: 'on' },
  blockGraceSeconds: { flag: 'block-grace', env: 'WARREN_BLOCK_GRACE', about: 'seconds an empty block stays with this node before it is given back', default: '300' },
  upkeepIntervalSeconds: {
    flag: 'upkeep-interval',
    env: 'WARREN_UPKEEP_INTERVAL',
    about: "seconds between the cluster chores on a shared store (renewing this node's announcement, giving back " + "empty blocks), apart from the reconcile passes",
    default: '10',
  },
  containerd: { flag: 'containerd', env: 'WARREN_CONTAINERD', about: 'on: release what containers deleted in containerd held, or off', default: 'on' },
  containerdSocket: { flag: 'containerd-socket', env: 'WARREN_CONTAINERD_SOCKET', about: "containerd's gRPC socket", default: DEFAULT_CONTAINERD_SOCKET },
  containerdNamespaces: { flag: 'containerd-namespaces', env: 'WARREN_CONTAINERD_NAMESPACES', about: 'comma-separated containerd namespaces to follow', default: 'k8s.io' },
  containerdGraceSeconds: { flag: 'containerd-grace', env: 'WARREN_CONTAINERD_GRACE', about: 'seconds a new allocation is spared by a resync with containerd', default: '60' },
  eventRetrySeconds: { flag: 'event-retry', env: 'WARREN_EVENT_RETRY', about: 'seconds before a failed container event is retried, doubling each time', default: '1' },
  eventRetryMaxSeconds: { flag: 'event-retry-max', env: 'WARREN_EVENT_RETRY_MAX', about: 'longest wait between retries of a failed container event, seconds', default: '300' },
  kubernetes: { flag: 'kubernetes', env: 'WARREN_KUBERNETES', about: "on: watch this node's pods in Kubernetes and release what gone pods held (Events on the pod), or off", default: 'off' },
  kubeconfig: { flag: 'kubeconfig', env: 'WARREN_KUBECONFIG', about: 'kubeconfig file for --kubernetes on; without it, the in-cluster service account' },
  podGoneGraceSeconds: {
    flag: 'pod-gone-grace',
    env: 'WARREN_POD_GONE_GRACE',
    about: "seconds a gone pod keeps its addresses while its network namespace cannot be proven gone (a " + "force-deleted pod's sandbox may still run)",
    default: '600',
  },
  // The work queue's own default (core cannot read this table), so the two cannot differ.
  podReleaseRetries: { flag: 'pod-release-retries', env: 'WARREN_POD_RELEASE_RETRIES', about: "retries of a gone pod's release before a Warning Event on it", default: String(DEFAULT_MAX_RETRIES) },
  warmUpRounds: {
    flag: 'warm-up',
    env: 'WARREN_WARM_UP',
    about: 'ADD/DEL rounds the agent answers itself on a throwaway in-memory store, in process, beside serving ' + 'from its start, so the first pods do not wait for V8 to compile the ADD path; 0 for none',
    // Enough for V8 to have compiled and optimised the ADD path (BENCHMARKS.md); about 0.2 s.
    default: '150',
  },
  gcGraceSeconds: { flag: 'gc-grace', env: 'WARREN_GC_GRACE', about: "seconds a new allocation is spared by CNI GC (ADDs that raced the runtime's list)", default: '60' },
  dbBusyTimeoutSeconds: {
    flag: 'db-busy-timeout',
    env: 'WARREN_DB_BUSY_TIMEOUT',
    about: 'seconds a call waits while another process holds the database, then answers try-again (CNI 11)',
    default: '5',
  },
  manageCniConfig: {
    flag: 'manage-cni-config',
    env: 'WARREN_MANAGE_CNI_CONFIG',
    about: "on: write Warren's config into the CNI conf dir, derived from the node's primary config and kept in " + "step with it, or off",
    default: 'off',
  },
  cniConfDir: { flag: 'cni-conf-dir', env: 'WARREN_CNI_CONF_DIR', about: "the runtime's CNI conf dir", default: DEFAULT_CNI_CONF_DIR },
  primaryConfig: { flag: 'primary-config', env: 'WARREN_PRIMARY_CONFIG', about: 'the primary CNI config to derive from (a path, or a name in the conf dir); without it, the lexically ' + "first config that is not Warren's" },
  primaryWaitSeconds: { flag: 'primary-wait', env: 'WARREN_PRIMARY_WAIT', about: 'seconds to wait for a primary config before reporting there is none', default: '300' },
  readinessIndicatorFile: {
    flag: 'readiness-indicator-file',
    env: 'WARREN_READINESS_INDICATOR_FILE',
    about: "while this file is missing the agent is not ready (CNI STATUS 50, ADD 11); Warren's config stays " + "first (fails closed)",
  },
  cniVersionMax: { flag: 'cni-version-max', env: 'WARREN_CNI_VERSION_MAX', about: "newest cniVersion the runtime accepts (containerd 1.6 and 1.7: 1.0.0); Warren's config is capped at it", default: '1.0.0' },
  cleanupConfigOnExit: { flag: 'cleanup-config-on-exit', env: 'WARREN_CLEANUP_CONFIG_ON_EXIT', about: "on: remove Warren's config when the agent stops cleanly and holds no address of its network (else it " + "stays; `warren uninstall` hands a node back), or off", default: 'off' },
  pluginsDir: {
    flag: 'plugins-dir',
    env: 'WARREN_PLUGINS_DIR',
    about: 'directory, watched recursively, where plugins such as runtime adapters register with a unix socket ' + "(kubelet's handshake); empty turns the registry off",
    default: { says: `plugins beside the agent socket (${join(dirname(DEFAULT_SOCKET), 'plugins')} as root)`, of: (c) => pluginsDirBeside(agentSocket(undefined, c)) },
    emptyIsAValue: true,
  },
  metricsAddress: {
    flag: 'metrics-address',
    env: 'WARREN_METRICS_ADDRESS',
    about: 'host:port where the health endpoints (/livez, /readyz), Prometheus metrics (/metrics) and the ' + 'dashboard (/) are served over HTTP, apart from the socket ([::1]:9464 for IPv6; port 0 picks a free ' + 'one); empty turns all of them off',
    default: DEFAULT_METRICS_ADDRESS,
    emptyIsAValue: true,
  },
  nodeLeaseSeconds: { flag: 'node-lease', env: 'WARREN_NODE_LEASE', about: "seconds a stopped agent's node stays listed alive (etcd lease TTL)", default: '10' },
} satisfies Record<keyof AgentOptions, SettingSpec>;

type Table = typeof TABLE;

/** Every setting, in the order --help lists them, each with its help line. */
export const SETTINGS = Object.fromEntries(Object.entries(TABLE).map(([key, spec]) => [key, { ...spec, help: helpOf(spec) }])) as {
  readonly [K in keyof Table]: Table[K] & { readonly help: string };
};

/** The settings that have a default, so always a value. */
export type DefaultedKey = { [K in keyof Table]: Table[K] extends { readonly default: string | DefaultRule } ? K : never }[keyof Table];

/** The value a flag or the environment gives a setting; undefined when neither does. */
export function givenSetting(key: keyof AgentOptions, flags: Partial<Record<keyof AgentOptions, string>>, env: NodeJS.ProcessEnv): string | undefined {
  const setting: SettingSpec = SETTINGS[key];
  const fromEnv = env[setting.env];
  return flags[key] ?? (setting.emptyIsAValue === true ? fromEnv : fromEnv || undefined);
}

/** A setting's default in the given context, as a flag would give it. */
export function defaultOf(setting: { readonly default: string | DefaultRule }, context: DefaultContext): string {
  return typeof setting.default === 'string' ? setting.default : setting.default.of(context);
}

/**
 * The agent's socket, one rule for the agent and for the CLI looking for it: --socket, else
 * WARREN_SOCKET, else the default (DEFAULT_SOCKET as root, <state-dir>/warren.sock otherwise).
 * Creates nothing: the context's `stateDir` is asked only when the default needs it, and is the
 * caller's to find (the agent makes its state directory, `defaultStateDir`; the CLI only looks
 * for one, `findStateDir`).
 */
export function agentSocket(flag: string | undefined, context: DefaultContext): string {
  return givenSetting('socket', flag === undefined ? {} : { socket: flag }, context.env) ?? defaultOf(SETTINGS.socket, context);
}

/** The plugins directory that goes with an agent socket: `plugins` beside it. */
function pluginsDirBeside(socket: string): string {
  return join(dirname(socket), 'plugins');
}

/**
 * The registry's directory: given (empty: off), or `plugins` beside the socket actually used. One
 * rule for the agent and the adapters.
 */
export function pluginsDirOf(given: string | undefined, socket: string, cwd: string): { pluginsDir?: string } {
  if (given === undefined) return { pluginsDir: pluginsDirBeside(socket) };
  return given.trim() === '' ? {} : { pluginsDir: resolve(cwd, given) };
}
