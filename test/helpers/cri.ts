/**
 * A real containerd (Debian's 1.6) with its CRI plugin enabled, for tests that need pod sandboxes
 * made the way a kubelet makes them: RunPodSandbox creates a network namespace and runs the CNI
 * plugins of a private conf dir from a private bin dir (ADD), StopPodSandbox and RemovePodSandbox
 * run DEL. The daemon's config, root, state, sockets, runc root, pod log dir and conf dir are in a
 * private temp dir; the sandbox image is imported from a local OCI layout (no registry).
 *
 * Guarantees of stop(), also when a test failed half-way or containerd was killed: every sandbox
 * still known to containerd is stopped and removed through CRI while the daemon runs (so
 * containerd itself runs DEL); then the daemon and every shim of this instance are gone, every
 * process left in this instance's private cgroup parent is killed and its cgroup directories
 * removed in every hierarchy, and what containerd and libcni write outside the temp dir whatever
 * the config says (shim sockets in /run/containerd/s, network namespaces /var/run/netns/cni-*,
 * libcni's result cache /var/lib/cni/results, task state under /run/containerd) is removed when
 * it is both new since start and named after one of this instance's sandboxes (its ids and
 * namespace paths come from CRI, the shims' command lines and containerd's own database), so an
 * instance running beside it keeps its own. /run/containerd and /var/lib/cni, when an instance
 * created them, are removed (their empty directories) by the last instance to stop. Mounts under
 * the temp dir are unmounted before it is deleted. Nothing that existed before start is touched;
 * only PIDs of this instance are signalled.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  type Dirent,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Metadata, type ServiceError, credentials } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { buildPlugin } from '../../scripts/build.ts';
import { REFERENCE_PLUGINS } from './cni.ts';
import { CONTAINERD_BIN, CTR_BIN } from './containerd.ts';
import {
  CHILD_PATH,
  REPO,
  type RunResult,
  WARREN_BIN,
  StopWaiting,
  isGone,
  isRoot,
  removeDir,
  run,
  tempDir,
  track,
  waitFor,
} from './processes.ts';
import { mountPoints, umount, unmountUnder } from './mounts.ts';
import { SANDBOX_IMAGE, haveBusybox, sandboxImageTar } from './sandbox-image.ts';

/** The containerd namespace the CRI plugin keeps its sandboxes and images in. */
export const CRI_NAMESPACE = 'k8s.io';
/**
 * The prefix of an instance's temp dir (in os.tmpdir()). The dir lives from start to the last
 * step of stop(), so its presence tells that an instance is live, in this process or another.
 */
export const INSTANCE_DIR_PREFIX = 'warren-crid-';
const NETNS_DIR = '/var/run/netns';
const SHIM_SOCKET_DIR = '/run/containerd/s';
const RUN_DIR = '/run/containerd';
const CNI_CACHE_DIR = '/var/lib/cni';
/** Where the CRI's libcni keeps each attachment's cached result (a test removes its own). */
export const CNI_RESULTS_DIR = join(CNI_CACHE_DIR, 'results');
const CGROUP_ROOT = '/sys/fs/cgroup';

export function haveCriContainerd(): boolean {
  return (
    haveBusybox() &&
    existsSync(CONTAINERD_BIN) &&
    existsSync(CTR_BIN) &&
    existsSync('/usr/sbin/runc') &&
    existsSync(join(REFERENCE_PLUGINS, 'bridge'))
  );
}

/**
 * Removes libcni's cached results of `network`'s attachments, even of sandboxes whose ADD failed
 * midway (before the harness's stop, which removes the cache directory once it is empty).
 */
export function removeCachedResults(network: string): void {
  for (const name of listNames(CNI_RESULTS_DIR))
    if (name.startsWith(`${network}-`)) rmSync(join(CNI_RESULTS_DIR, name), { force: true });
}

