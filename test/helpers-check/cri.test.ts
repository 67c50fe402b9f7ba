/**
 * The containerd-with-CRI harness (test/helpers/cri.ts) against Debian's containerd 1.6 itself:
 * pod sandboxes run, stopped and removed through the CRI the way a kubelet drives them, with the
 * reference bridge and host-local plugins on a private bridge and subnet; the CNI calls containerd
 * makes are recorded by a wrapper around bridge. Every test checks that stop() leaves nothing on
 * the machine — no network namespace, shim socket, libcni cache entry, cgroup directory, mount or
 * process of the instance — including after a failed sandbox and after containerd was killed.
 * Nothing sleeps: waits are polls with deadlines.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { type TestContext, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import { REFERENCE_PLUGINS } from '../helpers/cni.ts';
import {
  type CriContainerd,
  CriError,
  INSTANCE_DIR_PREFIX,
  type SandboxStatus,
  cgroupDirsOf,
  criBinDir,
  criSkip,
  CNI_RESULTS_DIR,
  shimSocketPath,
  startCriContainerd,
} from '../helpers/cri.ts';
import { addressesIn, bridgeName, deleteLink } from '../helpers/netns.ts';
import { isGone, tempDir, waitFor } from '../helpers/processes.ts';

const skip = criSkip();

const NETNS_DIR = '/var/run/netns';
const SHIM_SOCKET_DIR = '/run/containerd/s';
const NETWORK = 'wrn-cri-check';

function names(dir: string): Set<string> {
  try {
    return new Set(readdirSync(dir));
  } catch {
    return new Set();
  }
}

const usedThirdOctets = new Set<number>();

/** A /24 in 10.238.0.0/16, a range no other test uses; never the same twice in this process. */
function privateSubnet(): { subnet: string; prefix: string } {
  let third = randomInt(0, 256);
  while (usedThirdOctets.has(third)) third = (third + 1) % 256;
  usedThirdOctets.add(third);
  return { subnet: `10.238.${third}.0/24`, prefix: `10.238.${third}.` };
}

function bridgeConflist(bridge: string, subnet: string, dataDir: string): object {
  return {
    cniVersion: '1.0.0',
    name: NETWORK,
    plugins: [
      {
        type: 'bridge',
        bridge,
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]] },
      },
    ],
  };
}

/** The addresses host-local still holds in its data dir (one file per address). */
function hostLocalReservations(dataDir: string): string[] {
  return [...names(join(dataDir, NETWORK))].filter((n) => /^\d+\.\d+\.\d+\.\d+$/.test(n));
}

interface CniCallRecord {
  readonly command: string;
  readonly containerID: string;
  readonly netns: string;
  readonly ifname: string;
  readonly args: string;
  /** A variable given to containerd, as the plugin saw it. */
  readonly mark: string;
}

/** A bin dir whose `bridge` records each call (one tab-separated line), then runs the real one. */
function recordingBinDir(): { binDir: string; calls: () => CniCallRecord[] } {
  const dir = tempDir('warren-cri-rec-');
  const log = join(dir, 'calls.log');
  const wrapper = join(dir, 'bridge');
  writeFileSync(
    wrapper,
    [
      '#!/bin/sh',
      `printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$WARREN_CRI_MARK" >> '${log}'`,
      `exec ${join(REFERENCE_PLUGINS, 'bridge')}`,
      '',
    ].join('\n'),
  );
  chmodSync(wrapper, 0o755);
  const binDir = criBinDir({ bridge: wrapper }, { warren: false });
  const calls = (): CniCallRecord[] => {
    if (!existsSync(log)) return [];
    return readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const [command = '', containerID = '', netns = '', ifname = '', args = '', mark = ''] = l.split('\t');
        return { command, containerID, netns, ifname, args, mark };
      });
  };
  return { binDir, calls };
}

