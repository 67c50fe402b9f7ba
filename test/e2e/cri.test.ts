/**
 * The config manager proven the way a kubelet exercises it: Debian's containerd 1.6 with its CRI
 * plugin enabled (test/helpers/cri.ts), driven over CRI, running real pod sandboxes whose network
 * comes from the `00-warren.conflist` a real agent derived from a bridge + host-local primary.
 * The agent follows the same containerd's events. One containerd and one agent serve the whole
 * file, in the order a node lives through: first sandboxes, the primary changed, removed and
 * broken, the readiness indicator gone and back (Warren's config staying first), the agent
 * restarted, a network renamed between a sandbox's ADD and DEL, and 20 sandboxes at once.
 *
 * Throughout, a watcher reads every version of Warren's file the kernel reports: none may be
 * empty or invalid. Waits are on events with deadlines; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { type FSWatcher, existsSync, readFileSync, renameSync, unlinkSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import {
  type CriContainerd,
  CriError,
  criBinDir,
  criSkip,
  removeCachedResults,
  startCriContainerd,
} from '../helpers/cri.ts';
import { bridgeName, deleteLink } from '../helpers/netns.ts';
import { HANG_BOUND_MS, removeDir, run, tempDir, waitFor, WARREN_BIN } from '../helpers/processes.ts';

const skip = criSkip();

const OUTPUT = '00-warren.conflist';
const PRIMARY = '10-bridge.conflist';
/** Bounds a hang; a loaded machine is slow, not wrong. */
const DEADLINE_MS = HANG_BOUND_MS;
/** Network names of this file alone: libcni's cache entries are named after them. */
const NETWORK = 'wrn-cri-e2e';
const RENAMED = 'wrn-cri-e2e-renamed';

