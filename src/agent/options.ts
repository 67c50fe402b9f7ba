/**
 * Agent settings: every one a flag and an environment variable, and its default, in one table
 * (`SETTINGS`) from which both `--help` and `resolveAgentOptions` read. Defaults follow DESIGN.md:
 * as root the system paths; as another user the first state directory the agent can write
 * (XDG state dir, ~/.local/state/warren, ./.warren), so it starts anywhere. The journal's default
 * never follows --state-dir as root: the plugin writes to DEFAULT_JOURNAL_DIR unless a network
 * config says otherwise, and cannot know the agent's flags.
 *
 * The socket's rule (`agentSocket`) is shared with the CLI, which must find a running agent
 * without creating anything: it looks for the state directory where the agent makes it
 * (state-dir.ts).
 */
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { WarrenError } from '../core/errors.ts';
import { type StoreKind, isEtcdEndpoint } from '../store/store.ts';
import { DEFAULT_JOURNAL_DIR } from '../cni/journal-dir.ts';
import { type CniVersion, SUPPORTED_VERSIONS, isSupportedVersion } from '../cni/spec.ts';
import { DEFAULT_SOCKET } from '../api/socket.ts';
import { DEFAULT_NETNS_DIRS } from '../sources/netns.ts';
import { DEFAULT_CONTAINERD_SOCKET } from '../sources/containerd/socket.ts';
import { DEFAULT_STATE_DIR, defaultStateDir } from './state-dir.ts';

export interface AgentOptions {
  readonly stateDir: string;
  readonly socket: string;
  readonly database: string;
  readonly nodeName: string;
  /** SQLite durability: FULL survives power loss, NORMAL a process crash. */
  readonly synchronous: 'FULL' | 'NORMAL';
  readonly logLevel: string;
  /** Missed-delete journal the plugin writes when the agent is unreachable. */
  readonly journalDir: string;
  /** Directories whose network namespaces the agent may judge gone; empty: none. */
  readonly netnsDirs: readonly string[];
  /** Seconds between reconcile passes. */
  readonly reconcileIntervalSeconds: number;
  /** Seconds an allocation is left alone before its namespace is judged. */
  readonly netnsGraceSeconds: number;
  /** sqlite (one node, embedded) or etcd (pools shared by a cluster). */
  readonly store: StoreKind;
  readonly etcdEndpoints: readonly string[];
  readonly etcdPrefix: string;
  readonly etcdCa?: string;
  readonly etcdCert?: string;
  readonly etcdKey?: string;
  /**
   * Split shared ranges into blocks with node affinity (default with etcd). Off keeps a whole range
   * in one key, as whereabouts does: every node contends on it. For comparison, not production.
   */
  readonly blocks: boolean;
  /** Seconds an own block stays empty before it is given back (cluster store). */
  readonly blockGraceSeconds: number;
  /** Seconds a node stays listed alive after its agent stops renewing (cluster store). */
  readonly nodeLeaseSeconds: number;
  /** Follow containerd's events to release what deleted containers held. */
  readonly containerd: boolean;
  readonly containerdSocket: string;
  readonly containerdNamespaces: readonly string[];
  /** Seconds an allocation is left alone by a resynchronisation with containerd (ADDs in flight). */
  readonly containerdGraceSeconds: number;
  /** Backoff of a container whose event failed: first delay and cap, seconds. */
  readonly eventRetrySeconds: number;
  readonly eventRetryMaxSeconds: number;
  /** CNI GC spares allocations younger than this, seconds (ADDs the runtime's list cannot show). */
  readonly gcGraceSeconds: number;
  /** How long a call waits while another process holds the SQLite database, seconds. */
  readonly dbBusyTimeoutSeconds: number;
  /** Watch this node's pods (and Nodes, with etcd) in Kubernetes and release what gone pods held. */
  readonly kubernetes: boolean;
  /** A kubeconfig file; undefined: the in-cluster service account. */
  readonly kubeconfig?: string;
  /** Seconds a gone pod whose namespace cannot be proven gone keeps its addresses. */
  readonly podGoneGraceSeconds: number;
  /** Retries of a gone pod's release before a Warning Event and giving up until the next listing. */
  readonly podReleaseRetries: number;
  /** Derive and keep Warren's config in the CNI conf dir from the node's primary config. */
  readonly manageCniConfig: boolean;
  readonly cniConfDir: string;
  /** The primary config, named explicitly; undefined: the lexically first config not Warren's. */
  readonly primaryConfig?: string;
  /** Seconds to wait for a primary config before reporting there is none. */
  readonly primaryWaitSeconds: number;
  /** While this file is missing the agent is not ready (STATUS 50, ADD 11) and Warren's config is removed. */
  readonly readinessIndicatorFile?: string;
  /** The newest cniVersion the runtime accepts; Warren's config is capped at it. */
  readonly cniVersionMax: CniVersion;
  /** Remove Warren's config when the agent stops cleanly. */
  readonly cleanupConfigOnExit: boolean;
  /** Where plugins (runtime adapters) register with a unix socket; undefined: the registry is off. */
  readonly pluginsDir?: string;
  /** Where Prometheus metrics and the dashboard are served (TCP, apart from the socket); undefined: off. */
  readonly metricsAddress?: ListenAddress;
}