/** The sandbox's network namespace path and process, from containerd's verbose status info. */
function sandboxDetails(status: SandboxStatus): { netns: string; pid: number } {
  const info = JSON.parse(status.info.info ?? '{}') as {
    pid?: number;
    runtimeSpec?: { linux?: { namespaces?: Array<{ type: string; path?: string }> } };
  };
  const network = info.runtimeSpec?.linux?.namespaces?.find((n) => n.type === 'network');
  return { netns: network?.path ?? '', pid: info.pid ?? 0 };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function runTimed(t: TestContext, instance: CriContainerd, name: string): Promise<{ id: string; ms: number }> {
  const started = performance.now();
  const id = await instance.cri.runPodSandbox({ name, uid: `uid-${name}`, namespace: 'wrn-check' });
  const ms = performance.now() - started;
  t.diagnostic(`RunPodSandbox ${name} (bridge + host-local): ${ms.toFixed(0)} ms`);
  return { id, ms };
}

async function networkReady(instance: CriContainerd): Promise<void> {
  await waitFor('containerd to load the conflist', async () =>
    (await instance.cri.status()).networkReady ? true : undefined,
  );
}

// ---------------------------------------------------------------------------------------------
// What an instance leaves behind

/**
 * Whether another containerd may be making namespaces and shim sockets beside this test: a
 * containerd process, or another harness instance's temp dir (which lives until its stop() is
 * done), other than `own`.
 */
function othersLive(own?: string): boolean {
  const instances = [...names(tmpdir())].filter((n) => n.startsWith(INSTANCE_DIR_PREFIX) && join(tmpdir(), n) !== own);
  if (instances.length > 0) return true;
  for (const pid of names('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
      if (basename(argv0) === 'containerd' && !isGone(Number(pid))) return true;
    } catch {
      // gone
    }
  }
  return false;
}

interface MachineSnapshot {
  readonly netns: Set<string>;
  readonly shimSockets: Set<string>;
  /** Whether /run/containerd and /var/lib/cni existed. */
  readonly sharedDirs: readonly boolean[];
  /** No other containerd was running when the snapshot was taken. */
  readonly quiet: boolean;
}

const SHARED_DIRS = ['/run/containerd', '/var/lib/cni'];

function snapshot(): MachineSnapshot {
  return {
    netns: names(NETNS_DIR),
    shimSockets: names(SHIM_SOCKET_DIR),
    sharedDirs: SHARED_DIRS.map((d) => existsSync(d)),
    quiet: !othersLive(),
  };
}

const added = (dir: string, before: Set<string>): string[] => [...names(dir)].filter((n) => !before.has(n));

/** What a test learned belongs to one instance: its sandboxes, their namespaces, its processes. */
interface Owned {
  readonly ids: Set<string>;
  readonly netns: Set<string>;
  readonly pids: number[];
}

function owned(instance: CriContainerd): Owned {
  return { ids: new Set(), netns: new Set(), pids: [instance.pid] };
}

/** A sandbox's verbose status, noting its id, namespace and process, and the instance's shims. */
async function note(instance: CriContainerd, own: Owned, id: string): Promise<SandboxStatus> {
  const status = await instance.cri.podSandboxStatus(id, { verbose: true });
  const { netns, pid } = sandboxDetails(status);
  own.ids.add(id);
  if (netns !== '') own.netns.add(netns);
  if (pid > 0) own.pids.push(pid);
  own.pids.push(...instance.shimPids());
  return status;
}

/** Network namespace inodes some process is in. */
function netnsInUse(): Set<number> {
  const inodes = new Set<number>();
  for (const pid of names('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const m = /^net:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/ns/net`));
      if (m) inodes.add(Number(m[1]));
    } catch {
      // gone, or a kernel thread
    }
  }
  return inodes;
}

/** Unix socket paths something listens on (in this network namespace, where shims run). */
function boundSocketPaths(): Set<string> {
  return new Set(
    readFileSync('/proc/net/unix', 'utf8')
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/)[7] ?? '')
      .filter((p) => p !== ''),
  );
}

/**
 * After stop(): nothing of the instance is left on the machine. Its own sandboxes' namespaces,
 * shim sockets, task state and cache entries are checked always; the machine-wide checks (no new
 * network namespace no process is in, no new shim socket nothing listens on, nothing there before
 * is gone) only when no other containerd ran beside the test, whose own would count.
 */
