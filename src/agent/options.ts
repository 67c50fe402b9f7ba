/**
 * Agent settings: every one a flag and an environment variable, with defaults from DESIGN.md.
 * As root the defaults are the system paths; as another user the agent picks the first state
 * directory it can write (XDG state dir, ~/.local/state/warren, ./.warren), so it starts anywhere.
 * The journal's default never follows --state-dir as root: the plugin writes to
 * DEFAULT_JOURNAL_DIR unless a network config says otherwise, and cannot know the agent's flags.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_CONTAINERD_SOCKET, DEFAULT_JOURNAL_DIR, DEFAULT_NETNS_DIRS, DEFAULT_SOCKET, DEFAULT_STATE_DIR } from '../core/defaults.ts';
import { WarrenError } from '../core/errors.ts';
import type { StoreKind } from '../ipam/config.ts';
import { isEtcdEndpoint } from '../store/store.ts';

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
}

/** One setting: its flag, its environment variable and what it means (for --help and the README). */
export interface Setting {
  readonly flag: string;
  readonly env: string;
  readonly help: string;
}

export const SETTINGS: Record<keyof AgentOptions, Setting> = {
  stateDir: {
    flag: 'state-dir',
    env: 'WARREN_STATE_DIR',
    help: `state directory (database; socket and journal too when not root); default ${DEFAULT_STATE_DIR} as root, otherwise the first writable of $XDG_STATE_HOME/warren, ~/.local/state/warren, ./.warren`,
  },
  socket: { flag: 'socket', env: 'WARREN_SOCKET', help: `agent API socket; default ${DEFAULT_SOCKET} as root, <state-dir>/warren.sock otherwise` },
  database: { flag: 'database', env: 'WARREN_DATABASE', help: 'SQLite database file; default <state-dir>/warren.db' },
  nodeName: { flag: 'node-name', env: 'WARREN_NODE_NAME', help: 'name this node records on its allocations; default the host name' },
  synchronous: { flag: 'sync', env: 'WARREN_SYNC', help: 'FULL (survives power loss, default) or NORMAL (survives a process crash)' },
  logLevel: { flag: 'log-level', env: 'WARREN_LOG_LEVEL', help: 'debug, info (default), warn or error' },
  journalDir: {
    flag: 'journal-dir',
    env: 'WARREN_JOURNAL_DIR',
    help:
      `missed-delete journal; default ${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says (where the plugin writes unless a config names ipam.journal_dir), ` +
      '<state-dir>/journal as another user (network configs must then name it in ipam.journal_dir)',
  },
  netnsDirs: {
    flag: 'netns-dirs',
    env: 'WARREN_NETNS_DIRS',
    help: `comma-separated netns directories the agent may judge, matched by real path; default ${DEFAULT_NETNS_DIRS.join(',')}; empty for none`,
  },
  reconcileIntervalSeconds: { flag: 'reconcile-interval', env: 'WARREN_RECONCILE_INTERVAL', help: 'seconds between reconcile passes; default 10' },
  netnsGraceSeconds: { flag: 'netns-grace', env: 'WARREN_NETNS_GRACE', help: 'seconds before a new allocation is judged by its namespace; default 60' },
  store: { flag: 'store', env: 'WARREN_STORE', help: 'sqlite (embedded, one node; default) or etcd (pools shared by many nodes)' },
  etcdEndpoints: { flag: 'etcd-endpoints', env: 'WARREN_ETCD_ENDPOINTS', help: 'comma-separated etcd client URLs (http:// or https://); required with --store etcd' },
  etcdPrefix: { flag: 'etcd-prefix', env: 'WARREN_ETCD_PREFIX', help: 'key prefix in etcd; default /warren/' },
  etcdCa: { flag: 'etcd-ca', env: 'WARREN_ETCD_CA', help: 'PEM file of the CA that signed the etcd servers\' certificates' },
  etcdCert: { flag: 'etcd-cert', env: 'WARREN_ETCD_CERT', help: 'PEM client certificate for etcd (mutual TLS), with --etcd-key' },
  etcdKey: { flag: 'etcd-key', env: 'WARREN_ETCD_KEY', help: 'PEM private key of --etcd-cert' },
  blocks: { flag: 'blocks', env: 'WARREN_BLOCKS', help: 'on (default with etcd): nodes claim blocks of a range; off: one key per range (for comparison)' },
  blockGraceSeconds: { flag: 'block-grace', env: 'WARREN_BLOCK_GRACE', help: 'seconds an empty block stays with this node before it is given back; default 300' },
  containerd: { flag: 'containerd', env: 'WARREN_CONTAINERD', help: 'on (default): release what containers deleted in containerd held; off' },
  containerdSocket: { flag: 'containerd-socket', env: 'WARREN_CONTAINERD_SOCKET', help: 'containerd\'s gRPC socket; default /run/containerd/containerd.sock' },
  containerdNamespaces: { flag: 'containerd-namespaces', env: 'WARREN_CONTAINERD_NAMESPACES', help: 'comma-separated containerd namespaces to follow; default k8s.io' },
  containerdGraceSeconds: { flag: 'containerd-grace', env: 'WARREN_CONTAINERD_GRACE', help: 'seconds a new allocation is spared by a resync with containerd; default 60' },
  eventRetrySeconds: { flag: 'event-retry', env: 'WARREN_EVENT_RETRY', help: 'seconds before a failed container event is retried, doubling each time; default 1' },
  eventRetryMaxSeconds: { flag: 'event-retry-max', env: 'WARREN_EVENT_RETRY_MAX', help: 'longest wait between retries of a failed container event, seconds; default 300' },
  gcGraceSeconds: { flag: 'gc-grace', env: 'WARREN_GC_GRACE', help: 'seconds a new allocation is spared by CNI GC (ADDs that raced the runtime\'s list); default 60' },
  dbBusyTimeoutSeconds: { flag: 'db-busy-timeout', env: 'WARREN_DB_BUSY_TIMEOUT', help: 'seconds a call waits while another process holds the database, then answers try-again (CNI 11); default 5' },
  nodeLeaseSeconds: { flag: 'node-lease', env: 'WARREN_NODE_LEASE', help: 'seconds a stopped agent\'s node stays listed alive (etcd lease TTL); default 10' },
};