/** A TCP address to listen on; port 0 asks the kernel for a free one. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

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
      says: `${DEFAULT_STATE_DIR} as root, otherwise the first writable of $XDG_STATE_HOME/warren, ~/.local/state/warren, ./.warren`,
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
        `${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says (where the plugin writes unless a config names ipam.journal_dir), ` +
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
    about: "seconds a gone pod keeps its addresses while its network namespace cannot be proven gone (a force-deleted pod's sandbox may still run)",
    default: '600',
  },
  podReleaseRetries: { flag: 'pod-release-retries', env: 'WARREN_POD_RELEASE_RETRIES', about: "retries of a gone pod's release before a Warning Event on it", default: '5' },
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
    about: "on: write Warren's config into the CNI conf dir, derived from the node's primary config and kept in step with it, or off",
    default: 'off',
  },
  cniConfDir: { flag: 'cni-conf-dir', env: 'WARREN_CNI_CONF_DIR', about: "the runtime's CNI conf dir", default: DEFAULT_CNI_CONF_DIR },
  primaryConfig: { flag: 'primary-config', env: 'WARREN_PRIMARY_CONFIG', about: 'the primary CNI config to derive from (a path, or a name in the conf dir); without it, the lexically first config that is not Warren\'s' },
  primaryWaitSeconds: { flag: 'primary-wait', env: 'WARREN_PRIMARY_WAIT', about: 'seconds to wait for a primary config before reporting there is none', default: '300' },
  readinessIndicatorFile: {
    flag: 'readiness-indicator-file',
    env: 'WARREN_READINESS_INDICATOR_FILE',
    about: "while this file is missing the agent is not ready (CNI STATUS 50, ADD 11) and Warren's config is removed",
  },
  cniVersionMax: { flag: 'cni-version-max', env: 'WARREN_CNI_VERSION_MAX', about: "newest cniVersion the runtime accepts (containerd 1.6 and 1.7: 1.0.0); Warren's config is capped at it", default: '1.0.0' },
  cleanupConfigOnExit: { flag: 'cleanup-config-on-exit', env: 'WARREN_CLEANUP_CONFIG_ON_EXIT', about: "on: remove Warren's config when the agent stops cleanly, or off", default: 'off' },
  pluginsDir: {
    flag: 'plugins-dir',
    env: 'WARREN_PLUGINS_DIR',
    about: 'directory, watched recursively, where plugins such as runtime adapters register with a unix socket (kubelet\'s handshake); empty turns the registry off',
    default: { says: `plugins beside the agent socket (${join(dirname(DEFAULT_SOCKET), 'plugins')} as root)`, of: (c) => pluginsDirBeside(agentSocket(undefined, c)) },
    emptyIsAValue: true,
  },
  metricsAddress: {
    flag: 'metrics-address',
    env: 'WARREN_METRICS_ADDRESS',
    about: 'host:port where Prometheus metrics (/metrics) and the dashboard (/) are served over HTTP, apart from the socket ([::1]:9464 for IPv6; port 0 picks a free one); empty turns both off',
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
type DefaultedKey = { [K in keyof Table]: Table[K] extends { readonly default: string | DefaultRule } ? K : never }[keyof Table];

/** The value a flag or the environment gives a setting; undefined when neither does. */
export function givenSetting(key: keyof AgentOptions, flags: Partial<Record<keyof AgentOptions, string>>, env: NodeJS.ProcessEnv): string | undefined {
  const setting: SettingSpec = SETTINGS[key];
  const fromEnv = env[setting.env];
  return flags[key] ?? (setting.emptyIsAValue === true ? fromEnv : fromEnv || undefined);
}

