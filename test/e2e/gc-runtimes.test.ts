/**
 * CNI GC on a node where two runtimes share a network name: containerd, and a runtime with a
 * registered adapter (podman's shape: its namespaces under a prefix it declares), with a real agent,
 * the plugin as installed and an adapter serving gRPC on a real socket. A GC from either runtime
 * judges only its own attachments.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeListing } from '../../src/api/plugins/event-codec.ts';
import type { PluginsStatus } from '../../src/api/status.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { removeDir, tempDir, waitFor } from '../helpers/processes.ts';
import { ScriptedAdapter } from '../helpers/scripted-adapter.ts';

const PREFIX = '/run/netns/wrn11-';
const id = (n: string): string => n.padEnd(64, '0');

describe('CNI GC with two runtimes on one network name', () => {
  let agent: AgentHandle;
  let adapter: ScriptedAdapter;
  const dir = tempDir('warren-gc-runtimes-');

  const config = (validAttachments?: ReadonlyArray<{ containerID: string; ifname: string }>) => ({
    cniVersion: '1.1.0',
    name: 'shared-net',
    type: 'warren',
    ipam: { type: 'warren', range: '10.237.44.0/24', socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
    ...(validAttachments === undefined ? {} : { 'cni.dev/valid-attachments': validAttachments }),
  });
  const add = async (containerID: string, netns: string): Promise<void> => {
    const r = await warren({ command: 'ADD', containerID, netns, ifname: 'eth0', config: config() });
    assert.equal(r.code, 0, r.stdout + r.stderr);
  };
  const gc = async (valid: readonly string[]): Promise<void> => {
    const r = await warren({
      command: 'GC',
      config: config(valid.map((containerID) => ({ containerID, ifname: 'eth0' }))),
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
  };
  const held = async (): Promise<string[]> => (await agent.allocations()).map((a) => a.containerID.slice(0, 8)).sort();

  before(async () => {
    agent = await startAgent({
      args: ['--plugins-dir', join(dir, 'plugins'), '--containerd-grace', '0', '--gc-grace', '0'],
    });
    await add(id('podlive1'), `${PREFIX}a`);
    await add(id('podlive2'), `${PREFIX}b`);
    await add(id('ctrlive1'), '/var/run/netns/cni-wrn11-c');
    await add(id('ctrgone1'), '/var/run/netns/cni-wrn11-d');
    adapter = new ScriptedAdapter(join(dir, 'plugins', 'runtime-b.sock'), {
      type: 'warren.event-source',
      name: 'runtime-b',
      endpoint: '',
      supportedVersions: ['v1'],
    });
    adapter.answer = async () => encodeListing({ ids: [id('podlive1'), id('podlive2')], netnsPrefixes: [PREFIX] });
    await adapter.start();
    await waitFor('the adapter to be followed', async () => {
      const s = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/plugins' })).body as PluginsStatus;
      return (s.plugins[0]?.detail?.stream as { state?: string } | undefined)?.state === 'watching' ? true : undefined;
    });
  });
  after(async () => {
    adapter?.stop();
    await agent?.stop();
    removeDir(dir);
  });

  it("a GC from one runtime never releases another runtime's live containers", async () => {
    // containerd's GC lists containerd's live container only.
    await gc([id('ctrlive1')]);
    assert.deepEqual(
      await held(),
      ['ctrlive1', 'podlive1', 'podlive2'],
      "containerd's GC takes its own gone container and none of the adapter's",
    );
    // The other runtime's GC lists one of its containers: containerd's are not its to judge.
    await gc([id('podlive1')]);
    assert.deepEqual(await held(), ['ctrlive1', 'podlive1', 'podlive2']);
  });
});
