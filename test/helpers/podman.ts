/**
 * A real podman (Debian's podman 4.3 with its CNI backend) for tests, private in everything it can
 * be: its own containers.conf and storage.conf in a temp dir (`warren-podman-*`) holding its
 * storage, run root, tmp dir, volumes, events log and CNI network configs, `lock_type = "file"` so
 * no host-wide shm lock is shared, and a busybox image imported from Debian's busybox-static.
 *
 * close() leaves nothing of it behind: every container removed (`podman rm -a -f -t 0`), then
 * whatever podman left — mounts under the dir (deepest first), the network namespaces of its
 * containers under /run/netns, libcni's result cache entries for its containers and networks
 * (a container whose CNI DEL failed is removed by podman, its entry is not), runc state,
 * their cgroup directories, and the `libpod_parent` cgroups when podman made them for this harness
 * — and the dir itself. What it cannot know it does not touch: bridges the CNI bridge plugin
 * made belong to the test that chose their names (`deleteBridge`), and podman's host-wide
 * /var/lib/containers/cache (its blob-info cache, written on import) is shared by every podman.
 *
 * A missing podman is a failure, not a skip: `requirePodman()` throws saying what is missing.
 */
import { randomBytes, randomInt } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { type RunResult, CHILD_PATH, isRoot, processesUsing, removeDir, run, tempDir, waitFor } from './processes.ts';

export { processesUsing };
import { unmountUnder } from './mounts.ts';

export const PODMAN_BIN = '/usr/bin/podman';
export const BUSYBOX_IMAGE = 'localhost/warren/busybox:latest';
export const REFERENCE_CNI_DIR = '/usr/lib/cni';
const BUSYBOX = '/bin/busybox';
const NETNS_DIR = '/run/netns';
const CNI_RESULTS_DIR = '/var/lib/cni/results';
const RUNC_STATE_DIR = '/run/runc';
const CGROUP_ROOT = '/sys/fs/cgroup';
const CGROUP_PARENT = 'libpod_parent';

/** What this machine lacks to run the podman tests ([] when nothing). */
export function podmanMissing(): string[] {
  const missing: string[] = [];
  if (!isRoot()) missing.push('root (podman runs rootful here)');
  const need: ReadonlyArray<readonly [string, string]> = [
    [PODMAN_BIN, 'podman (apt-get install -y podman)'],
    ['/usr/bin/conmon', 'conmon (comes with podman)'],
    ['/usr/sbin/runc', 'runc'],
    [BUSYBOX, 'busybox-static (apt-get install -y busybox-static)'],
    [join(REFERENCE_CNI_DIR, 'bridge'), 'the reference CNI plugins (apt-get install -y containernetworking-plugins)'],
    [join(REFERENCE_CNI_DIR, 'host-local'), 'the host-local CNI plugin'],
  ];
  for (const [path, what] of need) if (!existsSync(path)) missing.push(`${what}: no ${path}`);
  return missing;
}

/** Throws, naming everything missing, unless podman tests can run here. Tests call it first. */
export function requirePodman(): void {
  const missing = podmanMissing();
  if (missing.length > 0) throw new Error(`the podman tests need ${missing.join('; ')}`);
}

export interface BridgeNetwork {
  /** The CNI network name (`--network NAME`). */
  readonly name: string;
  /** The Linux bridge the plugin creates; the test deletes it with `deleteBridge`. */
  readonly bridge: string;
  readonly subnet: string;
  /** The subnet's first three octets and a dot, for matching addresses. */
  readonly prefix: string;
  readonly conflist: string;
}

export interface Podman {
  readonly dir: string;
  readonly bin: string;
  /** The environment every podman invocation needs (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF). */
  readonly env: NodeJS.ProcessEnv;
  /** The busybox image (sh, sleep, true, false, echo; no ip). */
  readonly image: string;
  readonly containersConf: string;
  readonly storageConf: string;
  readonly eventsLog: string;
  /** podman's CNI network config dir. */
  readonly networkDir: string;
  run(args: readonly string[]): Promise<RunResult>;
  /** Runs podman; throws with its stderr unless it exits 0; the trimmed stdout. */
  ok(args: readonly string[]): Promise<string>;
  /** `podman rm -f -t 0` these containers (names or IDs); missing ones are not an error. */
  rm(...containers: string[]): Promise<void>;
  /** Writes a conflist into the network config dir; the path. */
  writeNetwork(name: string, conflist: object): string;
  /** A bridge + host-local network on a fresh /24 of 10.237.0.0/16, host-local's data under the dir. */
  bridgeNetwork(): BridgeNetwork;
  /** Deletes a bridge a CNI bridge plugin made (missing is fine). */
  deleteBridge(name: string): Promise<void>;
  /** The full ID of a container. */
  idOf(container: string): Promise<string>;
  /** Removes everything (see the header). Idempotent. */
  close(): Promise<void>;
}