/** A setting's default in the given context, as a flag would give it. */
function defaultOf(setting: { readonly default: string | DefaultRule }, context: DefaultContext): string {
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

const MAX_SOCKET_PATH = 107;

/** The plugins directory that goes with an agent socket: `plugins` beside it. */
function pluginsDirBeside(socket: string): string {
  return join(dirname(socket), 'plugins');
}

function cniVersionMax(text: string): CniVersion {
  if (!isSupportedVersion(text)) {
    throw new WarrenError('INVALID_CONFIG', `--cni-version-max / WARREN_CNI_VERSION_MAX: "${text}" is not a CNI version Warren speaks (${SUPPORTED_VERSIONS.join(', ')})`);
  }
  return text;
}

export function resolveAgentOptions(
  flags: Partial<Record<keyof AgentOptions, string>>,
  env: NodeJS.ProcessEnv = process.env,
  uid: number = process.getuid?.() ?? 0,
  cwd: string = process.cwd(),
): AgentOptions {
  const given = (key: keyof AgentOptions): string | undefined => givenSetting(key, flags, env);
  const explicitState = given('stateDir');
  const context: DefaultContext = { uid, env, cwd, stateDir: () => stateDir };
  // An explicit state directory is taken relative to cwd; the default is used as it is found.
  const stateDir = explicitState === undefined ? defaultOf(SETTINGS.stateDir, context) : resolve(cwd, explicitState);
  const valueOf = (key: DefaultedKey): string => given(key) ?? defaultOf(SETTINGS[key], context);
  const seconds = (
    key:
      | 'reconcileIntervalSeconds'
      | 'netnsGraceSeconds'
      | 'blockGraceSeconds'
      | 'nodeLeaseSeconds'
      | 'containerdGraceSeconds'
      | 'eventRetrySeconds'
      | 'eventRetryMaxSeconds'
      | 'gcGraceSeconds'
      | 'podGoneGraceSeconds'
      | 'primaryWaitSeconds'
      | 'dbBusyTimeoutSeconds',
    min: number,
  ): number => {
    const text = valueOf(key);
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > 86_400) {
      throw new WarrenError('INVALID_CONFIG', `--${SETTINGS[key].flag} / ${SETTINGS[key].env}: "${text}" is not a number of seconds from ${min} to 86400`);
    }
    return n;
  };
  const retries = (): number => {
    const text = valueOf('podReleaseRetries');
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n > 100) throw new WarrenError('INVALID_CONFIG', `--pod-release-retries / WARREN_POD_RELEASE_RETRIES: "${text}" is not a whole number from 0 to 100`);
    return n;
  };
  const socket = resolve(cwd, agentSocket(flags.socket, context));
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new WarrenError('INVALID_CONFIG', `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes, the limit of a unix socket address; pass a shorter --socket`);
  }
  const synchronous = valueOf('synchronous').toUpperCase();
  if (synchronous !== 'FULL' && synchronous !== 'NORMAL') {
    throw new WarrenError('INVALID_CONFIG', `--sync / WARREN_SYNC: "${synchronous}" is not FULL or NORMAL`);
  }
  const logLevel = valueOf('logLevel');
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) {
    throw new WarrenError('INVALID_CONFIG', `--log-level / WARREN_LOG_LEVEL: "${logLevel}" is not debug, info, warn or error`);
  }
  const onOff = (key: 'blocks' | 'containerd' | 'kubernetes' | 'manageCniConfig' | 'cleanupConfigOnExit'): boolean => {
    const text = valueOf(key);
    if (text !== 'on' && text !== 'off') throw new WarrenError('INVALID_CONFIG', `--${SETTINGS[key].flag} / ${SETTINGS[key].env}: "${text}" is not on or off`);
    return text === 'on';
  };
  const store = valueOf('store');
  if (store !== 'sqlite' && store !== 'etcd') throw new WarrenError('INVALID_CONFIG', `--store / WARREN_STORE: "${store}" is not sqlite or etcd`);
  const etcdEndpoints = (given('etcdEndpoints') ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (store === 'etcd' && etcdEndpoints.length === 0) {
    throw new WarrenError('INVALID_CONFIG', '--store etcd needs --etcd-endpoints / WARREN_ETCD_ENDPOINTS (comma-separated client URLs)');
  }
  for (const url of etcdEndpoints) {
    if (!isEtcdEndpoint(url)) throw new WarrenError('INVALID_CONFIG', `--etcd-endpoints: "${url}" is not http://host:port or https://host:port`);
  }
  const containerdNamespaces = valueOf('containerdNamespaces')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  for (const ns of containerdNamespaces) {
    // containerd's own rule for namespace names: labels of letters, digits, '-' and '_', joined by dots.
    if (!/^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$/.test(ns) || ns.length > 76) {
      throw new WarrenError('INVALID_CONFIG', `--containerd-namespaces: "${ns}" is not a containerd namespace name`);
    }
  }
  if (containerdNamespaces.length === 0) throw new WarrenError('INVALID_CONFIG', '--containerd-namespaces: give at least one namespace (or --containerd off)');
  const eventRetrySeconds = seconds('eventRetrySeconds', 0.01);
  const eventRetryMaxSeconds = seconds('eventRetryMaxSeconds', 0.01);
  if (eventRetryMaxSeconds < eventRetrySeconds) {
    throw new WarrenError('INVALID_CONFIG', `--event-retry-max (${eventRetryMaxSeconds}) is shorter than --event-retry (${eventRetrySeconds})`);
  }
  const etcdPrefix = valueOf('etcdPrefix');
  if (!etcdPrefix.startsWith('/') || !etcdPrefix.endsWith('/')) throw new WarrenError('INVALID_CONFIG', `--etcd-prefix: "${etcdPrefix}" must start and end with /`);
  const file = (key: 'etcdCa' | 'etcdCert' | 'etcdKey'): { [k: string]: string } => {
    const value = given(key);
    return value === undefined ? {} : { [key]: resolve(cwd, value) };
  };
  return {
    stateDir,
    socket,
    database: resolve(cwd, valueOf('database')),
    nodeName: valueOf('nodeName'),
    synchronous,
    logLevel,
    journalDir: resolve(cwd, valueOf('journalDir')),
    netnsDirs: [
      ...new Set(
        valueOf('netnsDirs')
          .split(',')
          .map((d) => d.trim())
          .filter((d) => d !== '')
          .map((d) => resolve(cwd, d)),
      ),
    ],
    reconcileIntervalSeconds: seconds('reconcileIntervalSeconds', 0.05),
    netnsGraceSeconds: seconds('netnsGraceSeconds', 0),
    store,
    etcdEndpoints,
    etcdPrefix,
    ...file('etcdCa'),
    ...file('etcdCert'),
    ...file('etcdKey'),
    blocks: onOff('blocks'),
    blockGraceSeconds: seconds('blockGraceSeconds', 0),
    nodeLeaseSeconds: seconds('nodeLeaseSeconds', 2),
    containerd: onOff('containerd'),
    containerdSocket: resolve(cwd, valueOf('containerdSocket')),
    containerdNamespaces,
    containerdGraceSeconds: seconds('containerdGraceSeconds', 0),
    eventRetrySeconds,
    eventRetryMaxSeconds,
    gcGraceSeconds: seconds('gcGraceSeconds', 0),
    dbBusyTimeoutSeconds: seconds('dbBusyTimeoutSeconds', 0),
    kubernetes: onOff('kubernetes'),
    ...(given('kubeconfig') === undefined ? {} : { kubeconfig: resolve(cwd, given('kubeconfig') as string) }),
    podGoneGraceSeconds: seconds('podGoneGraceSeconds', 0),
    podReleaseRetries: retries(),
    manageCniConfig: onOff('manageCniConfig'),
    cniConfDir: resolve(cwd, valueOf('cniConfDir')),
    ...(given('primaryConfig') === undefined ? {} : { primaryConfig: given('primaryConfig') as string }),
    primaryWaitSeconds: seconds('primaryWaitSeconds', 0),
    ...(given('readinessIndicatorFile') === undefined ? {} : { readinessIndicatorFile: resolve(cwd, given('readinessIndicatorFile') as string) }),
    cniVersionMax: cniVersionMax(valueOf('cniVersionMax')),
    cleanupConfigOnExit: onOff('cleanupConfigOnExit'),
    ...pluginsDirOf(given('pluginsDir'), socket, cwd),
    ...metricsAddressOf(valueOf('metricsAddress')),
  };
}

/** `host:port` or `[v6]:port`; empty (or blanks): off. */
export function metricsAddressOf(text: string): { metricsAddress?: ListenAddress } {
  if (text.trim() === '') return {};
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || port > 65_535) {
    throw new WarrenError('INVALID_CONFIG', `--metrics-address / WARREN_METRICS_ADDRESS: "${text}" is not host:port (or [IPv6]:port) with a port from 0 to 65535; empty turns metrics off`);
  }
  return { metricsAddress: { host: (match[1] ?? match[2]) as string, port } };
}

/** A listen address as text, IPv6 in brackets. */
export function formatListenAddress(address: ListenAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** The registry's directory: given (empty: off), or `plugins` beside the socket actually used. One rule for the agent and the adapters. */
export function pluginsDirOf(given: string | undefined, socket: string, cwd: string): { pluginsDir?: string } {
  if (given === undefined) return { pluginsDir: pluginsDirBeside(socket) };
  return given.trim() === '' ? {} : { pluginsDir: resolve(cwd, given) };
}
