/**
 * Taking a node over from its bridge + host-local primary and handing it back, with real pod
 * sandboxes made through containerd's CRI (test/helpers/cri.ts) as a kubelet makes them (issue 24,
 * items 1–3): pods addressed by host-local before Warren, Warren installed (its config first, the
 * reservations imported), the readiness indicator gone and back, `warren uninstall`, host-local
 * serving again. Throughout, no two sandboxes ever carry one address, and host-local never hands
 * out an address Warren holds. Waits are on events with deadlines; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import {
  type CriContainerd,
  CriError,
  criBinDir,
  criSkip,
  removeCachedResults,
  startCriContainerd,
  writeBridgePrimary,
} from '../helpers/cri.ts';
import { bridgeName, deleteLink } from '../helpers/netns.ts';
import { WARREN_BIN, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';

const skip = criSkip();

const NETWORK = 'wrn-cri-takeover';
const SUBNET = '10.252.24.0/24';
const OUTPUT = '00-warren.conflist';
const DEADLINE_MS = 30_000;

describe("a node taken over from host-local and handed back, under containerd's CRI", { skip }, () => {
  const stateDir = tempDir('warren-crito-agent-');
  const readyDir = tempDir('warren-crito-ready-');
  const dataRoot = tempDir('warren-crito-hl-');
  const confDir = tempDir('warren-crito-netd-');
  const dataDir = join(dataRoot, NETWORK);
  const indicator = join(readyDir, 'primary-ready');
  const bridge = bridgeName();
  const binDir = criBinDir();
  let containerd: CriContainerd;
  let agent: AgentHandle | undefined;
  let pods = 0;
  /** Every live sandbox's address: two sandboxes with one address is the failure. */
  const live = new Map<string, string>();

  const status = async (): Promise<AgentStatus> =>
    JSON.parse(
      (await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', (agent as AgentHandle).socket])).stdout,
    ) as AgentStatus;
  const hostLocal = (): Map<string, string> => {
    const out = new Map<string, string>();
    if (!existsSync(dataDir)) return out;
    for (const name of readdirSync(dataDir))
      if (name.startsWith('10.252.24.'))
        out.set(name, readFileSync(join(dataDir, name), 'utf8').split('\r\n')[0] as string);
    return out;
  };
  const runPod = async (): Promise<{ id: string; ip: string }> => {
    pods += 1;
    const id = await containerd.cri.runPodSandbox({
      name: `to-${pods}`,
      uid: `0000-crito-${pods}`,
      namespace: 'warren-crito',
    });
    const { ip } = await containerd.cri.podSandboxStatus(id);
    for (const [other, address] of live) assert.notEqual(address, ip, `${id} got ${ip}, which ${other} carries`);
    live.set(id, ip);
    return { id, ip };
  };
  const removePod = async (id: string): Promise<void> => {
    await containerd.cri.stopPodSandbox(id);
    await containerd.cri.removePodSandbox(id);
    live.delete(id);
  };
  const heldByWarren = async (): Promise<Map<string, string>> =>
    new Map((await (agent as AgentHandle).allocations(`?network=${NETWORK}`)).map((a) => [a.address, a.containerID]));

  before(async () => {
    writeFileSync(indicator, '');
    containerd = await startCriContainerd({ binDir, confDir });
    writeBridgePrimary(confDir, { network: NETWORK, bridge, subnet: SUBNET, dataDir: dataRoot });
  });

  after(async () => {
    removeCachedResults(NETWORK);
    await containerd?.stop();
    await agent?.kill();
    await deleteLink(bridge);
    for (const dir of [stateDir, readyDir, dataRoot, confDir]) removeDir(dir);
  });

  it("install → missing indicator → uninstall: host-local's pods are imported, Warren's are never handed out by host-local, no address is ever on two sandboxes", async () => {
    await waitFor(
      'containerd to load the primary',
      async () => ((await containerd.cri.status()).lastCniLoadStatus === 'OK' ? true : undefined),
      DEADLINE_MS,
    );
    const early = [await runPod(), await runPod()];
    assert.deepEqual(
      [...hostLocal().keys()].sort(),
      early.map((p) => p.ip).sort(),
      'host-local addressed the first sandboxes',
    );

    // Install: Warren's config first, host-local's reservations imported before any ADD is served.
    agent = await startAgent({
      dir: stateDir,
      args: ['--manage-cni-config', 'on', '--cni-conf-dir', confDir, '--readiness-indicator-file', indicator],
    });
    await waitFor(
      'the import',
      async () => ((await status()).cniConfig?.takeover?.[0]?.imported === true ? true : undefined),
      DEADLINE_MS,
    );
    const imported = await heldByWarren();
    for (const p of early) assert.equal(imported.get(p.ip), p.id, `${p.ip} imported for ${p.id}`);
    // containerd reloads in its own time: run sandboxes until Warren addresses one.
    await waitFor(
      'a sandbox addressed by Warren',
      async () => {
        const p = await runPod();
        return (await heldByWarren()).get(p.ip) === p.id ? p : undefined;
      },
      DEADLINE_MS,
    );
    for (let i = 0; i < 3; i++) await runPod();

    // The indicator goes: Warren's config stays first and the next sandbox fails; host-local is never asked.
    const reservations = hostLocal();
    unlinkSync(indicator);
    await waitFor(
      'not ready',
      async () => ((await status()).cniConfig?.state === 'not-ready' ? true : undefined),
      DEADLINE_MS,
    );
    assert.ok(existsSync(join(confDir, OUTPUT)));
    await assert.rejects(
      runPod(),
      (error: unknown) => error instanceof CriError && /readiness indicator .* is missing/.test(error.message),
    );
    assert.deepEqual(hostLocal(), reservations, 'host-local handed out nothing');
    for (const id of await containerd.cri.listPodSandbox())
      if (!live.has(id)) await containerd.cri.removePodSandbox(id).catch(() => undefined);
    writeFileSync(indicator, '');
    await waitFor(
      'ready again',
      async () => ((await status()).cniConfig?.state === 'current' ? true : undefined),
      DEADLINE_MS,
    );

    // Uninstall: every address Warren holds becomes host-local's; the runtime goes back to host-local.
    const held = await heldByWarren();
    const u = await run(process.execPath, [
      WARREN_BIN,
      'uninstall',
      '--socket',
      (agent as AgentHandle).socket,
      '--cni-bin-dir',
      binDir,
    ]);
    assert.equal(u.code, 0, u.stderr + u.stdout);
    assert.equal(existsSync(join(confDir, OUTPUT)), false);
    assert.equal(existsSync(join(binDir, 'warren')), false, 'the plugin is gone');
    const handedBack = hostLocal();
    for (const [address, id] of held) assert.equal(handedBack.get(address), id, `${address} reserved for ${id}`);
    const after_ = await waitFor(
      'a sandbox addressed by host-local',
      async () => {
        let p;
        try {
          p = await runPod();
        } catch (error) {
          if (error instanceof CriError) return undefined; // containerd has not reloaded yet: Warren's ADD answered 11
          throw error;
        }
        return hostLocal().get(p.ip) === p.id ? p : undefined;
      },
      DEADLINE_MS,
    );
    assert.ok(!held.has(after_.ip));
    for (let i = 0; i < 4; i++) assert.ok(!held.has((await runPod()).ip));
    // A sandbox Warren addressed goes: host-local's DEL releases the reservation Warren wrote.
    const [address, id] = [...held].find(([, c]) => live.has(c)) as [string, string];
    await removePod(id);
    assert.equal(hostLocal().has(address), false, `${address} released by host-local`);
  });
});
