/**
 * What a registered runtime adapter may speak for, with a real agent, the plugin as installed, real
 * network namespaces and an adapter serving gRPC on a real socket (test/helpers/scripted-adapter.ts):
 * an adapter that declares the namespaces containerd's CRI makes, or another adapter's, is refused
 * and told why; and an adapter's word alone never frees an allocation whose namespace is still
 * there, whatever it declares. Needs root (ip netns).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeEvent, encodeListing } from '../../src/api/plugins/event-codec.ts';
import type { PluginsStatus } from '../../src/api/status.ts';
import type { RegistrationStatus } from '../../src/api/plugins/wire.ts';
import { messageOf } from '../../src/core/errors.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { deleteNetns, uniqueName } from '../helpers/netns.ts';
import { HANG_BOUND_MS, isRoot, removeDir, sh, tempDir, waitFor } from '../helpers/processes.ts';
import { ScriptedAdapter } from '../helpers/scripted-adapter.ts';

const skip = isRoot() ? false : 'needs root (ip netns)';
const id = (n: string): string => n.padEnd(64, '0');

/** A real namespace named `<prefix><random>` under /var/run/netns, removed by the caller. */
async function namespace(prefix: string, made: string[]): Promise<{ name: string; path: string }> {
  const name = uniqueName(prefix, 24);
  await sh('ip', ['netns', 'add', name]);
  made.push(name);
  return { name, path: `/var/run/netns/${name}` };
}

