/**
 * The podman adapter end to end, with real parts only: Debian's podman 4.3 on its CNI backend (a
 * private containers.conf and storage, test/helpers/podman.ts) calling the real `bridge` plugin
 * with Warren, as installed, for its IPAM; a real agent process whose plugin registry watches a
 * private plugins directory; and `warren podman-events`, the shipped adapter, as a real process.
 *
 * To prove that only the adapter can tell, the plugin's DEL can neither reach the agent nor
 * journal the DEL: the network's `ipam.socket` is a symbolic link that points at the agent's socket
 * for each ADD and elsewhere afterwards (podman's DEL uses the config cached at ADD, so rewriting
 * the network file would not do), and its journal dir lies under a regular file. podman removes
 * the container all the same, and Warren hears of it only through the adapter.
 *
 * podman tears an exited container's network down at once (its cleanup calls DEL and then removes
 * the namespace, even when the DEL fails). To see an exit while the namespace still exists, the
 * exit test points the DEL at a socket that accepts and never answers: podman's cleanup waits in
 * the DEL with the namespace still there, for as long as the test holds it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PluginsStatus, ReconcilerStatus } from '../../src/api/status.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { cniBinDir, warren } from '../helpers/cni.ts';
import { createNetns, deleteNetns } from '../helpers/netns.ts';
import { type Podman, startPodman, uniquePodmanName } from '../helpers/podman.ts';
import { CHILD_PATH, REPO, WARREN_BIN, isGone, isRoot, run, tempDir, track, waitFor } from '../helpers/processes.ts';

const skip = isRoot() ? false : 'needs root (podman with CNI, network namespaces)';

interface Adapter {
  readonly child: ChildProcess;
  log(): string;
  kill(): Promise<void>;
}

describe('the podman adapter with real podman', { skip }, () => {
  let agent: AgentHandle;
  let podman: Podman;
  let adapter: Adapter | undefined;
  let pluginsDir: string;
  const network = uniquePodmanName('wrp-warren-', 24);
  const bridge = uniquePodmanName('wrw');
  const third = 64 + Math.floor(Math.random() * 128);
  const range = `10.238.${third}.0/24`;
  let unwritable: string;
  /** The network's `ipam.socket`: a link to the agent's socket during an ADD, elsewhere after. */
  let socketLink: string;
  const namespaces: string[] = [];

  const pointSocketAt = (target: string): void => {
    rmSync(socketLink, { force: true });
    symlinkSync(target, socketLink);
  };

  const writeNetwork = (): void => {
    podman.writeNetwork(network, {
      cniVersion: '1.0.0',
      name: network,
      plugins: [
        {
          type: 'bridge',
          bridge,
          isGateway: true,
          ipMasq: false,
          ipam: { type: 'warren', range, socket: socketLink, journal_dir: join(unwritable, 'journal') },
        },
      ],
    });
  };

  const startAdapter = async (): Promise<Adapter> => {
    const child = track(
      spawn(process.execPath, [WARREN_BIN, 'podman-events', '--plugins-dir', pluginsDir, '--podman', podman.bin], {
        cwd: REPO,
        env: { ...podman.env, PATH: CHILD_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    const pid = child.pid as number;
    return {
      child,
      log: () => output,
      async kill() {
        child.kill('SIGKILL');
        await waitFor('the adapter to be gone', () => (isGone(pid) ? true : undefined));
      },
    };
  };

  const plugins = async (): Promise<PluginsStatus> => {
    const r = await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/plugins' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as PluginsStatus;
  };

  /** The podman plugin's entry once it is registered and its stream is watching. */
  const registered = () =>
    waitFor('the podman adapter to be registered and watching', async () => {
      const entry = (await plugins()).plugins.find((p) => p.name === 'podman' && p.state === 'registered');
      return (entry?.detail?.stream as { state?: string } | undefined)?.state === 'watching' ? entry : undefined;
    });

  const heldBy = async (id: string): Promise<string[]> =>
    (await agent.allocations(`?containerID=${id}`)).map((a) => a.address);

  /**
   * A container on Warren's network, running `sleep`; its ID, address and namespace. Its DEL (and
   * every later one) goes to `delSocket`: by default a path where nothing listens.
   */
  const runContainer = async (
    delSocket = join(agent.dir, 'nobody-listens.sock'),
  ): Promise<{ id: string; address: string; netns: string }> => {
    pointSocketAt(agent.socket);
    const id = await podman.ok(['run', '-d', '--network', network, podman.image, 'sleep', '1000']);
    pointSocketAt(delSocket);
    const [address] = await heldBy(id);
    assert.ok(address !== undefined, `container ${id} holds an address from Warren`);
    const netns = await podman.ok(['inspect', '--format', '{{.NetworkSettings.SandboxKey}}', id]);
    assert.match(netns, /^\/run\/netns\/netns-/);
    return { id, address, netns };
  };

  /** A unix socket that accepts connections and never answers; `close` ends them and removes it. */
  const stallingSocket = async (path: string): Promise<{ close(): Promise<void> }> => {
    const held = new Set<Socket>();
    const server: Server = createServer((socket) => {
      held.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(path, resolve));
    let closed = false;
    return {
      async close() {
        if (closed) return;
        closed = true;
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const socket of held) socket.destroy();
        });
        rmSync(path, { force: true });
      },
    };
  };

  let agentArgs: string[] = [];
  before(async () => {
    const dir = tempDir('warren-podman-e2e-');
    pluginsDir = join(dir, 'plugins');
    unwritable = join(dir, 'a-file');
    socketLink = join(dir, 'agent-link.sock');
    writeFileSync(unwritable, 'not a directory\n');
    mkdirSync(pluginsDir);
    agentArgs = [
      '--plugins-dir',
      pluginsDir,
      '--netns-dirs',
      '/run/netns',
      '--netns-sweep',
      'off',
      '--containerd-grace',
      '0',
    ];
    // The namespace sweep off: what these tests see released is the adapter's doing (a namespace
    // removed would otherwise release its address at once, adapter or not: audit.test.ts).
    agent = await startAgent({ args: agentArgs });
    podman = await startPodman({ cniPluginDirs: [cniBinDir()] });
    writeNetwork();
    adapter = await startAdapter();
  });

  after(async () => {
    await adapter?.kill();
    await podman?.close();
    await podman?.deleteBridge(bridge);
    for (const name of namespaces) await deleteNetns(name);
    await agent?.stop();
  });

  it('registers the adapter from its socket in the plugins directory', async () => {
    const entry = await registered();
    assert.equal(entry.type, 'warren.event-source');
    assert.equal(entry.version, 'v1');
    assert.equal(entry.socket, join(pluginsDir, 'warren-podman.sock'));
    // What an operator types.
    const listing = await run(process.execPath, [WARREN_BIN, 'plugins', '--socket', agent.socket]);
    assert.equal(listing.code, 0, listing.stderr);
    assert.match(listing.stdout, /1 registered, 0 refused, 0 retrying/);
    assert.match(listing.stdout, /warren-podman\.sock\s+registered\s+warren\.event-source\s+podman\s+v1\s/);
    const status = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket]);
    assert.match(status.stdout, /plugins: {5}1 registered, 0 refused, 0 retrying/);
  });

  it("releases the address of a container removed while its DEL could neither reach the agent nor be journaled, on podman's remove event", async (t) => {
    await registered();
    const { id } = await runContainer();
    await podman.ok(['rm', '-f', '-t', '0', id]);
    const removedAt = Date.now();
    await waitFor("the address to be released on the adapter's word", async () =>
      (await heldBy(id)).length === 0 ? true : undefined,
    );
    const tookMs = Date.now() - removedAt;
    t.diagnostic(`released ${tookMs} ms after podman rm returned`);
    const entry = (await plugins()).plugins.find((p) => p.name === 'podman');
    assert.ok(
      Number(entry?.detail?.released) >= 1,
      `the adapter's releases are counted: ${JSON.stringify(entry?.detail)}`,
    );
    const journal = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/journal' }))
      .body as ReconcilerStatus;
    assert.deepEqual([journal.releasedFromJournal, journal.pending.length], [0, 0], 'nothing was journaled');
  });

  it('keeps the address of a container that merely exited while its namespace exists, and releases it once the namespace is gone', async () => {
    await registered();
    const stall = await stallingSocket(join(agent.dir, 'stall.sock'));
    try {
      await exitWhileTheNamespaceStays(stall);
    } finally {
      await stall.close();
    }
  });

  const exitWhileTheNamespaceStays = async (stall: { close(): Promise<void> }): Promise<void> => {
    const { id, address, netns } = await runContainer(join(agent.dir, 'stall.sock'));
    // kill, not stop: `podman stop` would itself wait in the stalled DEL.
    await podman.ok(['kill', id]);
    // The exit reaches the agent, which waits for the namespace rather than releasing.
    await waitFor('the exit to be judged', async () => {
      const entry = (await plugins()).plugins.find((p) => p.name === 'podman');
      const exited = (entry?.detail?.exited ?? []) as Array<{ containerID: string }>;
      return exited.some((e) => e.containerID === id) ? true : undefined;
    });
    assert.ok(existsSync(netns), `${netns} still exists while podman's DEL waits`);
    assert.deepEqual(await heldBy(id), [address], 'a process exiting is not proof');
    // The DEL fails (nothing answers, nothing can be journaled); podman removes the namespace.
    await stall.close();
    await waitFor('the address to be released once the namespace is gone', async () =>
      (await heldBy(id)).length === 0 ? true : undefined,
    );
    assert.equal(existsSync(netns), false);
    await podman.ok(['rm', '-f', '-t', '0', id]);
  };

  it("after the adapter is killed and restarted, its resync releases exactly the containers removed meanwhile, and never another runtime's", async () => {
    await registered();
    const kept = await runContainer();
    const removed = await runContainer();
    // An allocation another runtime made, in a namespace that is not podman's.
    const other = await createNetns();
    namespaces.push(other.name);
    const otherID = uniquePodmanName('other-runtime-', 40);
    const add = await warren({
      command: 'ADD',
      containerID: otherID,
      netns: other.path,
      ifname: 'eth0',
      config: {
        cniVersion: '1.0.0',
        name: network,
        type: 'warren',
        ipam: { type: 'warren', range, socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
      },
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    await adapter?.kill();
    adapter = undefined;
    await podman.ok(['rm', '-f', '-t', '0', removed.id]);
    assert.deepEqual(await heldBy(removed.id), [removed.address], 'no adapter, no news: the address stays for now');
    adapter = await startAdapter();
    await waitFor('the removed container to be released by the resync', async () =>
      (await heldBy(removed.id)).length === 0 ? true : undefined,
    );
    await registered();
    assert.deepEqual(await heldBy(kept.id), [kept.address]);
    assert.equal((await heldBy(otherID)).length, 1, "another runtime's allocation is not the adapter's to judge");
    await podman.ok(['rm', '-f', '-t', '0', kept.id]);
    await waitFor('the kept container to be released once removed', async () =>
      (await heldBy(kept.id)).length === 0 ? true : undefined,
    );
  });

  it('is registered again when the agent restarts, and the resync releases what podman removed while the agent was down', async () => {
    await registered();
    const removed = await runContainer();
    await agent.stop();
    await podman.ok(['rm', '-f', '-t', '0', removed.id]);
    agent = await startAgent({ dir: agent.dir, args: agentArgs });
    await registered();
    await waitFor('the container removed meanwhile to be released', async () =>
      (await heldBy(removed.id)).length === 0 ? true : undefined,
    );
  });
});
