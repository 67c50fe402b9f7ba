/**
 * The containerd-with-CRI harness (test/helpers/cri.ts) against Debian's containerd 1.6 itself:
 * pod sandboxes run, stopped and removed through the CRI the way a kubelet drives them, with the
 * reference bridge and host-local plugins on a private bridge and subnet; the CNI calls containerd
 * makes are recorded by a wrapper around bridge. Every test checks that stop() leaves nothing on
 * the machine: no network namespace, shim socket, libcni cache entry, cgroup directory, mount or
 * process of the instance. Nothing sleeps: waits are polls with deadlines.
 */
import assert from 'node:assert/strict';
import { status as grpcStatus } from '@grpc/grpc-js';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type TestContext, describe, it } from 'node:test';
import { REFERENCE_PLUGINS } from '../helpers/cni.ts';
import { type CriContainerd, CriError, type SandboxStatus, cgroupDirsOf, criBinDir, haveCriContainerd, startCriContainerd } from '../helpers/cri.ts';
import { addressesIn, bridgeName, deleteLink } from '../helpers/netns.ts';
import { isGone, isRoot, tempDir, waitFor } from '../helpers/processes.ts';

const skip = !isRoot() ? 'needs root' : !haveCriContainerd() ? 'needs containerd, runc, busybox-static and the reference CNI plugins' : false;

const NETNS_DIR = '/var/run/netns';
const SHIM_SOCKET_DIR = '/run/containerd/s';
const CNI_RESULTS_DIR = '/var/lib/cni/results';

function names(dir: string): Set<string> {
  try {
    return new Set(readdirSync(dir));
  } catch {
    return new Set();
  }
}

interface MachineSnapshot {
  readonly netns: Set<string>;
  readonly shimSockets: Set<string>;
  readonly cniResults: Set<string>;
  readonly runDir: boolean;
}

function snapshot(): MachineSnapshot {
  return { netns: names(NETNS_DIR), shimSockets: names(SHIM_SOCKET_DIR), cniResults: names(CNI_RESULTS_DIR), runDir: existsSync('/run/containerd') };
}

const added = (dir: string, before: Set<string>): string[] => [...names(dir)].filter((n) => !before.has(n));

/** A /24 in 10.238.0.0/16, a range no other test uses. */
function privateSubnet(): { subnet: string; prefix: string } {
  const third = randomInt(0, 256);
  return { subnet: `10.238.${third}.0/24`, prefix: `10.238.${third}.` };
}

function bridgeConflist(bridge: string, subnet: string, dataDir: string): object {
  return {
    cniVersion: '1.0.0',
    name: 'wrn-cri-check',
    plugins: [{ type: 'bridge', bridge, isGateway: true, ipMasq: false, ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]] } }],
  };
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
  const info = JSON.parse(status.info.info ?? '{}') as { pid?: number; runtimeSpec?: { linux?: { namespaces?: Array<{ type: string; path?: string }> } } };
  const network = info.runtimeSpec?.linux?.namespaces?.find((n) => n.type === 'network');
  return { netns: network?.path ?? '', pid: info.pid ?? 0 };
}

/** The addresses host-local still holds in its data dir (one file per address). */
function hostLocalReservations(dataDir: string): string[] {
  return [...names(join(dataDir, 'wrn-cri-check'))].filter((n) => /^\d+\.\d+\.\d+\.\d+$/.test(n));
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/**
 * After stop(): nothing of the instance is left on the machine, and nothing that existed before
 * it started is gone.
 */
function assertNothingLeft(instance: CriContainerd, before: MachineSnapshot, pids: readonly number[], bridge: string): void {
  assert.deepEqual(
    added(NETNS_DIR, before.netns).filter((n) => n.startsWith('cni-')),
    [],
    'network namespaces the sandboxes had',
  );
  assert.deepEqual(added(SHIM_SOCKET_DIR, before.shimSockets), [], 'shim sockets');
  assert.deepEqual(added(CNI_RESULTS_DIR, before.cniResults), [], 'libcni result cache entries');
  for (const name of before.netns) assert.ok(existsSync(join(NETNS_DIR, name)), `network namespace ${name} that was there before`);
  assert.equal(existsSync('/run/containerd'), before.runDir, '/run/containerd exists exactly when it existed before');
  assert.deepEqual(cgroupDirsOf(instance.cgroupParent), [], 'cgroup directories of the private parent');
  assert.deepEqual(
    pids.filter((pid) => !isGone(pid)),
    [],
    'containerd, its shims and the sandbox processes are gone',
  );
  assert.deepEqual(instance.shimPids(), [], 'shims naming this instance\'s socket');
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(instance.dir));
  assert.deepEqual(mounts, [], 'mounts under the temp dir');
  assert.equal(existsSync(instance.dir), false, 'the temp dir');
  assert.notEqual(spawnSync('ip', ['link', 'show', bridge], { stdio: 'ignore' }).status, 0, `bridge ${bridge} is deleted`);
}

