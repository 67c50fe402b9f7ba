/**
 * A runtime adapter as the agent meets it, with a real agent process and the plugin as installed:
 * an adapter (a scripted gRPC server, test/helpers/scripted-adapter.ts) puts its socket into the
 * agent's plugins directory, is registered and told so, and then misbehaves — garbage bytes, an
 * unknown kind, an invalid ID — before reporting real deletions. The agent stays up, counts and
 * skips what it cannot use, releases what the adapter answers for, and leaves alone what another
 * runtime holds.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeEvent, encodeListing } from '../../src/api/plugins/event-codec.ts';
import { MESSAGES, encode } from '../../src/api/plugins/wire.ts';
import type { AgentStatus, PluginsStatus } from '../../src/api/status.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { tempDir, waitFor } from '../helpers/processes.ts';
import { ScriptedAdapter } from '../helpers/scripted-adapter.ts';

const PREFIX = '/run/netns/scripted-';
const id = (n: string): string => n.padEnd(64, '0');

describe('a registered runtime adapter, end to end', () => {
  let agent: AgentHandle;
  let adapter: ScriptedAdapter;

  const get = async <T>(path: string): Promise<T> => {
    const r = await requestJson({ socket: agent.socket, method: 'GET', path });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as T;
  };
  const add = async (containerID: string, netns: string): Promise<void> => {
    const r = await warren({
      command: 'ADD',
      containerID,
      netns,
      ifname: 'eth0',
      config: {
        cniVersion: '1.0.0',
        name: 'adapted',
        type: 'warren',
        ipam: { type: 'warren', range: '10.236.9.0/24', socket: agent.socket, journal_dir: join(agent.dir, 'journal') },
      },
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
  };
  const held = async (): Promise<string[]> => (await agent.allocations()).map((a) => a.containerID.slice(0, 8)).sort();

  before(async () => {
    const dir = tempDir('warren-adapter-e2e-');
    const plugins = join(dir, 'plugins');
    agent = await startAgent({ args: ['--plugins-dir', plugins, '--containerd-grace', '0'] });
    await add(id('aaaalive'), `${PREFIX}a`);
    await add(id('bbbbgone'), `${PREFIX}b`);
    await add(id('ccccdele'), `${PREFIX}c`);
    await add(id('ddddothr'), '/var/run/netns/cni-other-runtime');
    adapter = new ScriptedAdapter(join(plugins, 'nested', 'scripted.sock'), {
      type: 'warren.event-source',
      name: 'scripted',
      endpoint: '',
      supportedVersions: ['v0', 'v1'],
    });
    adapter.answer = async () => encodeListing({ ids: [id('aaaalive'), id('ccccdele')], netnsPrefixes: [PREFIX] });
    // A directory made after the agent started, and a socket in it.
    mkdirSync(join(plugins, 'nested'));
    await adapter.start();
  });

  after(async () => {
    adapter?.stop();
    await agent?.stop();
  });

  it('registers it, tells it so, and resynchronises: what the adapter answers for and no longer has is released, nothing else', async () => {
    await waitFor('the registration to be notified', () =>
      adapter.notified.length > 0 ? adapter.notified : undefined,
    );
    assert.deepEqual(adapter.notified, [{ registered: true, error: '' }]);
    // Notified as the last step of registering: the state says so a moment later.
    const status = await waitFor('the plugin to be registered', async () => {
      const s = await get<PluginsStatus>('/v1/plugins');
      return s.plugins[0]?.state === 'registered' ? s : undefined;
    });
    assert.deepEqual(
      status.plugins.map((p) => [p.socket, p.state, p.name, p.version]),
      [[adapter.socket, 'registered', 'scripted', 'v1']],
    );
    await waitFor('the resync to release the absent container', async () =>
      (await held()).includes('bbbbgone') ? undefined : true,
    );
    assert.deepEqual(await held(), ['aaaalive', 'ccccdele', 'ddddothr']);
    assert.deepEqual((await get<AgentStatus>('/v1/status')).plugins, { registered: 1, refused: 0, retrying: 0 });
  });

  it('skips garbage, unknown kinds and invalid IDs without stopping the stream, and acts on the next good event', async () => {
    await adapter.watch(1);
    adapter.write(Buffer.from('this is not protobuf at all \xff\xff\xff'));
    adapter.write(encode(MESSAGES.Event, { id: id('aaaalive'), kind: 9, time_unix_ms: Date.now() }));
    adapter.write(encode(MESSAGES.Event, { id: 'no spaces allowed', kind: 3, time_unix_ms: Date.now() }));
    // Another runtime's container, and one of the adapter's: only the latter is its to release.
    adapter.write(encodeEvent({ id: id('ddddothr'), kind: 'deleted', time: Date.now() }));
    adapter.write(encodeEvent({ id: id('ccccdele'), kind: 'deleted', time: Date.now() }));
    await waitFor('the deleted container to be released', async () =>
      (await held()).includes('ccccdele') ? undefined : true,
    );
    assert.deepEqual(await held(), ['aaaalive', 'ddddothr']);
    const entry = (await get<PluginsStatus>('/v1/plugins')).plugins[0];
    const stream = entry?.detail?.stream as { state: string; streams: number; malformed: number; events: number };
    assert.deepEqual(
      [stream.state, stream.streams, stream.malformed],
      ['watching', 1, 3],
      JSON.stringify(entry?.detail),
    );
    assert.equal(entry?.detail?.released, 2);
    assert.equal((await get<AgentStatus>('/v1/status')).ready, true, 'the agent is up and serving');
  });

  it('unregisters it when its socket goes, and stops following its stream', async () => {
    adapter.stop();
    rmSync(adapter.socket, { force: true });
    await waitFor('the plugin to be unregistered', async () =>
      (await get<PluginsStatus>('/v1/plugins')).plugins.length === 0 ? true : undefined,
    );
    assert.deepEqual((await get<AgentStatus>('/v1/status')).plugins, { registered: 0, refused: 0, retrying: 0 });
  });
});
