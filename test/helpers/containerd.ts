/**
 * A real containerd (Debian's containerd 1.6) for tests, started with a private config: its own
 * root, state and sockets in a temp dir, the CRI plugin off. Containers run without an image on a
 * busybox rootfs. Everything it leaves outside its temp dir (runtime state under /run/containerd,
 * cgroup directories of the namespaces the test used) is removed by stop().
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  rmdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
  copyFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { type RunResult, StopWaiting, run, tempDir, track, untilReady, waitFor } from './processes.ts';

export const CONTAINERD_BIN = '/usr/bin/containerd';
export const CTR_BIN = '/usr/bin/ctr';

export function haveContainerd(): boolean {
  return (
    existsSync(CONTAINERD_BIN) && existsSync(CTR_BIN) && existsSync('/usr/sbin/runc') && existsSync('/bin/busybox')
  );
}

export interface Containerd {
  readonly dir: string;
  readonly socket: string;
  /** A rootfs with busybox, for `ctr run --rootfs`. */
  readonly rootfs: string;
  ctr(namespace: string, ...args: string[]): Promise<RunResult>;
  /** Injects an event: `containerd publish`, stdin a protobuf Any. */
  publish(namespace: string, topic: string, any: Buffer): Promise<RunResult>;
  /** Starts (or starts again) the daemon; `socket` overrides where it listens this time. */
  start(socket?: string): Promise<void>;
  /** SIGTERM and wait for it to exit. */
  stopDaemon(): Promise<void>;
  /** Stops the daemon and removes everything it left, for these namespaces. */
  stop(namespaces: readonly string[]): Promise<void>;
}

function busyboxRootfs(dir: string): string {
  const rootfs = join(dir, 'rootfs');
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  for (const d of ['proc', 'sys', 'dev', 'tmp', 'etc']) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync('/bin/busybox', join(rootfs, 'bin', 'busybox'));
  for (const applet of ['sh', 'sleep', 'true', 'false', 'echo']) symlinkSync('busybox', join(rootfs, 'bin', applet));
  return rootfs;
}

/** A containerd with a private config; `start: false` prepares it without starting the daemon. */
export async function startContainerd(options: { start?: boolean } = {}): Promise<Containerd> {
  const dir = tempDir('warren-ctd-');
  // containerd keeps runtime state under /run/containerd whatever its config says.
  const runDirExisted = existsSync('/run/containerd');
  const socket = join(dir, 'containerd.sock');
  const rootfs = busyboxRootfs(dir);
  let child: ChildProcess | undefined;
  let listening = socket;
  const configFor = (address: string): string => {
    const path = join(dir, `config-${address === socket ? 'main' : 'other'}.toml`);
    writeFileSync(
      path,
      [
        'version = 2',
        `root = "${join(dir, 'root')}"`,
        `state = "${join(dir, 'state')}"`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = "${address}"`,
        '[ttrpc]',
        `  address = "${address}.ttrpc"`,
      ].join('\n'),
    );
    return path;
  };
  const handle: Containerd = {
    dir,
    socket,
    rootfs,
    ctr: (namespace, ...args) => run(CTR_BIN, ['--address', listening, '--namespace', namespace, ...args]),
    publish: (namespace, topic, any) =>
      run(CONTAINERD_BIN, ['--address', listening, 'publish', '--namespace', namespace, '--topic', topic], {
        stdin: any,
      }),
    async start(at = socket) {
      listening = at;
      const log: string[] = [];
      const c = spawn(CONTAINERD_BIN, ['--config', configFor(at), '--log-level', 'warn'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      c.stderr?.on('data', (b: Buffer) => log.push(b.toString('utf8')));
      child = track(c);
      // A start that fails leaves no daemon behind (it would keep the test file alive).
      await untilReady(c, () =>
        waitFor(`containerd listening on ${at}`, async () => {
          if (c.exitCode !== null || c.signalCode !== null)
            throw new StopWaiting(`containerd exited ${c.exitCode ?? c.signalCode}: ${log.join('').slice(-1000)}`);
          if (!existsSync(at) || !statSync(at).isSocket()) return undefined;
          const r = await run(CTR_BIN, ['--address', at, 'version']);
          return r.code === 0 ? true : undefined;
        }),
      );
    },
    async stopDaemon() {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((resolve) => c.once('exit', resolve));
      c.kill('SIGTERM');
      await exited;
    },
    async stop(namespaces) {
      if (child !== undefined) {
        // Leave no task running: kill and delete what is left in our namespaces first.
        for (const ns of namespaces) {
          const tasks = await handle.ctr(ns, 'tasks', 'list', '-q');
          for (const id of tasks.stdout.split('\n').filter(Boolean)) {
            await handle.ctr(ns, 'tasks', 'kill', '-s', 'SIGKILL', id);
            await handle.ctr(ns, 'tasks', 'delete', '-f', id);
          }
          const containers = await handle.ctr(ns, 'containers', 'list', '-q');
          for (const id of containers.stdout.split('\n').filter(Boolean))
            await handle.ctr(ns, 'containers', 'delete', id);
        }
      }
      await handle.stopDaemon();
      for (const ns of namespaces) {
        rmSync(join('/run/containerd/io.containerd.runtime.v2.task', ns), { recursive: true, force: true });
        rmSync(join('/run/containerd/runc', ns), { recursive: true, force: true });
        removeCgroups(ns);
      }
      if (!runDirExisted) rmSync('/run/containerd', { recursive: true, force: true });
    },
  };
  if (options.start !== false) await handle.start();
  return handle;
}

/** Removes the cgroup directories runc made for a namespace (v1 controllers and the unified tree). */
function removeCgroups(namespace: string): void {
  const base = '/sys/fs/cgroup';
  const trees = existsSync(join(base, 'cgroup.controllers')) ? [base] : readdirSync(base).map((c) => join(base, c));
  for (const tree of trees) {
    const dir = join(tree, namespace);
    if (!existsSync(dir)) continue;
    for (const child of readdirSync(dir, { withFileTypes: true }))
      if (child.isDirectory()) tryRmdir(join(dir, child.name));
    tryRmdir(dir);
  }
}

function tryRmdir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // still busy or already gone: nothing more a test can do
  }
}