/** Why a test of the CRI containerd cannot run here (the `skip` of its describe), or false. */
export function criSkip(): string | false {
  if (!isRoot()) return 'needs root';
  return haveCriContainerd() ? false : 'needs containerd, runc, busybox-static and the reference CNI plugins';
}

// ---------------------------------------------------------------------------------------------
// The CRI client

// keepCase: field names as written in cri.proto (pod_sandbox_id), not camelCased.
const root = new protobuf.Root().loadSync(fileURLToPath(new URL('./cri.proto', import.meta.url)), { keepCase: true });
const type = (name: string): protobuf.Type => root.lookupType(`runtime.v1.${name}`);
const SERVICE = '/runtime.v1.RuntimeService';

/** A failed CRI call: the gRPC status code (`@grpc/grpc-js` `status`) and containerd's text. */
export class CriError extends Error {
  readonly code: number;
  readonly details: string;
  readonly method: string;
  constructor(method: string, code: number, details: string) {
    super(`${method} failed (gRPC code ${code}): ${details}`);
    this.name = 'CriError';
    this.code = code;
    this.details = details;
    this.method = method;
  }
}

export interface SandboxRequest {
  readonly name: string;
  readonly uid: string;
  readonly namespace: string;
  readonly attempt?: number;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
}

export interface SandboxMetadata {
  readonly name: string;
  readonly uid: string;
  readonly namespace: string;
  readonly attempt: number;
}

export type SandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';

export interface SandboxStatus {
  readonly id: string;
  readonly state: SandboxState;
  /** The sandbox's first address, '' when it has none. */
  readonly ip: string;
  readonly additionalIps: string[];
  readonly metadata: SandboxMetadata;
  readonly annotations: Record<string, string>;
  /** containerd's verbose info (JSON texts by key), present when asked for. */
  readonly info: Record<string, string>;
}

export interface RuntimeStatus {
  readonly runtimeReady: boolean;
  readonly networkReady: boolean;
  readonly networkReason: string;
  readonly networkMessage: string;
  /** containerd's last CNI config load result: 'OK' or the load error's text. */
  readonly lastCniLoadStatus: string | undefined;
  /** The verbose info map (JSON texts by key). */
  readonly info: Record<string, string>;
}

interface WireMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}

interface WireSandboxStatus {
  id: string;
  metadata?: WireMetadata;
  state: SandboxState;
  network?: { ip: string; additional_ips: Array<{ ip: string }> };
  annotations: Record<string, string>;
}

interface WireStatusResponse {
  status?: { conditions: Array<{ type: string; status: boolean; reason: string; message: string }> };
  info: Record<string, string>;
}

const DEFAULT_DEADLINE_MS = 60_000;

export class CriClient {
  readonly socket: string;
  readonly #client: Client;
  readonly #logDirectory: string;
  readonly #cgroupParent: string;
  /** Every sandbox id this client was given and has not removed. */
  readonly #created = new Set<string>();

  constructor(socket: string, logDirectory: string, cgroupParent: string) {
    this.socket = socket;
    this.#logDirectory = logDirectory;
    this.#cgroupParent = cgroupParent;
    this.#client = new Client(`unix://${socket}`, credentials.createInsecure());
  }

