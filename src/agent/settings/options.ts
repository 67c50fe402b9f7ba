/**
 * The agent's options: what its settings (settings/table.ts: flag, environment variable, default) come
 * to once read and checked, each refused with an INVALID_CONFIG that names the flag and the
 * variable. Paths are made absolute against the working directory.
 */
import { resolve } from 'node:path';
import { WarrenError } from '../../core/errors.ts';
import { type StoreKind, isEtcdEndpoint } from '../../store/store.ts';
import { type CniVersion, SUPPORTED_VERSIONS, isSupportedVersion } from '../../cni/spec.ts';
import { type ListenAddress, metricsAddressOf } from './listen-address.ts';
import { type DefaultContext, type DefaultedKey, SETTINGS, agentSocket, defaultOf, givenSetting, pluginsDirOf } from './table.ts';

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
  /** Seconds between the cluster chores: the node announcement and giving back empty blocks (cluster store). */
  readonly upkeepIntervalSeconds: number;
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
  /** Rounds of the warm-up (server/warm-up.ts) before the agent serves; 0 for none. */
  readonly warmUpRounds: number;
  /** Derive and keep Warren's config in the CNI conf dir from the node's primary config. */
  readonly manageCniConfig: boolean;
  readonly cniConfDir: string;
  /** The primary config, named explicitly; undefined: the lexically first config not Warren's. */
  readonly primaryConfig?: string;
  /** Seconds to wait for a primary config before reporting there is none. */
  readonly primaryWaitSeconds: number;
  /** While this file is missing the agent is not ready (STATUS 50, ADD 11); Warren's config stays first. */
  readonly readinessIndicatorFile?: string;
  /** The newest cniVersion the runtime accepts; Warren's config is capped at it. */
  readonly cniVersionMax: CniVersion;
  /** Remove Warren's config when the agent stops cleanly and holds no address of its network. */
  readonly cleanupConfigOnExit: boolean;
  /** Where plugins (runtime adapters) register with a unix socket; undefined: the registry is off. */
  readonly pluginsDir?: string;
  /** Where Prometheus metrics and the dashboard are served (TCP, apart from the socket); undefined: off. */
  readonly metricsAddress?: ListenAddress;
}

/** The longest path a unix socket address holds (sun_path, less its NUL). */
const MAX_SOCKET_PATH = 107;

function cniVersionMax(text: string): CniVersion {
  if (!isSupportedVersion(text)) {
    throw new WarrenError('INVALID_CONFIG', `--cni-version-max / WARREN_CNI_VERSION_MAX: "${text}" is not a CNI version Warren speaks ` + `(${SUPPORTED_VERSIONS.join(', ')})`);
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
    // biome-ignore lint/suspicious/noShadowRestrictedNames: a local function; nothing here calls Object's valueOf
  const valueOf = (key: DefaultedKey): string => given(key) ?? defaultOf(SETTINGS[key], context);
  const seconds = (
    key:
      | 'reconcileIntervalSeconds'
      | 'upkeepIntervalSeconds'
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
  const warmUpRounds = (): number => {
    const text = valueOf('warmUpRounds');
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n > 10_000) throw new WarrenError('INVALID_CONFIG', `--warm-up / WARREN_WARM_UP: "${text}" is not a whole number from 0 to 10000`);
    return n;
  };
  const socket = resolve(cwd, agentSocket(flags.socket, context));
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new WarrenError('INVALID_CONFIG', `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes, the limit of a unix socket address; ` + `pass a shorter --socket`);
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
    upkeepIntervalSeconds: seconds('upkeepIntervalSeconds', 0.05),
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
    warmUpRounds: warmUpRounds(),
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
