/**
 * Taking a node's network over from a bridge + host-local primary, and handing it back (issue 24,
 * items 1–3 and 16): a real agent manages a real conf dir; every ADD and DEL is run the way a
 * runtime runs them — the lexically first config of the conf dir, its plugin (the real `bridge`)
 * run in a real network namespace, with Warren as installed (a private CNI bin dir) beside the
 * real host-local on CNI_PATH. One agent serves the file, through the life of a node: pods
 * addressed by host-local before Warren came, Warren serving, the readiness indicator gone and
 * back, `warren uninstall`, host-local serving again.
 *
 * Throughout: host-local never hands out an address Warren holds, and Warren never one host-local
 * holds. Waits are on events with deadlines; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AgentStatus } from '../../src/api/status.ts';
import { isConfigName } from '../../src/cni/derived-config.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import {
  type CniReply,
  REFERENCE_PLUGINS,
  cniBinDir,
  haveReferencePlugins,
  reference,
  resultAddresses,
} from '../helpers/cni.ts';
import { bridgeName, createNetns, deleteLink, deleteNetns } from '../helpers/netns.ts';
import { CHILD_PATH, REPO, WARREN_BIN, isRoot, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';

const skip = !isRoot() || !haveReferencePlugins() ? 'needs root and containernetworking-plugins' : false;

const NETWORK = 'wrn-takeover-e2e';
const SUBNET = '10.251.24.0/24';
const PREFIX = '10.251.24.';
const OUTPUT = '00-warren.conflist';
const DEADLINE_MS = 20_000;

describe('taking a bridge + host-local node over, and handing it back', { skip }, () => {
  const confDir = tempDir('warren-takeover-netd-');
  const dataRoot = tempDir('warren-takeover-hl-');
  const dataDir = join(dataRoot, NETWORK);
  const readyDir = tempDir('warren-takeover-ready-');
  const indicator = join(readyDir, 'primary-ready');
  const binDir = tempDir('warren-takeover-bin-');
  const bridge = bridgeName();
  const namespaces = new Map<string, { name: string; path: string }>();
  let agent: AgentHandle | undefined;
  /** Addresses host-local handed out before Warren came, by container. */
  const before_: Record<string, string> = {};

  const status = async (): Promise<AgentStatus> =>
    JSON.parse(
      (await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', (agent as AgentHandle).socket])).stdout,
    ) as AgentStatus;
  const firstConfig = (): string => readdirSync(confDir).filter(isConfigName).sort()[0] as string;
  const hostLocalFiles = (): string[] =>
    existsSync(dataDir)
      ? readdirSync(dataDir)
          .filter((n) => n.startsWith(PREFIX))
          .sort()
      : [];

  /** Runs CNI `command` for `id` as a runtime would: the conf dir's first config, its plugin (bridge) in the container's namespace. */
  async function viaConfDir(command: 'ADD' | 'DEL', id: string): Promise<CniReply & { file: string }> {
    if (!namespaces.has(id)) namespaces.set(id, await createNetns());
    const ns = namespaces.get(id) as { name: string; path: string };
    const file = firstConfig();
    const conf = JSON.parse(readFileSync(join(confDir, file), 'utf8')) as {
      name: string;
      cniVersion: string;
      plugins: Array<Record<string, unknown>>;
    };
    const plugin = { ...conf.plugins[0], name: conf.name, cniVersion: conf.cniVersion };
    const reply = await reference('bridge', {
      command,
      containerID: id,
      netns: ns.path,
      ifname: 'eth0',
      config: plugin,
      env: { CNI_PATH: `${binDir}:${REFERENCE_PLUGINS}` },
    });
    return { ...reply, file };
  }
  async function add(id: string): Promise<{ address: string; file: string }> {
    const r = await viaConfDir('ADD', id);
    assert.equal(r.code, 0, `ADD ${id} through ${r.file}: ${r.stdout}${r.stderr}`);
    return { address: resultAddresses(r)[0] as string, file: r.file };
  }
  async function del(id: string): Promise<void> {
    const r = await viaConfDir('DEL', id);
    assert.equal(r.code, 0, `DEL ${id} through ${r.file}: ${r.stdout}${r.stderr}`);
    const ns = namespaces.get(id);
    namespaces.delete(id);
    if (ns !== undefined) await deleteNetns(ns.name);
  }
  async function warrenHolds(): Promise<Map<string, string>> {
    const held = await (agent as AgentHandle).allocations(`?network=${NETWORK}`);
    return new Map(held.map((a) => [a.address, a.containerID]));
  }

  before(() => {
    // Warren as installed, in a bin dir of this file's own: uninstall removes it.
    cniBinDir(); // builds the plugin once
    const r = spawnSync(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', binDir, '--link'], {
      cwd: REPO,
      env: { PATH: CHILD_PATH },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    writeFileSync(
      join(confDir, '10-bridge.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: NETWORK,
        plugins: [
          {
            type: 'bridge',
            bridge,
            isGateway: true,
            ipMasq: false,
            ipam: { type: 'host-local', subnet: SUBNET, dataDir: dataRoot },
          },
        ],
      }),
    );
  });

  after(async () => {
    await agent?.kill();
    for (const ns of namespaces.values()) await deleteNetns(ns.name);
    await deleteLink(bridge);
    for (const dir of [confDir, dataRoot, readyDir, binDir]) removeDir(dir);
  });

  it('imports the reservations host-local made before Warren came, never hands them out, and skips hostile files in its data dir without blocking', async () => {
    for (const id of ['hl-a', 'hl-b', 'hl-c']) {
      const { address, file } = await add(id);
      assert.equal(file, '10-bridge.conflist');
      before_[id] = address;
    }
    assert.deepEqual(Object.values(before_).sort(), hostLocalFiles());
    // Hostile names in host-local's dir, each an address of the range: a FIFO, a link to /dev/zero, garbage.
    execFileSync('mkfifo', [join(dataDir, `${PREFIX}200`)]);
    symlinkSync('/dev/zero', join(dataDir, `${PREFIX}201`));
    writeFileSync(join(dataDir, `${PREFIX}202`), '../../etc/passwd\r\neth0');

    writeFileSync(indicator, '');
    agent = await startAgent({
      args: ['--manage-cni-config', 'on', '--cni-conf-dir', confDir, '--readiness-indicator-file', indicator],
    });
    const takeover = await waitFor(
      'the import',
      async () => {
        const t = (await status()).cniConfig?.takeover?.[0];
        return t?.imported === true ? t : undefined;
      },
      DEADLINE_MS,
    );
    assert.equal(takeover.dataDir, dataDir);
    assert.match((takeover.problems ?? []).join('\n'), /200 is a FIFO, not a regular file; skipped/);
    assert.match((takeover.problems ?? []).join('\n'), /201 is a symbolic link, not a regular file; skipped/);
    assert.match((takeover.problems ?? []).join('\n'), /202: container ID .* is not a valid CNI container ID; skipped/);
    for (const name of ['200', '201', '202']) unlinkSync(join(dataDir, `${PREFIX}${name}`));

    const held = await warrenHolds();
    for (const [id, address] of Object.entries(before_))
      assert.equal(held.get(address), id, `${address} is held for ${id}`);
    assert.equal(firstConfig(), OUTPUT);
    const mine: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { address, file } = await add(`w-${i}`);
      assert.equal(file, OUTPUT);
      mine.push(address);
    }
    for (const address of mine)
      assert.ok(
        !Object.values(before_).includes(address),
        `Warren handed out ${address}, which host-local had reserved`,
      );
    // An imported pod goes: its DEL (through Warren's config now) releases Warren's allocation of it.
    await del('hl-c');
    assert.equal((await warrenHolds()).has(before_['hl-c'] as string), false);
  });

  it('keeps its config first while the readiness indicator is missing: an ADD through the conf dir fails with 11 and host-local hands out nothing', async () => {
    const files = hostLocalFiles();
    unlinkSync(indicator);
    await waitFor(
      'not ready',
      async () => ((await status()).cniConfig?.state === 'not-ready' ? true : undefined),
      DEADLINE_MS,
    );
    assert.equal(firstConfig(), OUTPUT, "Warren's config stays first");
    const r = await viaConfDir('ADD', 'nr-1');
    assert.notEqual(r.code, 0);
    assert.equal(r.json?.code, 11, r.stdout);
    assert.match(String(r.json?.msg), /readiness indicator .* is missing/);
    assert.deepEqual(hostLocalFiles(), files, 'host-local was never asked');
    await del('nr-1'); // the failed sandbox's DEL, as a runtime does
    writeFileSync(indicator, '');
    await waitFor(
      'ready again',
      async () => ((await status()).cniConfig?.state === 'current' ? true : undefined),
      DEADLINE_MS,
    );
  });

  it("hands the node back: after `warren uninstall`, ADDs through host-local never get an address Warren held, and a DEL of a pod Warren addressed releases host-local's reservation", async () => {
    const held = await warrenHolds();
    assert.ok(held.size >= 7, `Warren holds ${held.size}`);
    const u = await run(process.execPath, [
      WARREN_BIN,
      'uninstall',
      '--json',
      '--socket',
      (agent as AgentHandle).socket,
      '--cni-bin-dir',
      binDir,
    ]);
    assert.equal(u.code, 0, u.stderr);
    const report = JSON.parse(u.stdout) as {
      configRemoved: boolean;
      networks: Array<{ network: string; written: number; kept: number; removed: number }>;
      pluginRemoved: string[];
    };
    assert.equal(report.configRemoved, true);
    assert.equal(report.networks[0]?.network, NETWORK);
    assert.deepEqual(report.pluginRemoved, [join(binDir, 'warren'), join(binDir, 'warren.d')]);
    assert.equal(existsSync(join(confDir, OUTPUT)), false);
    // Every address Warren holds is reserved in host-local's format; nothing else of the range.
    assert.deepEqual(hostLocalFiles(), [...held.keys()].sort());
    for (const [address, id] of held) assert.equal(readFileSync(join(dataDir, address), 'utf8'), `${id}\r\neth0`);

    assert.equal(firstConfig(), '10-bridge.conflist');
    for (let i = 0; i < 8; i++) {
      const { address, file } = await add(`after-${i}`);
      assert.equal(file, '10-bridge.conflist');
      assert.ok(!held.has(address), `host-local handed out ${address}, which Warren held for ${held.get(address)}`);
    }
    // A pod Warren addressed goes after the hand-back: host-local's DEL finds its reservation.
    const [address, id] = [...held].find(([, c]) => c.startsWith('w-')) as [string, string];
    assert.ok(existsSync(join(dataDir, address)));
    await del(id);
    assert.equal(existsSync(join(dataDir, address)), false, 'host-local released what Warren had handed out');

    // The agent refuses ADD for good, and says why.
    const s = await status();
    assert.equal(s.cniConfig?.state, 'handed-back');
    assert.match(s.notReady ?? '', /handed back to its primary IPAM by `warren uninstall`/);
  });

  it('removes its database and journal when it stops, keeps the mark, and stays handed back when started again', async () => {
    const dir = (agent as AgentHandle).dir;
    assert.equal(await (agent as AgentHandle).stop(), 0);
    assert.equal(existsSync(join(dir, 'warren.db')), false);
    assert.ok(existsSync(join(dir, 'handed-back.json')));
    agent = await startAgent({
      dir,
      args: ['--manage-cni-config', 'on', '--cni-conf-dir', confDir, '--readiness-indicator-file', indicator],
    });
    const s = await waitFor(
      'the status',
      async () => {
        const x = await status();
        return x.cniConfig?.state === 'handed-back' ? x : undefined;
      },
      DEADLINE_MS,
    );
    assert.equal(s.ready, false);
    assert.equal(existsSync(join(confDir, OUTPUT)), false, 'not written again');
  });
});