function assertNothingLeft(
  t: TestContext,
  instance: CriContainerd,
  before: MachineSnapshot,
  own: Owned,
  bridge: string,
): void {
  for (const path of own.netns) assert.equal(existsSync(path), false, `network namespace ${path} of a sandbox`);
  for (const id of own.ids) {
    assert.equal(existsSync(shimSocketPath(instance.socket, id)), false, `shim socket of sandbox ${id}`);
    assert.equal(
      existsSync(join('/run/containerd/io.containerd.runtime.v2.task/k8s.io', id)),
      false,
      `task state of ${id}`,
    );
    assert.equal(existsSync(join('/run/containerd/runc/k8s.io', id)), false, `runc state of ${id}`);
    assert.deepEqual(
      [...names(CNI_RESULTS_DIR)].filter((n) => n.includes(id)),
      [],
      `libcni cache entries of ${id}`,
    );
  }
  if (before.quiet && !othersLive()) {
    const inUse = netnsInUse();
    assert.deepEqual(
      added(NETNS_DIR, before.netns).filter(
        (n) => n.startsWith('cni-') && !inUse.has(statSync(join(NETNS_DIR, n)).ino),
      ),
      [],
      'new network namespaces no process is in',
    );
    const bound = boundSocketPaths();
    assert.deepEqual(
      added(SHIM_SOCKET_DIR, before.shimSockets).filter((n) => !bound.has(join(SHIM_SOCKET_DIR, n))),
      [],
      'new shim sockets nothing listens on',
    );
    for (const name of before.netns)
      assert.ok(existsSync(join(NETNS_DIR, name)), `network namespace ${name}, there before, is still there`);
    assert.deepEqual(
      SHARED_DIRS.map((d) => existsSync(d)),
      before.sharedDirs,
      `${SHARED_DIRS.join(' and ')} exist exactly when they did before`,
    );
  } else {
    t.diagnostic(
      "another containerd ran beside this test: machine-wide checks skipped, this instance's own leftovers checked",
    );
  }
  assert.deepEqual(cgroupDirsOf(instance.cgroupParent), [], 'cgroup directories of the private parent');
  assert.deepEqual(
    own.pids.filter((pid) => !isGone(pid)),
    [],
    'containerd, its shims and the sandbox processes are gone',
  );
  assert.deepEqual(instance.shimPids(), [], "shims naming this instance's socket");
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(instance.dir));
  assert.deepEqual(mounts, [], 'mounts under the temp dir');
  assert.equal(existsSync(instance.dir), false, 'the temp dir');
  assert.notEqual(
    spawnSync('ip', ['link', 'show', bridge], { stdio: 'ignore' }).status,
    0,
    `bridge ${bridge} is deleted`,
  );
}

// ---------------------------------------------------------------------------------------------