/** The busybox rootfs tar, built once per test process. */
let rootfsTar: string | undefined;

function busyboxTar(): Promise<string> {
  if (rootfsTar !== undefined) return Promise.resolve(rootfsTar);
  const dir = tempDir('warren-podman-rootfs-');
  const rootfs = join(dir, 'rootfs');
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  for (const d of ['proc', 'sys', 'dev', 'tmp', 'etc']) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync(BUSYBOX, join(rootfs, 'bin', 'busybox'));
  for (const applet of ['sh', 'sleep', 'true', 'false', 'echo', 'cat'])
    symlinkSync('busybox', join(rootfs, 'bin', applet));
  const tar = join(dir, 'rootfs.tar');
  return run('tar', ['-C', rootfs, '-cf', tar, '.']).then((r) => {
    if (r.code !== 0) throw new Error(`tar failed: ${r.stderr}`);
    rootfsTar = tar;
    return tar;
  });
}

const usedThirdOctets = new Set<number>();

function freshSubnet(): { subnet: string; prefix: string } {
  let third = randomInt(0, 256);
  while (usedThirdOctets.has(third)) third = (third + 1) % 256;
  usedThirdOctets.add(third);
  return { subnet: `10.237.${third}.0/24`, prefix: `10.237.${third}.` };
}

/** A unique name: `prefix` and random hex, at most `length` characters (bridges: 15). */
export function uniquePodmanName(prefix: string, length = 15): string {
  return `${prefix}${randomBytes(8).toString('hex')}`.slice(0, length);
}

function cgroupHierarchies(): string[] {
  if (existsSync(join(CGROUP_ROOT, 'cgroup.controllers'))) return [CGROUP_ROOT];
  try {
    return readdirSync(CGROUP_ROOT).map((c) => join(CGROUP_ROOT, c));
  } catch {
    return [];
  }
}

function tryRmdir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // busy (another podman uses it), not empty, or already gone
  }
}