async function runTimed(t: TestContext, instance: CriContainerd, name: string): Promise<{ id: string; ms: number }> {
  const started = performance.now();
  const id = await instance.cri.runPodSandbox({ name, uid: `uid-${name}`, namespace: 'wrn-check' });
  const ms = performance.now() - started;
  t.diagnostic(`RunPodSandbox ${name} (bridge + host-local): ${ms.toFixed(0)} ms`);
  return { id, ms };
}

describe('containerd 1.6 with its CRI plugin, as the harness runs it', { skip, timeout: 180_000 }, () => {
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
    const pids = [instance.pid];
    try {
      t.diagnostic(`containerd with CRI answering in ${instance.startMs.daemon} ms; sandbox image imported in ${instance.startMs.imageImport} ms`);
      const runtime = await instance.cri.status();
      assert.equal(runtime.runtimeReady, true);
      assert.equal(runtime.networkReady, true, `${runtime.networkReason}: ${runtime.networkMessage}`);
      assert.equal(runtime.lastCniLoadStatus, 'OK');

      const { id } = await runTimed(t, instance, 'pod-a');
      assert.match(id, /^[0-9a-f]{64}$/);
      const ready = await instance.cri.podSandboxStatus(id, { verbose: true });
      assert.equal(ready.state, 'SANDBOX_READY');
      assert.deepEqual(ready.metadata, { name: 'pod-a', uid: 'uid-pod-a', namespace: 'wrn-check', attempt: 0 });
      assert.ok(ready.ip.startsWith(prefix), `sandbox address ${ready.ip} is in ${subnet}`);
      assert.deepEqual(ready.additionalIps, []);
      const { netns, pid } = sandboxDetails(ready);
      pids.push(pid, ...instance.shimPids());
      assert.match(netns, /^\/var\/run\/netns\/cni-[0-9a-f-]{36}$/);
      assert.deepEqual(await addressesIn(basename(netns), 'eth0'), [`${ready.ip}/24`]);
      assert.deepEqual(hostLocalReservations(ipamDir), [ready.ip]);

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
      assert.deepEqual(
        add.args.split(';').sort(),
        ['IgnoreUnknown=1', `K8S_POD_INFRA_CONTAINER_ID=${id}`, 'K8S_POD_NAME=pod-a', 'K8S_POD_NAMESPACE=wrn-check', 'K8S_POD_UID=uid-pod-a'],
      );

      await instance.cri.stopPodSandbox(id);
      const stopped = await instance.cri.podSandboxStatus(id);
      assert.equal(stopped.state, 'SANDBOX_NOTREADY');
      assert.equal(stopped.ip, '', 'a stopped sandbox reports no address');
      assert.equal(existsSync(netns), false, 'StopPodSandbox removes the network namespace');
      assert.deepEqual(hostLocalReservations(ipamDir), [], 'the DEL of StopPodSandbox released the address');
      await waitFor('the sandbox process to be gone', () => (isGone(pid) ? true : undefined), 10_000);

      await instance.cri.removePodSandbox(id);
      assert.equal((await instance.cri.listPodSandbox()).includes(id), false);
      await assert.rejects(instance.cri.podSandboxStatus(id), (error: unknown) => {
        assert.ok(error instanceof CriError);
        assert.equal(error.code, grpcStatus.NOT_FOUND);
        assert.match(error.details, /not found/);
        return true;
      });

      const dels = recording.calls().slice(1);
      t.diagnostic(`DEL sequence: ${dels.map((c) => `${c.command}(netns=${JSON.stringify(c.netns)})`).join(', ')}`);
      assert.deepEqual(
        dels.map((c) => ({ command: c.command, containerID: c.containerID, netns: c.netns, ifname: c.ifname })),
        [
          { command: 'DEL', containerID: id, netns, ifname: 'eth0' },
          { command: 'DEL', containerID: id, netns: '', ifname: 'eth0' },
        ],
        'StopPodSandbox runs DEL with the namespace, RemovePodSandbox runs DEL again without it',
      );
    } finally {
      await instance.stop();
      await deleteLink(bridge);
    }
    assertNothingLeft(instance, before, pids, bridge);
  });

  it('fails RunPodSandbox with "cni plugin not initialized" while the conf dir is empty, and runs it once a conflist is renamed in', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet, prefix } = privateSubnet();
    const instance = await startCriContainerd();
    const pids = [instance.pid];
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
      await assert.rejects(instance.cri.runPodSandbox({ name: 'pod-early', uid: 'uid-early', namespace: 'wrn-check' }), (error: unknown) => {
        assert.ok(error instanceof CriError);
        assert.equal(error.code, grpcStatus.UNKNOWN);
        const m = /^failed to setup network for sandbox "([0-9a-f]{64})": cni plugin not initialized$/.exec(error.details);
        assert.ok(m, error.details);
        failedId = m[1] ?? '';
        return true;
      });
      // containerd cannot tear down what it could not set up without a network config, so the
      // failed sandbox stays (not ready) for a later StopPodSandbox, as a kubelet would send.
      assert.deepEqual(await instance.cri.listPodSandbox(), [failedId]);
      const failed = await instance.cri.podSandboxStatus(failedId);
      assert.equal(failed.state, 'SANDBOX_NOTREADY');
      assert.equal(failed.metadata.name, 'pod-early');

      instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      const loaded = await waitFor('containerd to load the conflist', async () => {
        const s = await instance.cri.status();
        return s.networkReady ? s : undefined;
      });
      assert.equal(loaded.lastCniLoadStatus, 'OK');

      const { id } = await runTimed(t, instance, 'pod-late');
      const ready = await instance.cri.podSandboxStatus(id, { verbose: true });
      assert.equal(ready.state, 'SANDBOX_READY');
      assert.ok(ready.ip.startsWith(prefix), `sandbox address ${ready.ip} is in ${subnet}`);
      pids.push(sandboxDetails(ready).pid, ...instance.shimPids());
      // Both left for stop(): the ready one and the failed one.
    } finally {
      await instance.stop();
      await deleteLink(bridge);
    }
    assertNothingLeft(instance, before, pids, bridge);
  });

  it('leaves nothing behind when stopped with sandboxes still running', async (t) => {
    const before = snapshot();
    const bridge = bridgeName();
    const { subnet, prefix } = privateSubnet();
    const instance = await startCriContainerd();
    const pids = [instance.pid];
    try {
      t.diagnostic(`containerd with CRI answering in ${instance.startMs.daemon} ms; sandbox image imported in ${instance.startMs.imageImport} ms`);
      instance.writeConfig('10-wrn.conflist', bridgeConflist(bridge, subnet, join(instance.dir, 'ipam')));
      await waitFor('containerd to load the conflist', async () => ((await instance.cri.status()).networkReady ? true : undefined));
      const times: number[] = [];
      const ips = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const { id, ms } = await runTimed(t, instance, `pod-${i}`);
        times.push(ms);
        const s = await instance.cri.podSandboxStatus(id, { verbose: true });
        assert.ok(s.ip.startsWith(prefix), `sandbox address ${s.ip} is in ${subnet}`);
        ips.add(s.ip);
        pids.push(sandboxDetails(s).pid);
      }
      assert.equal(ips.size, 5, 'five distinct addresses');
      t.diagnostic(`RunPodSandbox median ${median(times).toFixed(0)} ms over ${times.length}`);
      const shims = instance.shimPids();
      assert.equal(shims.length, 5, 'one shim per sandbox');
      pids.push(...shims);
      assert.equal(names(NETNS_DIR).size - before.netns.size, 5, 'one network namespace per sandbox');
    } finally {
      const started = performance.now();
      await instance.stop();
      t.diagnostic(`stop() with 5 sandboxes running: ${(performance.now() - started).toFixed(0)} ms`);
      await deleteLink(bridge);
    }
    assertNothingLeft(instance, before, pids, bridge);
  });

  it('makes a CNI bin dir with the reference plugins, Warren installed, and a test double in place of a reference plugin', () => {
    const binDir = criBinDir({ bridge: '/bin/true' });
    assert.equal(readlinkSync(join(binDir, 'loopback')), join(REFERENCE_PLUGINS, 'loopback'));
    assert.equal(readlinkSync(join(binDir, 'host-local')), join(REFERENCE_PLUGINS, 'host-local'));
    assert.equal(readlinkSync(join(binDir, 'bridge')), '/bin/true');
    assert.ok(lstatSync(join(binDir, 'warren')).isFile());
    const version = spawnSync(join(binDir, 'warren'), [], { env: { CNI_COMMAND: 'VERSION' }, input: '{"cniVersion":"1.0.0"}', encoding: 'utf8' });
    assert.equal(version.status, 0, version.stderr);
    assert.ok((JSON.parse(version.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.0.0'));
  });
});