  #call<T>(
    method: string,
    requestType: string,
    responseType: string,
    request: Record<string, unknown>,
    deadlineMs = DEFAULT_DEADLINE_MS,
  ): Promise<T> {
    const req = type(requestType);
    const res = type(responseType);
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        `${SERVICE}/${method}`,
        (message: Record<string, unknown>) => Buffer.from(req.encode(req.fromObject(message)).finish()),
        // Enums by name and int64 as text: what the test asserts on reads as written in cri.proto.
        (bytes: Buffer) => res.toObject(res.decode(bytes), { defaults: true, enums: String, longs: String }) as T,
        request,
        new Metadata(),
        { deadline: Date.now() + deadlineMs },
        (error: ServiceError | null, response?: T) => {
          if (error) reject(new CriError(method, error.code, error.details));
          else if (response === undefined) reject(new CriError(method, -1, 'no response'));
          else resolve(response);
        },
      );
    });
  }

  /** RunPodSandbox as a kubelet sends it (own network namespace); resolves to the sandbox id. */
  async runPodSandbox(request: SandboxRequest): Promise<string> {
    const response = await this.#call<{ pod_sandbox_id: string }>(
      'RunPodSandbox',
      'RunPodSandboxRequest',
      'RunPodSandboxResponse',
      {
        config: {
          metadata: {
            name: request.name,
            uid: request.uid,
            namespace: request.namespace,
            attempt: request.attempt ?? 0,
          },
          // A hostname is at most 63 characters; a pod name can be longer.
          hostname: request.name.slice(0, 63),
          log_directory: this.#logDirectory,
          labels: { ...request.labels },
          annotations: { ...request.annotations },
          linux: {
            cgroup_parent: this.#cgroupParent,
            security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } },
          },
        },
      },
    );
    this.#created.add(response.pod_sandbox_id);
    return response.pod_sandbox_id;
  }

  async podSandboxStatus(id: string, options: { verbose?: boolean } = {}): Promise<SandboxStatus> {
    const response = await this.#call<{ status?: WireSandboxStatus; info: Record<string, string> }>(
      'PodSandboxStatus',
      'PodSandboxStatusRequest',
      'PodSandboxStatusResponse',
      {
        pod_sandbox_id: id,
        verbose: options.verbose ?? false,
      },
    );
    const s = response.status;
    if (s === undefined) throw new CriError('PodSandboxStatus', -1, `no status for sandbox ${id}`);
    return {
      id: s.id,
      state: s.state,
      ip: s.network?.ip ?? '',
      additionalIps: (s.network?.additional_ips ?? []).map((a) => a.ip),
      metadata: s.metadata ?? { name: '', uid: '', namespace: '', attempt: 0 },
      annotations: s.annotations,
      info: response.info,
    };
  }

  async stopPodSandbox(id: string): Promise<void> {
    await this.#call('StopPodSandbox', 'StopPodSandboxRequest', 'StopPodSandboxResponse', { pod_sandbox_id: id });
  }

  async removePodSandbox(id: string): Promise<void> {
    await this.#call('RemovePodSandbox', 'RemovePodSandboxRequest', 'RemovePodSandboxResponse', { pod_sandbox_id: id });
    this.#created.delete(id);
  }

  /** The sandboxes this client ran and has not removed (stop() cleans up even if listing fails). */
  created(): ReadonlySet<string> {
    return this.#created;
  }

  /** Ids of every sandbox containerd knows, ready or not. */
  async listPodSandbox(): Promise<string[]> {
    const response = await this.#call<{ items: Array<{ id: string }> }>(
      'ListPodSandbox',
      'ListPodSandboxRequest',
      'ListPodSandboxResponse',
      {},
    );
    return response.items.map((item) => item.id);
  }

  /** Status({verbose: true}): the runtime and network conditions and the CNI config load result. */
  async status(deadlineMs = DEFAULT_DEADLINE_MS): Promise<RuntimeStatus> {
    const response = await this.#call<WireStatusResponse>(
      'Status',
      'StatusRequest',
      'StatusResponse',
      { verbose: true },
      deadlineMs,
    );
    const conditions = response.status?.conditions ?? [];
    const runtime = conditions.find((c) => c.type === 'RuntimeReady');
    const network = conditions.find((c) => c.type === 'NetworkReady');
    return {
      runtimeReady: runtime?.status ?? false,
      networkReady: network?.status ?? false,
      networkReason: network?.reason ?? '',
      networkMessage: network?.message ?? '',
      lastCniLoadStatus: lastCniLoadStatus(response.info),
      info: response.info,
    };
  }

  close(): void {
    this.#client.close();
  }
}