/** A private podman; `cniPluginDirs` come before /usr/lib/cni in its plugin search path. */
export async function startPodman(options: { cniPluginDirs?: readonly string[] } = {}): Promise<Podman> {
  requirePodman();
  const dir = tempDir('warren-podman-');
  const networkDir = join(dir, 'net.d');
  mkdirSync(networkDir);
  const containersConf = join(dir, 'containers.conf');
  const storageConf = join(dir, 'storage.conf');
  const eventsLog = join(dir, 'events.log');
  const toml = (s: string): string => JSON.stringify(s);
  writeFileSync(
    containersConf,
    [
      '[containers]',
      // The default raises nofile/nproc, which needs CAP_SYS_RESOURCE this machine may not give.
      'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]',
      '[network]',
      'network_backend = "cni"',
      `cni_plugin_dirs = [${[...(options.cniPluginDirs ?? []), REFERENCE_CNI_DIR].map(toml).join(', ')}]`,
      `network_config_dir = ${toml(networkDir)}`,
      '[engine]',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `events_logfile_path = ${toml(eventsLog)}`,
      `tmp_dir = ${toml(join(dir, 'tmp'))}`,
      `volume_path = ${toml(join(dir, 'volumes'))}`,
      'runtime = "runc"',
      // Else the host-wide shm lock is shared with every other podman. (No static_dir: with it,
      // conmon's cleanup hangs 20 s.)
      'lock_type = "file"',
      '',
    ].join('\n'),
  );
  writeFileSync(
    storageConf,
    [
      '[storage]',
      'driver = "overlay"',
      `graphroot = ${toml(join(dir, 'graph'))}`,
      `runroot = ${toml(join(dir, 'run'))}`,
      '',
    ].join('\n'),
  );
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: CHILD_PATH,
    CONTAINERS_CONF: containersConf,
    CONTAINERS_STORAGE_CONF: storageConf,
  };
  const cgroupParentExisted = cgroupHierarchies().some((h) => existsSync(join(h, CGROUP_PARENT)));
  let closed: Promise<void> | undefined;
  /** Networks written here: libcni's cache entries for them go at close (a failed DEL leaves one). */
  const networks = new Set<string>();

  const podmanRun = (args: readonly string[]): Promise<RunResult> => run(PODMAN_BIN, args, { env });
  const ok = async (args: readonly string[]): Promise<string> => {
    const r = await podmanRun(args);
    if (r.code !== 0) throw new Error(`podman ${args.join(' ')} failed (${r.code ?? r.signal}): ${r.stderr.trim()}`);
    return r.stdout.trim();
  };

  /** Every container's ID and network namespace (from inspect), to clean up after them. */
  const containers = async (): Promise<Array<{ id: string; netns: string }>> => {
    const ids = (await ok(['ps', '-a', '--no-trunc', '--format', '{{.ID}}'])).split('\n').filter(Boolean);
    if (ids.length === 0) return [];
    const lines = (await ok(['inspect', '--format', '{{.ID}} {{.NetworkSettings.SandboxKey}}', ...ids])).split('\n');
    return lines.filter(Boolean).map((l) => {
      const [id = '', netns = ''] = l.split(' ');
      return { id, netns };
    });
  };

  const handle: Podman = {
    dir,
    bin: PODMAN_BIN,
    env,
    image: BUSYBOX_IMAGE,
    containersConf,
    storageConf,
    eventsLog,
    networkDir,
    run: podmanRun,
    ok,
    async rm(...names) {
      if (names.length > 0) await podmanRun(['rm', '-f', '-t', '0', '--ignore', ...names]);
    },
    writeNetwork(name, conflist) {
      networks.add(name);
      const path = join(networkDir, `${name}.conflist`);
      writeFileSync(path, JSON.stringify(conflist, null, 2));
      return path;
    },
    bridgeNetwork() {
      const name = uniquePodmanName('wrp-net-', 24);
      const bridge = uniquePodmanName('wrp');
      const { subnet, prefix } = freshSubnet();
      const conflist = handle.writeNetwork(name, {
        cniVersion: '0.4.0',
        name,
        plugins: [
          {
            type: 'bridge',
            bridge,
            isGateway: true,
            ipMasq: false,
            ipam: { type: 'host-local', dataDir: join(dir, 'host-local'), ranges: [[{ subnet }]] },
          },
        ],
      });
      return { name, bridge, subnet, prefix, conflist };
    },
    async deleteBridge(name) {
      await run('ip', ['link', 'del', name]);
    },
    idOf: (container) => ok(['inspect', '--format', '{{.ID}}', container]),
    close() {
      closed ??= (async () => {
        let known: Array<{ id: string; netns: string }> = [];
        try {
          known = await containers();
        } catch {
          // podman itself is broken: clean what can be found without it
        }
        await podmanRun(['rm', '-a', '-f', '-t', '0']);
        for (const { id, netns } of known) {
          if (netns.startsWith(`${NETNS_DIR}/`) && existsSync(netns)) {
            await run('umount', [netns]);
            rmSync(netns, { force: true });
          }
          for (const entry of safeList(CNI_RESULTS_DIR))
            if (entry.includes(`-${id}-`)) rmSync(join(CNI_RESULTS_DIR, entry), { force: true });
          rmSync(join(RUNC_STATE_DIR, id), { recursive: true, force: true });
          for (const h of cgroupHierarchies()) tryRmdir(join(h, CGROUP_PARENT, `libpod-${id}`));
        }
        // podman removes a container whose CNI DEL failed, but libcni's cache entry stays.
        for (const entry of safeList(CNI_RESULTS_DIR))
          if ([...networks].some((n) => entry.startsWith(`${n}-`)))
            rmSync(join(CNI_RESULTS_DIR, entry), { force: true });
        // conmon starts `podman container cleanup` when a container ends; one still running would
        // make its storage directories again after they are removed.
        // An adapter killed with SIGKILL leaves its `podman events` follower behind, which ends only
        // when it next writes: what is still running after a while is stopped, by PID.
        await waitFor(
          'podman processes using the private dir to end',
          () => (processesUsing(dir).length === 0 ? true : undefined),
          10_000,
        ).catch(() => undefined);
        for (const pid of processesUsing(dir)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // ended meanwhile
          }
        }
        await waitFor(
          'podman processes using the private dir to be gone',
          () => (processesUsing(dir).length === 0 ? true : undefined),
          10_000,
        ).catch(() => undefined);
        unmountUnder(dir);
        if (!cgroupParentExisted) {
          for (const h of cgroupHierarchies()) {
            tryRmdir(join(h, CGROUP_PARENT, 'conmon'));
            tryRmdir(join(h, CGROUP_PARENT));
          }
        }
        removeDir(dir);
      })();
      return closed;
    },
  };

  try {
    await ok(['import', '--quiet', await busyboxTar(), BUSYBOX_IMAGE]);
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