describe('containerd 1.6 with its CRI plugin, as the harness runs it', { skip }, () => {
  it('runs a pod sandbox through bridge and host-local, and stop then remove tear its network down with two DELs', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet, prefix } = privateSubnet();
    const scratch = tempDir('warren-cri-check-');
    const ipamDir = join(scratch, 'ipam');
    const confDir = join(scratch, 'net.d');
    const recording = recordingBinDir();
    const mark = `mark-${process.pid}`;
    // The conf dir is filled before containerd starts: loaded at start, no reload involved.
    mkdirSync(confDir);
    writeFileSync(join(confDir, '10-wrn.conflist'), JSON.stringify(bridgeConflist(bridge, subnet, ipamDir)));

    const instance = await startCriContainerd({ binDir: recording.binDir, confDir, env: { WARREN_CRI_MARK: mark } });
    const own = owned(instance);
    try {
      t.diagnostic(
        `containerd with CRI answering in ${instance.startMs.daemon} ms; sandbox image imported in ${instance.startMs.imageImport} ms`,
      );
      const runtime = await instance.cri.status();
      assert.equal(runtime.runtimeReady, true);
      assert.equal(runtime.networkReady, true, `${runtime.networkReason}: ${runtime.networkMessage}`);
      assert.equal(runtime.lastCniLoadStatus, 'OK');

      const { id } = await runTimed(t, instance, 'pod-a');
      assert.match(id, /^[0-9a-f]{64}$/);
      const ready = await note(instance, own, id);
      assert.equal(ready.state, 'SANDBOX_READY');
      assert.deepEqual(ready.metadata, { name: 'pod-a', uid: 'uid-pod-a', namespace: 'wrn-check', attempt: 0 });
      assert.ok(ready.ip.startsWith(prefix), `sandbox address ${ready.ip} is in ${subnet}`);
      assert.deepEqual(ready.additionalIps, []);
      const { netns, pid } = sandboxDetails(ready);
      assert.match(netns, /^\/var\/run\/netns\/cni-[0-9a-f-]{36}$/);
      assert.deepEqual(await addressesIn(basename(netns), 'eth0'), [`${ready.ip}/24`]);
      assert.deepEqual(hostLocalReservations(ipamDir), [ready.ip]);
      assert.deepEqual(await instance.cri.listPodSandbox(), [id]);

      // One ADD of our network, with the pod's identity (containerd's own loopback network goes to
      // the loopback plugin, which is not recorded).
      const [add, ...afterAdd] = recording.calls();
      assert.equal(afterAdd.length, 0);
      assert.ok(add);
      assert.equal(add.command, 'ADD');
      assert.equal(add.containerID, id);
      assert.equal(add.netns, netns);
      assert.equal(add.ifname, 'eth0');
      assert.equal(add.mark, mark, 'containerd passes its environment to plugins');
      // The same variables on every call, in any order (containerd builds them from a Go map).
      const sortedArgs = (args: string): string[] => args.split(';').sort();
      assert.deepEqual(sortedArgs(add.args), [
        'IgnoreUnknown=1',
        `K8S_POD_INFRA_CONTAINER_ID=${id}`,
        'K8S_POD_NAME=pod-a',
        'K8S_POD_NAMESPACE=wrn-check',
        'K8S_POD_UID=uid-pod-a',
      ]);

      await instance.cri.stopPodSandbox(id);
      const stopped = await instance.cri.podSandboxStatus(id);
      assert.equal(stopped.state, 'SANDBOX_NOTREADY');
      assert.equal(stopped.ip, '', 'a stopped sandbox reports no address');
      assert.equal(existsSync(netns), false, 'StopPodSandbox removes the network namespace');
      assert.deepEqual(hostLocalReservations(ipamDir), [], 'the DEL of StopPodSandbox released the address');
      await waitFor('the sandbox process to be gone', () => (isGone(pid) ? true : undefined));

      await instance.cri.removePodSandbox(id);
      assert.deepEqual(await instance.cri.listPodSandbox(), []);
      await assert.rejects(instance.cri.podSandboxStatus(id), (error: unknown) => {
        assert.ok(error instanceof CriError);
        assert.equal(error.code, grpcStatus.NOT_FOUND);
        assert.equal(error.details, 'an error occurred when try to find sandbox: not found');
        return true;
      });

      const dels = recording.calls().slice(1);
      t.diagnostic(`DEL sequence: ${dels.map((c) => `${c.command}(netns=${JSON.stringify(c.netns)})`).join(', ')}`);
      assert.deepEqual(
        dels.map((c) => ({
          command: c.command,
          containerID: c.containerID,
          netns: c.netns,
          ifname: c.ifname,
          args: sortedArgs(c.args),
        })),
        [
          { command: 'DEL', containerID: id, netns, ifname: 'eth0', args: sortedArgs(add.args) },
          { command: 'DEL', containerID: id, netns: '', ifname: 'eth0', args: sortedArgs(add.args) },
        ],
        'StopPodSandbox runs DEL with the namespace, RemovePodSandbox runs DEL again without it',
      );
    } finally {
      await instance.stop();
      await deleteLink(bridge);
    }
    assertNothingLeft(t, instance, before, own, bridge);
  });

  it('fails RunPodSandbox with "cni plugin not initialized" while the conf dir is empty, and runs it once a conflist is renamed in', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet, prefix } = privateSubnet();
    const instance = await startCriContainerd();
    const own = owned(instance);
    try {
      const empty = await instance.cri.status();
      assert.equal(empty.runtimeReady, true);
      assert.equal(empty.networkReady, false);
      assert.equal(empty.networkReason, 'NetworkPluginNotReady');
      assert.equal(empty.networkMessage, 'Network plugin returns error: cni plugin not initialized');
      assert.equal(
        empty.lastCniLoadStatus,
        `cni config load failed: no network config found in ${instance.confDir}: cni plugin not initialized: failed to load cni config`,
      );

      let failedId = '';
      await assert.rejects(
        instance.cri.runPodSandbox({ name: 'pod-early', uid: 'uid-early', namespace: 'wrn-check' }),
        (error: unknown) => {
          assert.ok(error instanceof CriError);
          assert.equal(error.code, grpcStatus.UNKNOWN);
          const m = /^failed to setup network for sandbox "([0-9a-f]{64})": cni plugin not initialized$/.exec(
            error.details,
          );
          assert.ok(m, error.details);
          failedId = m[1] ?? '';
          return true;
        },
      );
      // containerd cannot tear down what it could not set up without a network config, so the
      // failed sandbox stays (not ready, its namespace kept) for a later StopPodSandbox.
      assert.deepEqual(await instance.cri.listPodSandbox(), [failedId]);
      const failed = await note(instance, own, failedId);
      assert.equal(failed.state, 'SANDBOX_NOTREADY');
      assert.equal(failed.metadata.name, 'pod-early');

      instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      await networkReady(instance);
      assert.equal((await instance.cri.status()).lastCniLoadStatus, 'OK');

      const { id } = await runTimed(t, instance, 'pod-late');
      const ready = await note(instance, own, id);
      assert.equal(ready.state, 'SANDBOX_READY');
      assert.ok(ready.ip.startsWith(prefix), `sandbox address ${ready.ip} is in ${subnet}`);
      // Both are left for stop(): the ready one and the failed one.
    } finally {
      await instance.stop();
      await deleteLink(bridge);
    }
    assertNothingLeft(t, instance, before, own, bridge);
  });

  it('leaves nothing behind when stopped with sandboxes still running', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet, prefix } = privateSubnet();
    const instance = await startCriContainerd();
    const own = owned(instance);
    try {
      t.diagnostic(
        `containerd with CRI answering in ${instance.startMs.daemon} ms; sandbox image imported in ${instance.startMs.imageImport} ms`,
      );
      instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      await networkReady(instance);
      const times: number[] = [];
      const ips = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const { id, ms } = await runTimed(t, instance, `pod-${i}`);
        times.push(ms);
        const s = await note(instance, own, id);
        assert.ok(s.ip.startsWith(prefix), `sandbox address ${s.ip} is in ${subnet}`);
        ips.add(s.ip);
      }
      assert.equal(ips.size, 5, 'five distinct addresses');
      t.diagnostic(`RunPodSandbox median ${median(times).toFixed(0)} ms over ${times.length}`);
      assert.equal(instance.shimPids().length, 5, 'one shim per sandbox');
      assert.equal(own.netns.size, 5, 'one network namespace per sandbox');
    } finally {
      const started = performance.now();
      await instance.stop();
      t.diagnostic(`stop() with 5 sandboxes running: ${(performance.now() - started).toFixed(0)} ms`);
      await deleteLink(bridge);
    }
    assertNothingLeft(t, instance, before, own, bridge);
  });

  it('leaves nothing behind when a sandbox failed for want of a network config and the conf dir is still empty at stop', async (t) => {
    const before = snapshot();
    const bridge = bridgeName(); // never created: no network config, no bridge
    const instance = await startCriContainerd();
    const own = owned(instance);
    try {
      await assert.rejects(
        instance.cri.runPodSandbox({ name: 'pod-stuck', uid: 'uid-stuck', namespace: 'wrn-check' }),
        /cni plugin not initialized/,
      );
      const [id] = await instance.cri.listPodSandbox();
      assert.ok(id);
      const stuck = await note(instance, own, id);
      assert.equal(own.netns.size, 1);
      assert.ok(existsSync(sandboxDetails(stuck).netns), 'the failed sandbox keeps its network namespace');
      // Neither call can run DEL without a network config, so containerd keeps the sandbox.
      await assert.rejects(
        instance.cri.stopPodSandbox(id),
        /failed to destroy network for sandbox ".*": cni plugin not initialized/,
      );
      await assert.rejects(instance.cri.removePodSandbox(id), /failed to forcibly stop sandbox/);
    } finally {
      await instance.stop();
    }
    assertNothingLeft(t, instance, before, own, bridge);
  });

  it('leaves nothing behind when containerd was killed with sandboxes running', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet } = privateSubnet();
    const instance = await startCriContainerd();
    const own = owned(instance);
    try {
      instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      await networkReady(instance);
      for (const name of ['pod-x', 'pod-y'])
        await note(
          instance,
          own,
          await instance.cri.runPodSandbox({ name, uid: `uid-${name}`, namespace: 'wrn-check' }),
        );
      process.kill(instance.pid, 'SIGKILL');
      await waitFor('containerd to be gone', () => (isGone(instance.pid) ? true : undefined));
      // Shims and sandboxes outlive their daemon.
      assert.equal(instance.shimPids().length, 2);
      for (const path of own.netns) assert.ok(existsSync(path));
    } finally {
      await instance.stop();
      await deleteLink(bridge);
    }
    assertNothingLeft(t, instance, before, own, bridge);
  });

  it('stops one instance without touching the sandboxes of another running beside it', async (t) => {
    const before = snapshot();
    const bridges = [bridgeName(), bridgeName()] as const;
    const subnets = [privateSubnet(), privateSubnet()] as const;
    const a = await startCriContainerd();
    const ownA = owned(a);
    let b: CriContainerd | undefined;
    let ownB: Owned | undefined;
    try {
      b = await startCriContainerd();
      ownB = owned(b);
      const instances = [
        { instance: a, own: ownA, bridge: bridges[0], subnet: subnets[0].subnet },
        { instance: b, own: ownB, bridge: bridges[1], subnet: subnets[1].subnet },
      ];
      for (const { instance, bridge, subnet } of instances)
        instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      for (const { instance, own } of instances) {
        await networkReady(instance);
        await note(
          instance,
          own,
          await instance.cri.runPodSandbox({
            name: 'pod-side',
            uid: `uid-side-${instance.pid}`,
            namespace: 'wrn-check',
          }),
        );
      }
      const [other] = ownB.ids;
      const [otherNetns] = ownB.netns;
      assert.ok(other && otherNetns);
      const otherResults = [...names(CNI_RESULTS_DIR)].filter((n) => n.includes(other));
      assert.equal(otherResults.length, 2, 'libcni caches the loopback and the bridge results');

      await a.stop();
      // Everything of B's that lives in the same shared places as A's is still there.
      assert.ok(existsSync(otherNetns), "the other instance's network namespace");
      assert.ok(existsSync(shimSocketPath(b.socket, other)), "the other instance's shim socket");
      assert.deepEqual(
        [...names(CNI_RESULTS_DIR)].filter((n) => n.includes(other)),
        otherResults,
        "the other instance's libcni cache entries",
      );
      assert.equal(b.shimPids().length, 1, "the other instance's shim");
      assert.equal((await b.cri.podSandboxStatus(other)).state, 'SANDBOX_READY');
      await note(b, ownB, await b.cri.runPodSandbox({ name: 'pod-after', uid: 'uid-after', namespace: 'wrn-check' }));
      await deleteLink(bridges[0]);
      assertNothingLeft(t, a, before, ownA, bridges[0]);
    } finally {
      await a.stop();
      await b?.stop();
      for (const bridge of bridges) await deleteLink(bridge);
    }
    if (b !== undefined && ownB !== undefined) assertNothingLeft(t, b, before, ownB, bridges[1]);
  });

  it('makes a CNI bin dir with the reference plugins, Warren installed, and a test double in place of a reference plugin', () => {
    const binDir = criBinDir({ bridge: '/bin/true' });
    assert.equal(readlinkSync(join(binDir, 'loopback')), join(REFERENCE_PLUGINS, 'loopback'));
    assert.equal(readlinkSync(join(binDir, 'host-local')), join(REFERENCE_PLUGINS, 'host-local'));
    assert.equal(readlinkSync(join(binDir, 'bridge')), '/bin/true');
    assert.ok(lstatSync(join(binDir, 'warren')).isFile());
    const version = spawnSync(join(binDir, 'warren'), [], {
      env: { CNI_COMMAND: 'VERSION' },
      input: '{"cniVersion":"1.0.0"}',
      encoding: 'utf8',
    });
    assert.equal(version.status, 0, version.stderr);
    assert.ok((JSON.parse(version.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.0.0'));
  });
});