/** containerd 1.6 puts the load result, JSON-encoded, under "lastCNILoadStatus". */
function lastCniLoadStatus(info: Record<string, string>): string | undefined {
  const raw = info.lastCNILoadStatus;
  if (raw === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(raw);
    return typeof value === 'string' ? value : raw;
  } catch {
    return raw;
  }
}

// ---------------------------------------------------------------------------------------------
// The CNI bin dir

let pluginBuilt = false;

/**
 * A private CNI bin dir for containerd 1.6, which takes a single bin_dir: links to the reference
 * `loopback`, `bridge` and `host-local`, Warren as `warren install --cni-bin-dir DIR --link`
 * installs it (built from the current sources once per process; `warren: false` leaves it out),
 * and `extra` links (name → target, e.g. a logging wrapper), which replace a reference plugin of
 * the same name. Removed at process exit.
 */
export function criBinDir(extra: Readonly<Record<string, string>> = {}, options: { warren?: boolean } = {}): string {
  const dir = tempDir('warren-cri-bin-');
  for (const plugin of ['loopback', 'bridge', 'host-local'])
    if (extra[plugin] === undefined) symlinkSync(join(REFERENCE_PLUGINS, plugin), join(dir, plugin));
  if (options.warren !== false) {
    if (!pluginBuilt) {
      buildPlugin();
      pluginBuilt = true;
    }
    const r = spawnSync(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', dir, '--link'], {
      cwd: REPO,
      env: { PATH: CHILD_PATH },
      encoding: 'utf8',
    });
    if (r.status !== 0)
      throw new Error(`warren install --cni-bin-dir ${dir} --link failed (${r.status}): ${r.stderr}${r.stdout}`);
  }
  for (const [name, target] of Object.entries(extra)) symlinkSync(target, join(dir, name));
  return dir;
}

/** A bin dir with only the reference plugins linked (no Warren build). */
function referenceBinDir(): string {
  return criBinDir({}, { warren: false });
}

// ---------------------------------------------------------------------------------------------
// The daemon

export interface CriContainerdOptions {
  /** The CNI bin dir (one dir: loopback, the main plugin and its IPAM); default: reference plugins. */
  readonly binDir?: string;
  /** The CNI conf dir; default: a private empty dir. */
  readonly confDir?: string;
  /** Extra environment for containerd, which libcni passes on to every plugin. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface CriContainerd {
  readonly dir: string;
  readonly socket: string;
  readonly confDir: string;
  readonly binDir: string;
  readonly cri: CriClient;
  /** The private cgroup parent every sandbox of this instance is put under. */
  readonly cgroupParent: string;
  /** containerd's PID. */
  readonly pid: number;
  /** How long starting the daemon and importing the sandbox image took. */
  readonly startMs: { readonly daemon: number; readonly imageImport: number };
  /** containerd's log (stderr) so far. */
  log(): string;
  /** `ctr` against this instance, in the CRI namespace. */
  ctr(...args: string[]): Promise<RunResult>;
  /**
   * Puts a CNI config into the conf dir the way containerd notices it: written to a hidden temp
   * file inside the dir, then renamed (containerd 1.6 reloads on WRITE/RENAME/REMOVE, not CREATE,
   * and misses a file moved in from another directory).
   */
  writeConfig(fileName: string, config: unknown): void;
  /** PIDs of the live containerd-shim-runc-v2 processes of this instance. */
  shimPids(): number[];
  /** Removes every sandbox, stops containerd and removes everything the instance left. */
  stop(): Promise<void>;
}

function listNames(dir: string): Set<string> {
  try {
    return new Set(readdirSync(dir));
  } catch {
    return new Set();
  }
}