async function plugins(agent: AgentHandle): Promise<PluginsStatus> {
  return (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/plugins' })).body as PluginsStatus;
}

async function add(agent: AgentHandle, containerID: string, netns: string): Promise<void> {
  const r = await warren({
    command: 'ADD',
    containerID,
    netns,
    ifname: 'eth0',
    config: {
      cniVersion: '1.0.0',
      name: 'adapter-scope',
      type: 'warren',
      ipam: { type: 'warren', range: '10.237.42.0/24', socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
    },
  });
  assert.equal(r.code, 0, r.stdout + r.stderr);
}

/** What `adapter` was first told; failing, what the agent shows of it and the agent's log. */
async function told(agent: AgentHandle, adapter: ScriptedAdapter, what: string): Promise<RegistrationStatus> {
  try {
    return await waitFor(`${what} to be told`, () => adapter.notified[0]);
  } catch (error) {
    const entry = (await plugins(agent).catch(() => undefined))?.plugins.find((p) => p.socket === adapter.socket);
    const log = agent.log();
    throw new Error(
      `${messageOf(error)}; the agent shows it as ${JSON.stringify(entry)}; the end of its log:\n${log.slice(-6_000)}`,
      { cause: error },
    );
  }
}

const held = async (agent: AgentHandle): Promise<string[]> =>
  (await agent.allocations()).map((a) => a.containerID.slice(0, 8)).sort();

describe("an adapter that claims containerd's namespaces", { skip }, () => {
  let agent: AgentHandle;
  const dir = tempDir('warren-adapter-scope-');
  const made: string[] = [];
  const adapters: ScriptedAdapter[] = [];

  before(async () => {
    // containerd's source is on (its socket is nowhere: it is down, which judges nothing).
    agent = await startAgent({
      defaultNetnsDirs: true,
      args: [
        '--plugins-dir',
        join(dir, 'plugins'),
        '--containerd',
        'on',
        '--containerd-socket',
        join(dir, 'no-containerd.sock'),
        '--containerd-grace',
        '0',
        '--netns-grace',
        '3600',
      ],
    });
  });
  after(async () => {
    for (const a of adapters) a.stop();
    await agent?.stop();
    for (const ns of made) await deleteNetns(ns);
    removeDir(dir);
  });

  it("never lets an adapter declare containerd's CRI namespaces, nor another adapter's, and tells it why", async () => {
    const cri = await namespace('cni-wrn6s-', made);
    await add(agent, id('cricont1'), cri.path);
    const greedy = new ScriptedAdapter(join(dir, 'plugins', 'greedy.sock'), {
      type: 'warren.event-source',
      name: 'greedy',
      endpoint: '',
      supportedVersions: ['v1'],
    });
    adapters.push(greedy);
    greedy.answer = async () => encodeListing({ ids: [], netnsPrefixes: ['/var/run/netns/'] });
    await greedy.start();
    const greedyTold = await told(agent, greedy, 'the greedy adapter');
    assert.equal(greedyTold.registered, false);
    assert.match(
      greedyTold.error,
      /"\/var\/run\/netns\/" overlaps "\/var\/run\/netns\/cni-", which containerd answers for/,
    );
    const entry = (await plugins(agent)).plugins.find((p) => p.socket === greedy.socket);
    assert.equal(entry?.state, 'refused');
    assert.match(entry?.error ?? '', /containerd answers for/);
    assert.deepEqual(await held(agent), ['cricont1'], "containerd's container keeps its address");

    // A first adapter takes its own prefix; a second one that overlaps it is refused.
    const first = new ScriptedAdapter(join(dir, 'plugins', 'first.sock'), {
      type: 'warren.event-source',
      name: 'first',
      endpoint: '',
      supportedVersions: ['v1'],
    });
    const second = new ScriptedAdapter(join(dir, 'plugins', 'second.sock'), {
      type: 'warren.event-source',
      name: 'second',
      endpoint: '',
      supportedVersions: ['v1'],
    });
    adapters.push(first, second);
    first.answer = async () => encodeListing({ ids: [], netnsPrefixes: ['/run/netns/wrn6-first-'] });
    second.answer = async () => encodeListing({ ids: [], netnsPrefixes: ['/var/run/netns/wrn6-'] });
    await first.start();
    assert.deepEqual(await told(agent, first, 'the first adapter'), {
      registered: true,
      error: '',
    });
    await second.start();
    const refused = await told(agent, second, 'the second adapter');
    assert.equal(refused.registered, false);
    assert.match(refused.error, /overlaps "\/run\/netns\/wrn6-first-", which the runtime adapter "first" answers for/);
  });
});

describe("an adapter's word alone", { skip }, () => {
  let agent: AgentHandle;
  const dir = tempDir('warren-adapter-word-');
  const made: string[] = [];
  let adapter: ScriptedAdapter;

  before(async () => {
    // No containerd: the adapter may declare these namespaces; the sweep waits an hour, so only
    // the adapter's word (and the namespaces' going) can release anything here.
    agent = await startAgent({
      defaultNetnsDirs: true,
      args: ['--plugins-dir', join(dir, 'plugins'), '--containerd-grace', '0', '--netns-grace', '3600'],
    });
  });
  after(async () => {
    adapter?.stop();
    await agent?.stop();
    for (const ns of made) await deleteNetns(ns);
    removeDir(dir);
  });

  it("an adapter's word alone never frees an address whose namespace still exists: it waits for the namespace to go", async () => {
    const live = await namespace('wrn6w-live-', made);
    const gone = await namespace('wrn6w-gone-', made);
    const exits = await namespace('wrn6w-exit-', made);
    await add(agent, id('livecont'), live.path);
    await add(agent, id('gonecont'), gone.path);
    await add(agent, id('delecont'), exits.path);
    await deleteNetns(gone.name);
    adapter = new ScriptedAdapter(join(dir, 'plugins', 'word.sock'), {
      type: 'warren.event-source',
      name: 'word',
      endpoint: '',
      supportedVersions: ['v1'],
    });
    // It lists no container at all: by its word every one of them is gone.
    adapter.answer = async () => encodeListing({ ids: [], netnsPrefixes: ['/var/run/netns/wrn6w-'] });
    await adapter.start();
    assert.deepEqual(await waitFor('the adapter to be told', () => adapter.notified[0]), {
      registered: true,
      error: '',
    });
    // The one whose namespace is gone goes; the others wait for theirs.
    await waitFor(
      'the resync to release the container whose namespace is gone',
      async () => ((await held(agent)).includes('gonecont') ? undefined : true),
      HANG_BOUND_MS,
    );
    assert.deepEqual(await held(agent), ['delecont', 'livecont']);
    // A deletion on its word alone waits too, while the namespace is there...
    await adapter.watch(1);
    adapter.write(encodeEvent({ id: id('delecont'), kind: 'deleted', time: Date.now() }));
    const waiting = await waitFor('the deleted container to wait for its namespace', async () => {
      const entry = (await plugins(agent)).plugins[0];
      const exited = (entry?.detail?.exited ?? []) as Array<{ containerID: string }>;
      return exited.some((e) => e.containerID === id('delecont')) ? exited : undefined;
    });
    assert.ok(waiting.length >= 1);
    assert.deepEqual(await held(agent), ['delecont', 'livecont']);
    // ...and is released when it goes.
    await deleteNetns(exits.name);
    await waitFor(
      'the container to be released once its namespace is gone',
      async () => ((await held(agent)).includes('delecont') ? undefined : true),
      HANG_BOUND_MS,
    );
    assert.deepEqual(await held(agent), ['livecont'], 'the container whose namespace exists keeps its address');
  });
});