describe("Warren's CNI config under containerd's CRI", { skip }, () => {
  // One bridge per subnet: the bridge plugin refuses a bridge that has another subnet's gateway.
  const bridges = new Map<string, string>();
  const bridgeFor = (subnet: string): string => {
    if (!bridges.has(subnet)) bridges.set(subnet, bridgeName());
    return bridges.get(subnet) as string;
  };
  const stateDir = tempDir('warren-cri-agent-');
  const readyDir = tempDir('warren-cri-ready-');
  const hostLocalData = tempDir('warren-cri-hl-');
  const confDir = tempDir('warren-cri-netd-');
  const indicator = join(readyDir, 'primary-ready');
  let containerd: CriContainerd;
  let agent: AgentHandle;
  let seen: FSWatcher | undefined;
  const badVersions: string[] = [];
  let versionsRead = 0;
  let pods = 0;

  const primaryOf = (subnet: string, name = NETWORK): object => ({
    cniVersion: '1.1.0',
    name,
    plugins: [
      {
        type: 'bridge',
        bridge: bridgeFor(subnet),
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', subnet, dataDir: hostLocalData },
      },
    ],
  });
  const agentArgs = (): string[] => [
    '--manage-cni-config',
    'on',
    '--cni-conf-dir',
    confDir,
    '--readiness-indicator-file',
    indicator,
    '--containerd',
    'on',
    '--containerd-socket',
    containerd.socket,
    '--containerd-namespaces',
    'k8s.io',
  ];
  const output = ():
    | {
        name: string;
        plugins: Array<{ ipam: { ipRanges: Array<{ range: string }> } }>;
        'warren.generated': { from: string };
      }
    | undefined =>
    existsSync(join(confDir, OUTPUT)) ? JSON.parse(readFileSync(join(confDir, OUTPUT), 'utf8')) : undefined;
  const status = async (): Promise<AgentStatus> =>
    JSON.parse(
      (await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', agent.socket])).stdout,
    ) as AgentStatus;
  const allocationsOf = (id: string): Promise<Allocation[]> => agent.allocations(`?containerID=${id}`);

  /** Runs a sandbox; its id, IP and pod identity. */
  const runPod = async (): Promise<{ id: string; ip: string; uid: string; name: string }> => {
    pods += 1;
    const name = `pod-${pods}`;
    const uid = `0000-cri-${pods}`;
    const id = await containerd.cri.runPodSandbox({ name, uid, namespace: 'warren-cri' });
    const s = await containerd.cri.podSandboxStatus(id);
    return { id, ip: s.ip, uid, name };
  };
  const removePod = async (id: string): Promise<void> => {
    await containerd.cri.stopPodSandbox(id);
    await containerd.cri.removePodSandbox(id);
  };
  /** Runs sandboxes (removing each at once) until one gets an address in `prefix`: containerd reloads on its own time. */
  const podIn = async (prefix: string): Promise<{ id: string; ip: string; uid: string; name: string }> =>
    waitFor(
      `a sandbox with an address in ${prefix}*`,
      async () => {
        const pod = await runPod();
        if (pod.ip.startsWith(prefix)) return pod;
        await removePod(pod.id);
        return undefined;
      },
      DEADLINE_MS,
    );
  /** Renames a file into the conf dir from a temp name inside it, as a careful installer does. */
  const putPrimary = (text: string): void => {
    const temp = join(confDir, '.primary.tmp');
    writeFileSync(temp, text);
    renameSync(temp, join(confDir, PRIMARY));
  };

  before(async () => {
    writeFileSync(indicator, '');
    containerd = await startCriContainerd({ binDir: criBinDir(), confDir });
    putPrimary(JSON.stringify(primaryOf('10.243.1.0/24')));
    agent = await startAgent({ dir: stateDir, args: agentArgs() });
    // Every version of Warren's file the kernel reports is read; none may be empty or invalid.
    seen = watch(confDir, (_event, name) => {
      if (name !== OUTPUT) return;
      let text: string;
      try {
        text = readFileSync(join(confDir, OUTPUT), 'utf8');
      } catch {
        return; // removed: allowed (readiness), and not a version
      }
      versionsRead += 1;
      try {
        if ((JSON.parse(text) as Record<string, unknown>)['warren.generated'] === undefined) badVersions.push(text);
      } catch {
        badVersions.push(text);
      }
    });
  });

  after(async () => {
    seen?.close();
    // libcni's cache entries of this file's networks, even of sandboxes whose ADD failed midway
    // (before the harness's stop, which removes the cache dir once it is empty).
    removeCachedResults(NETWORK);
    await containerd?.stop();
    await agent?.kill();
    for (const bridge of bridges.values()) await deleteLink(bridge);
    for (const dir of [stateDir, readyDir, hostLocalData, confDir]) removeDir(dir);
  });

  it("gives a sandbox an address from Warren with the pod's identity, and both of containerd's DELs release it", async () => {
    await waitFor(
      "containerd to load Warren's config",
      async () => ((await containerd.cri.status()).lastCniLoadStatus === 'OK' ? true : undefined),
      DEADLINE_MS,
    );
    // The range is served once host-local's reservations are imported (issue 24).
    await waitFor(
      'the host-local import',
      async () => ((await status()).cniConfig?.takeover?.[0]?.imported === true ? true : undefined),
      DEADLINE_MS,
    );
    assert.equal(output()?.['warren.generated'].from, PRIMARY);
    const pod = await runPod();
    assert.match(pod.ip, /^10\.243\.1\.\d+$/);
    const held = await allocationsOf(pod.id);
    assert.equal(held.length, 1, 'Warren, not host-local, handed out the address');
    assert.equal(held[0]?.address, pod.ip);
    assert.equal(held[0]?.network, NETWORK);
    assert.equal(held[0]?.podNamespace, 'warren-cri');
    assert.equal(held[0]?.podName, pod.name);
    assert.equal(held[0]?.podUID, pod.uid);
    assert.match(held[0]?.netns ?? '', /^\/var\/run\/netns\/cni-/);
    await containerd.cri.stopPodSandbox(pod.id);
    assert.deepEqual(await allocationsOf(pod.id), [], 'released by the DEL of StopPodSandbox');
    // The second DEL, with an empty netns, must succeed too: RemovePodSandbox fails otherwise.
    await containerd.cri.removePodSandbox(pod.id);
  });

  it('follows the primary rewritten with another subnet: containerd loads the regenerated config and the next sandbox is in the new range', async () => {
    putPrimary(JSON.stringify(primaryOf('10.243.2.0/24')));
    await waitFor(
      'the regenerated config',
      () => (output()?.plugins[0]?.ipam.ipRanges[0]?.range === '10.243.2.0/24' ? true : undefined),
      DEADLINE_MS,
    );
    assert.equal((await containerd.cri.status()).lastCniLoadStatus, 'OK');
    const pod = await podIn('10.243.2.');
    assert.equal((await allocationsOf(pod.id))[0]?.address, pod.ip);
    await removePod(pod.id);
  });

  it('keeps the last good config when the primary is removed or replaced by invalid JSON: sandboxes still start, status says why', async () => {
    const good = readFileSync(join(confDir, OUTPUT), 'utf8');
    unlinkSync(join(confDir, PRIMARY));
    await waitFor(
      'the vanished primary reported',
      async () => ((await status()).cniConfig?.state === 'stale' ? true : undefined),
      DEADLINE_MS,
    );
    assert.match(
      (await status()).cniConfig?.problem ?? '',
      /no CNI config .* other than Warren's; keeping the last good config/,
    );
    assert.equal(readFileSync(join(confDir, OUTPUT), 'utf8'), good);
    let pod = await runPod();
    assert.match(pod.ip, /^10\.243\.2\./, 'the next sandbox still starts, from the last good config');
    await removePod(pod.id);

    putPrimary(`{"cniVersion": "1.0.0", "name": "${NETWORK}", "plugins": [`);
    await waitFor(
      'the broken primary reported',
      async () =>
        /10-bridge\.conflist: is not valid JSON/.test((await status()).cniConfig?.problem ?? '') ? true : undefined,
      DEADLINE_MS,
    );
    assert.equal(readFileSync(join(confDir, OUTPUT), 'utf8'), good);
    pod = await runPod();
    assert.match(pod.ip, /^10\.243\.2\./);
    await removePod(pod.id);
  });

  // Changed for issue 24: the config used to be removed while the indicator was missing, which let
  // the primary's host-local hand out Warren's addresses; it now stays first and fails closed.
  it('keeps its config first while the readiness indicator is missing: the next sandbox fails and STATUS is 50; restored, sandboxes start again', async () => {
    const before = readFileSync(join(confDir, OUTPUT), 'utf8');
    unlinkSync(indicator);
    await waitFor(
      'not ready',
      async () => ((await status()).cniConfig?.state === 'not-ready' ? true : undefined),
      DEADLINE_MS,
    );
    assert.equal(readFileSync(join(confDir, OUTPUT), 'utf8'), before, "Warren's config stays first");
    let refusal: unknown;
    try {
      const pod = await runPod();
      await removePod(pod.id);
    } catch (error) {
      refusal = error;
    }
    assert.ok(refusal instanceof CriError, 'the sandbox fails while not ready');
    assert.match(refusal.message, /failed to setup network for sandbox/);
    assert.match(refusal.message, /readiness indicator .* is missing/);
    const conf = {
      cniVersion: '1.1.0',
      name: NETWORK,
      ipam: { type: 'warren', socket: agent.socket, range: '10.243.2.0/24' },
    };
    const st = await warren({ command: 'STATUS', config: conf });
    assert.deepEqual(st.json, {
      cniVersion: '1.1.0',
      code: 50,
      msg: `not ready: readiness indicator ${indicator} is missing`,
    });

    writeFileSync(indicator, '');
    await waitFor(
      'ready again',
      async () => ((await status()).cniConfig?.state !== 'not-ready' ? true : undefined),
      DEADLINE_MS,
    );
    // The failed sandbox stays NOTREADY in containerd; clear it now.
    for (const id of await containerd.cri.listPodSandbox()) await removePod(id).catch(() => undefined);
    const pod = await podIn('10.243.2.');
    await removePod(pod.id);
    assert.equal((await warren({ command: 'STATUS', config: conf })).code, 0);
  });

  it('never wraps its own output, however often the agent restarts', async () => {
    putPrimary(JSON.stringify(primaryOf('10.243.3.0/24')));
    await waitFor(
      'the config from the repaired primary',
      () => (output()?.plugins[0]?.ipam.ipRanges[0]?.range === '10.243.3.0/24' ? true : undefined),
      DEADLINE_MS,
    );
    for (let i = 0; i < 5; i++) {
      assert.equal(await agent.stop(), 0);
      agent = await startAgent({ dir: stateDir, args: agentArgs() });
      const s = await waitFor(
        `restart ${i}: the config current`,
        async () => {
          const c = (await status()).cniConfig;
          return c?.state === 'current' ? c : undefined;
        },
        DEADLINE_MS,
      );
      assert.equal(s.primary, join(confDir, PRIMARY), `restart ${i}`);
      assert.equal(output()?.['warren.generated'].from, PRIMARY);
      assert.equal(output()?.plugins.length, 1, "the chain is the primary's, not wrapped again");
    }
    const pod = await podIn('10.243.3.');
    await removePod(pod.id);
  });

  it('releases the address of a sandbox whose network was renamed between its ADD and its DEL (the DEL goes to the new name)', async () => {
    const pod = await podIn('10.243.3.');
    assert.equal((await allocationsOf(pod.id))[0]?.network, NETWORK);
    putPrimary(JSON.stringify(primaryOf('10.243.3.0/24', RENAMED)));
    // A probe sandbox shows containerd now uses the renamed network.
    const probe = await waitFor(
      'a sandbox on the renamed network',
      async () => {
        const p = await runPod();
        if ((await allocationsOf(p.id))[0]?.network === RENAMED) return p;
        await removePod(p.id);
        return undefined;
      },
      DEADLINE_MS,
    );
    await removePod(probe.id);
    await removePod(pod.id);
    // The DELs named the renamed network; the sandbox's deletion in containerd releases the old one's address.
    await waitFor(
      "the old network's address released",
      async () => ((await allocationsOf(pod.id)).length === 0 ? true : undefined),
      DEADLINE_MS,
    );
  });

  it('starts 20 sandboxes at once with 20 distinct addresses, all released after removal', async (t) => {
    const started = Date.now();
    const timings: number[] = [];
    const batch = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const t0 = Date.now();
        const pod = await runPod();
        timings.push(Date.now() - t0);
        return pod;
      }),
    );
    t.diagnostic(
      `20 RunPodSandbox at once in ${Date.now() - started} ms; each ${Math.min(...timings)}–${Math.max(...timings)} ms`,
    );
    const ips = batch.map((p) => p.ip);
    assert.equal(new Set(ips).size, 20, `distinct: ${ips.join(' ')}`);
    for (const pod of batch) assert.equal((await allocationsOf(pod.id))[0]?.address, pod.ip);
    await Promise.all(batch.map((p) => removePod(p.id)));
    for (const pod of batch) assert.deepEqual(await allocationsOf(pod.id), [], pod.id);
    assert.deepEqual(badVersions, [], 'every version of 00-warren.conflist read was complete and valid');
    // The first write, two subnets and a rename (no removal while not ready any more: issue 24).
    assert.ok(versionsRead >= 3, `the watcher read ${versionsRead} versions`);
  });
});