function configToml(dir: string, socket: string, binDir: string, confDir: string): string {
  return [
    'version = 2',
    `root = "${join(dir, 'root')}"`,
    `state = "${join(dir, 'state')}"`,
    'oom_score = 0',
    '[grpc]',
    `  address = "${socket}"`,
    '[ttrpc]',
    `  address = "${socket}.ttrpc"`,
    '[plugins]',
    '  [plugins."io.containerd.internal.v1.opt"]',
    `    path = "${join(dir, 'opt')}"`,
    '  [plugins."io.containerd.grpc.v1.cri"]',
    `    sandbox_image = "${SANDBOX_IMAGE}"`,
    '    disable_apparmor = true',
    // root here lacks CAP_SYS_RESOURCE: lowering a score below the daemon's own would fail.
    '    restrict_oom_score_adj = true',
    '    disable_tcp_service = true',
    '    stream_server_address = "127.0.0.1"',
    '    stream_server_port = "0"',
    '    tolerate_missing_hugetlb_controller = true',
    '    disable_hugetlb_controller = true',
    '    [plugins."io.containerd.grpc.v1.cri".cni]',
    `      bin_dir = "${binDir}"`,
    `      conf_dir = "${confDir}"`,
    '      max_conf_num = 1',
    '    [plugins."io.containerd.grpc.v1.cri".containerd]',
    '      snapshotter = "overlayfs"',
    '      default_runtime_name = "runc"',
    '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
    '        runtime_type = "io.containerd.runc.v2"',
    '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
    '          SystemdCgroup = false',
    `          Root = "${join(dir, 'runc-root')}"`,
    '',
  ].join('\n');
}