const MAX_SOCKET_PATH = 107;

function writableDir(dir: string): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first state directory this user can write. */
export function defaultStateDir(env: NodeJS.ProcessEnv, uid: number, cwd: string): string {
  const candidates: string[] = [];
  if (uid === 0) candidates.push(DEFAULT_STATE_DIR);
  if (env.XDG_STATE_HOME) candidates.push(join(env.XDG_STATE_HOME, 'warren'));
  const home = env.HOME || safeHomedir();
  if (home) candidates.push(join(home, '.local', 'state', 'warren'));
  candidates.push(join(cwd, '.warren'));
  for (const dir of candidates) if (writableDir(dir)) return dir;
  throw new WarrenError('IO_FAILURE', `no writable state directory among ${candidates.join(', ')}; pass --state-dir`);
}

function safeHomedir(): string | undefined {
  try {
    return homedir();
  } catch {
    return undefined;
  }
}

export function resolveAgentOptions(
  flags: Partial<Record<keyof AgentOptions, string>>,
  env: NodeJS.ProcessEnv = process.env,
  uid: number = process.getuid?.() ?? 0,
  cwd: string = process.cwd(),
): AgentOptions {
  const pick = (key: keyof AgentOptions): string | undefined => flags[key] ?? (env[SETTINGS[key].env] || undefined);
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
      | 'dbBusyTimeoutSeconds',
    fallback: number,
    min: number,
  ): number => {
    const text = pick(key);
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > 86_400) {
      throw new WarrenError('INVALID_CONFIG', `--${SETTINGS[key].flag} / ${SETTINGS[key].env}: "${text}" is not a number of seconds from ${min} to 86400`);
    }
    return n;
  };
  const explicitState = pick('stateDir');
  const stateDir = explicitState === undefined ? defaultStateDir(env, uid, cwd) : resolve(cwd, explicitState);
  const socket = resolve(cwd, pick('socket') ?? (uid === 0 ? DEFAULT_SOCKET : join(stateDir, 'warren.sock')));
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new WarrenError('INVALID_CONFIG', `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes, the limit of a unix socket address; pass a shorter --socket`);
  }
  const synchronous = (pick('synchronous') ?? 'FULL').toUpperCase();
  if (synchronous !== 'FULL' && synchronous !== 'NORMAL') {
    throw new WarrenError('INVALID_CONFIG', `--sync / WARREN_SYNC: "${synchronous}" is not FULL or NORMAL`);
  }
  const logLevel = pick('logLevel') ?? 'info';
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) {
    throw new WarrenError('INVALID_CONFIG', `--log-level / WARREN_LOG_LEVEL: "${logLevel}" is not debug, info, warn or error`);
  }
  const onOff = (key: 'blocks' | 'containerd', fallback: boolean): boolean => {
    const text = pick(key);
    if (text === undefined) return fallback;
    if (text !== 'on' && text !== 'off') throw new WarrenError('INVALID_CONFIG', `--${SETTINGS[key].flag} / ${SETTINGS[key].env}: "${text}" is not on or off`);
    return text === 'on';
  };
  const store = pick('store') ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'etcd') throw new WarrenError('INVALID_CONFIG', `--store / WARREN_STORE: "${store}" is not sqlite or etcd`);
  const etcdEndpoints = (pick('etcdEndpoints') ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (store === 'etcd' && etcdEndpoints.length === 0) {
    throw new WarrenError('INVALID_CONFIG', '--store etcd needs --etcd-endpoints / WARREN_ETCD_ENDPOINTS (comma-separated client URLs)');
  }
  for (const url of etcdEndpoints) {
    if (!isEtcdEndpoint(url)) throw new WarrenError('INVALID_CONFIG', `--etcd-endpoints: "${url}" is not http://host:port or https://host:port`);
  }
  const containerdNamespaces = (pick('containerdNamespaces') ?? 'k8s.io')
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
  const eventRetrySeconds = seconds('eventRetrySeconds', 1, 0.01);
  const eventRetryMaxSeconds = seconds('eventRetryMaxSeconds', 300, 0.01);
  if (eventRetryMaxSeconds < eventRetrySeconds) {
    throw new WarrenError('INVALID_CONFIG', `--event-retry-max (${eventRetryMaxSeconds}) is shorter than --event-retry (${eventRetrySeconds})`);
  }
  const etcdPrefix = pick('etcdPrefix') ?? '/warren/';
  if (!etcdPrefix.startsWith('/') || !etcdPrefix.endsWith('/')) throw new WarrenError('INVALID_CONFIG', `--etcd-prefix: "${etcdPrefix}" must start and end with /`);
  const file = (key: 'etcdCa' | 'etcdCert' | 'etcdKey'): { [k: string]: string } => {
    const value = pick(key);
    return value === undefined ? {} : { [key]: resolve(cwd, value) };
  };
  return {
    stateDir,
    socket,
    database: resolve(cwd, pick('database') ?? join(stateDir, 'warren.db')),
    nodeName: pick('nodeName') ?? hostname(),
    synchronous,
    logLevel,
    journalDir: resolve(cwd, pick('journalDir') ?? (uid === 0 ? DEFAULT_JOURNAL_DIR : join(stateDir, 'journal'))),
    netnsDirs: [
      ...new Set(
        (flags.netnsDirs ?? env[SETTINGS.netnsDirs.env] ?? DEFAULT_NETNS_DIRS.join(','))
          .split(',')
          .map((d) => d.trim())
          .filter((d) => d !== '')
          .map((d) => resolve(cwd, d)),
      ),
    ],
    reconcileIntervalSeconds: seconds('reconcileIntervalSeconds', 10, 0.05),
    netnsGraceSeconds: seconds('netnsGraceSeconds', 60, 0),
    store,
    etcdEndpoints,
    etcdPrefix,
    ...file('etcdCa'),
    ...file('etcdCert'),
    ...file('etcdKey'),
    blocks: onOff('blocks', true),
    blockGraceSeconds: seconds('blockGraceSeconds', 300, 0),
    nodeLeaseSeconds: seconds('nodeLeaseSeconds', 10, 2),
    containerd: onOff('containerd', true),
    containerdSocket: resolve(cwd, pick('containerdSocket') ?? DEFAULT_CONTAINERD_SOCKET),
    containerdNamespaces,
    containerdGraceSeconds: seconds('containerdGraceSeconds', 60, 0),
    eventRetrySeconds,
    eventRetryMaxSeconds,
    gcGraceSeconds: seconds('gcGraceSeconds', 60, 0),
    dbBusyTimeoutSeconds: seconds('dbBusyTimeoutSeconds', 5, 0),
  };
}