/** Starts containerd with CRI on a private config and imports the sandbox image. */
export async function startCriContainerd(options: CriContainerdOptions = {}): Promise<CriContainerd> {
  // What exists before anything starts: only what appears afterwards is this instance's to remove.
  const before = {
    shimSockets: listNames(SHIM_SOCKET_DIR),
    netns: listNames(NETNS_DIR),
    cniResults: listNames(CNI_RESULTS_DIR),
  };
  for (const shared of SHARED_DIRS) if (!existsSync(shared)) writeFileSync(createdMarker(shared), '');
  const dir = tempDir(INSTANCE_DIR_PREFIX);
  const socket = join(dir, 'containerd.sock');
  const binDir = options.binDir ?? referenceBinDir();
  const confDir = options.confDir ?? join(dir, 'net.d');
  mkdirSync(confDir, { recursive: true });
  const logDirectory = join(dir, 'pod-logs');
  mkdirSync(logDirectory, { recursive: true });
  // cgroupfs syntax, one level below every hierarchy's root, unique to this instance.
  const cgroupName = `warren-cri-${randomBytes(6).toString('hex')}`;
  const cgroupParent = `/${cgroupName}`;
  const configPath = join(dir, 'config.toml');
  writeFileSync(configPath, configToml(dir, socket, binDir, confDir));

  const log: string[] = [];
  const logText = (): string => log.join('');
  const started = Date.now();
  const child: ChildProcess = track(
    spawn(CONTAINERD_BIN, ['--config', configPath, '--log-level', 'info'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: CHILD_PATH, ...options.env },
    }),
  );
  child.stderr?.on('data', (b: Buffer) => log.push(b.toString('utf8')));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve()); // never started
  });
  const hasExited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const cri = new CriClient(socket, logDirectory, cgroupParent);
  const ctr = (...args: string[]): Promise<RunResult> =>
    run(CTR_BIN, ['--address', socket, '--namespace', CRI_NAMESPACE, ...args]);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= teardown();
    return stopped;
  };
  const teardown = async (): Promise<void> => {
    // A daemon killed from outside can be a zombie Node has not reaped yet: not running either.
    const running = !hasExited() && child.pid !== undefined && !isGone(child.pid);
    const sandboxIds = new Set<string>([...cri.created(), ...sandboxIdsOnDisk(dir), ...shimIds(socket)]);
    const netnsPaths = new Set<string>();
    if (running) {
      // Through CRI while containerd runs, so containerd runs DEL and tears down what it made.
      const listed = await cri.listPodSandbox().catch(() => [] as string[]);
      for (const id of listed) sandboxIds.add(id);
      for (const id of sandboxIds) {
        // Its namespace, in case containerd cannot remove it (no network config to run DEL with).
        const status = await cri.podSandboxStatus(id, { verbose: true }).catch(() => undefined);
        if (status !== undefined) for (const path of netnsPathsIn(status.info.info ?? '')) netnsPaths.add(path);
        await cri.stopPodSandbox(id).catch(() => undefined);
        await cri.removePodSandbox(id).catch(() => undefined);
      }
    }
    cri.close();
    if (!hasExited()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    // A shim whose sandbox was removed exits by itself; one whose daemon died holds its task for ever.
    await killShims(socket, running ? 2_000 : 0);
    await killCgroupProcesses(cgroupName);
    unmountUnder(dir);
    // containerd's own database names every sandbox and namespace it made, even after a crash.
    const recorded = readMetadataDb(dir);
    for (const id of recorded.ids) sandboxIds.add(id);
    for (const path of recorded.netns) netnsPaths.add(path);
    // What is removed outside the temp dir is both new since start and provably this instance's,
    // so a concurrent instance (another test file) keeps its own.
    for (const name of listNames(NETNS_DIR)) {
      if (!before.netns.has(name) && netnsPaths.has(join(NETNS_DIR, name))) removeNetns(join(NETNS_DIR, name));
    }
    removeCgroupTree(cgroupName);
    const sockets = new Set([...sandboxIds].map((id) => shimSocketName(socket, id)));
    for (const name of listNames(SHIM_SOCKET_DIR))
      if (!before.shimSockets.has(name) && sockets.has(name)) rmSync(join(SHIM_SOCKET_DIR, name), { force: true });
    // libcni caches a result as <network>-<container id>-<ifname>.
    for (const name of listNames(CNI_RESULTS_DIR)) {
      if (!before.cniResults.has(name) && [...sandboxIds].some((id) => name.includes(`-${id}-`)))
        rmSync(join(CNI_RESULTS_DIR, name), { force: true });
    }
    for (const id of sandboxIds) {
      rmSync(join(RUN_DIR, 'io.containerd.runtime.v2.task', CRI_NAMESPACE, id), { recursive: true, force: true });
      rmSync(join(RUN_DIR, 'runc', CRI_NAMESPACE, id), { recursive: true, force: true });
    }
    if (options.binDir === undefined) removeDir(binDir);
    removeDir(dir);
    removeSharedDirsIfLast();
  };

  try {
    await waitFor(`containerd with CRI answering on ${socket}`, async () => {
      if (hasExited())
        throw new StopWaiting(`containerd exited (${child.exitCode ?? child.signalCode}): ${logText().slice(-2000)}`);
      if (!existsSync(socket) || !statSync(socket).isSocket()) return undefined;
      // The CRI plugin initialises after the socket is up; Status answers once it has.
      const s = await cri.status(2_000);
      return s.runtimeReady ? true : undefined;
    });
    const daemonMs = Date.now() - started;
    const importStarted = Date.now();
    const imported = await ctr('images', 'import', sandboxImageTar());
    if (imported.code !== 0)
      throw new Error(`ctr images import failed (${imported.code}): ${imported.stderr}${imported.stdout}`);
    const importMs = Date.now() - importStarted;
    const writeConfig = (fileName: string, config: unknown): void => {
      const temp = join(confDir, `.${fileName}.tmp`);
      writeFileSync(temp, typeof config === 'string' ? config : JSON.stringify(config));
      renameSync(temp, join(confDir, fileName));
    };
    return {
      dir,
      socket,
      confDir,
      binDir,
      cri,
      cgroupParent,
      pid: child.pid ?? -1,
      startMs: { daemon: daemonMs, imageImport: importMs },
      log: logText,
      ctr,
      writeConfig,
      shimPids: () => shimPids(socket).filter((pid) => !isGone(pid)),
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Cleanup

/** Directories containerd and libcni create outside the temp dir, shared by every instance. */
const SHARED_DIRS = [RUN_DIR, CNI_CACHE_DIR] as const;

/**
 * A file beside the instance dirs saying that a harness instance created `dir` (it did not exist
 * when the instance started), so the last instance to stop, in any process, removes it.
 */
function createdMarker(dir: string): string {
  return join(tmpdir(), `warren-cri-made${dir.replaceAll('/', '-')}`);
}

/**
 * When no instance is live any more (no instance dir left), removes the empty directories of each
 * shared dir a harness instance created. Instances that overlap each see the other's entries, so
 * this is left to whichever stops last; anything with a file in it (someone else's) stays.
 */
function removeSharedDirsIfLast(): void {
  if (readdirSync(tmpdir()).some((n) => n.startsWith(INSTANCE_DIR_PREFIX))) return;
  for (const shared of SHARED_DIRS) {
    const marker = createdMarker(shared);
    if (!existsSync(marker)) continue;
    removeEmptyTree(shared);
    if (!existsSync(shared)) rmSync(marker, { force: true });
  }
}

/** Sandbox ids containerd recorded in this instance's private root and state. */
function sandboxIdsOnDisk(dir: string): string[] {
  return [
    ...listNames(join(dir, 'root', 'io.containerd.grpc.v1.cri', 'sandboxes')),
    ...listNames(join(dir, 'state', 'io.containerd.runtime.v2.task', CRI_NAMESPACE)),
  ];
}

/**
 * The name of the shim socket containerd 1.6 makes for a task in /run/containerd/s: the hex
 * sha256 of "<daemon address>/<namespace>/<id>".
 */
function shimSocketName(socket: string, id: string): string {
  return createHash('sha256')
    .update(join(socket, CRI_NAMESPACE, id))
    .digest('hex');
}

/** The shim socket path of a sandbox of the daemon listening on `socket`. */
export function shimSocketPath(socket: string, id: string): string {
  return join(SHIM_SOCKET_DIR, shimSocketName(socket, id));
}

/** Network namespace paths named in a text (containerd's JSON info, its database). */
function netnsPathsIn(text: string): string[] {
  return [...new Set(text.match(/\/var\/run\/netns\/cni-[0-9a-f-]{36}/g) ?? [])];
}

/**
 * Sandbox ids and network namespace paths in containerd's metadata database (bbolt; the values
 * are stored as plain bytes, so a scan finds them without a bolt reader).
 */
function readMetadataDb(dir: string): { ids: string[]; netns: string[] } {
  let text: string;
  try {
    text = readFileSync(join(dir, 'root', 'io.containerd.metadata.v1.bolt', 'meta.db')).toString('latin1');
  } catch {
    return { ids: [], netns: [] };
  }
  return { ids: [...new Set(text.match(/(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/g) ?? [])], netns: netnsPathsIn(text) };
}

/** The task ids (`-id`) of this daemon's shims. */
function shimIds(socket: string): string[] {
  return shimProcesses(socket).flatMap(({ argv }) => {
    const at = argv.indexOf('-id');
    return at >= 0 && argv[at + 1] !== undefined ? [argv[at + 1] as string] : [];
  });
}

function shimPids(socket: string): number[] {
  return shimProcesses(socket).map(({ pid }) => pid);
}

/** The containerd-shim-runc-v2 processes started for the daemon listening on `socket`. */
function shimProcesses(socket: string): Array<{ pid: number; argv: string[] }> {
  const found: Array<{ pid: number; argv: string[] }> = [];
  for (const entry of listNames('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(join('/proc', entry, 'cmdline'), 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!(argv[0] ?? '').endsWith('containerd-shim-runc-v2')) continue;
    const at = argv.indexOf('-address');
    if (at >= 0 && argv[at + 1] === socket) found.push({ pid: Number(entry), argv });
  }
  return found;
}

/** Waits up to `graceMs` for the shims of this daemon to exit, then kills those still there. */
async function killShims(socket: string, graceMs: number): Promise<void> {
  const pids = shimPids(socket).filter((pid) => !isGone(pid));
  if (pids.length === 0) return;
  if (graceMs > 0)
    await waitFor('shims to exit', () => (pids.every(isGone) ? true : undefined), graceMs).catch(() => undefined);
  for (const pid of pids) if (!isGone(pid)) signal(pid, 'SIGKILL');
  await waitFor(`shims ${pids.join(', ')} to be gone`, () => (pids.every(isGone) ? true : undefined));
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

/** The cgroup hierarchies: the unified root, or every v1 controller mount (and cgroup2 beside them). */
function cgroupTrees(): string[] {
  if (existsSync(join(CGROUP_ROOT, 'cgroup.controllers'))) return [CGROUP_ROOT];
  return readdirSync(CGROUP_ROOT, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => join(CGROUP_ROOT, d.name));
}

/** Directories of a cgroup subtree, children before parents. */
function subtreeDeepestFirst(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const child of readdirSync(dir, { withFileTypes: true }))
    if (child.isDirectory()) out.push(...subtreeDeepestFirst(join(dir, child.name)));
  out.push(dir);
  return out;
}

/**
 * Processes still in the private cgroup parent belong to sandboxes this instance started (a
 * sandbox's process outlives its shim): kill them so the directories can go.
 */
async function killCgroupProcesses(cgroupName: string): Promise<void> {
  const pids = new Set<number>();
  for (const tree of cgroupTrees()) {
    for (const d of subtreeDeepestFirst(join(tree, cgroupName))) {
      let procs = '';
      try {
        procs = readFileSync(join(d, 'cgroup.procs'), 'utf8');
      } catch {
        continue;
      }
      for (const line of procs.split('\n')) if (line.trim() !== '') pids.add(Number(line));
    }
  }
  if (pids.size === 0) return;
  for (const pid of pids) signal(pid, 'SIGKILL');
  await waitFor(`processes ${[...pids].join(', ')} of cgroup ${cgroupName} to be gone`, () =>
    [...pids].every(isGone) ? true : undefined,
  );
}

function removeCgroupTree(cgroupName: string): void {
  // A directory still busy stays, for a test that checks the tree is gone to report.
  for (const tree of cgroupTrees()) for (const d of subtreeDeepestFirst(join(tree, cgroupName))) tryRmdir(d);
}

/** The cgroup directories of a private parent that still exist, in any hierarchy. */
export function cgroupDirsOf(cgroupParent: string): string[] {
  return cgroupTrees()
    .map((tree) => join(tree, cgroupParent))
    .filter((d) => existsSync(d));
}

function tryRmdir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not empty (someone else's entries) or already gone
  }
}

/** Removes the empty directories of a tree, deepest first; anything with a file in it stays. */
function removeEmptyTree(dir: string): void {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) if (e.isDirectory()) removeEmptyTree(join(dir, e.name));
  tryRmdir(dir);
}

/** A netns file is a bind mount of an nsfs inode: unmount it, then unlink it. */
function removeNetns(path: string): void {
  const real = path.replace(/^\/var\/run\//, '/run/');
  if (mountPoints().some((m) => m === path || m === real)) umount(path);
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * Writes a node's primary network as the tests' CRI runs use it, a bridge with host-local
 * addresses, into `confDir` as `10-bridge.conflist`: written aside and renamed, so containerd never
 * reads half of it.
 */
export function writeBridgePrimary(
  confDir: string,
  o: { readonly network: string; readonly bridge: string; readonly subnet: string; readonly dataDir: string },
): void {
  const temp = join(confDir, '.primary.tmp');
  writeFileSync(
    temp,
    JSON.stringify({
      cniVersion: '1.0.0',
      name: o.network,
      plugins: [
        {
          type: 'bridge',
          bridge: o.bridge,
          isGateway: true,
          ipMasq: false,
          ipam: { type: 'host-local', subnet: o.subnet, dataDir: o.dataDir },
        },
      ],
    }),
  );
  renameSync(temp, join(confDir, '10-bridge.conflist'));
}
