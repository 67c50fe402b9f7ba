/**
 * The plugin registry end to end: the real socket watcher on a temporary plugins directory, the
 * system clock, real gRPC, and plugins that are real processes (test/helpers/registration-plugin.ts)
 * serving kubelet's registration handshake. Shown: each plugin is registered on the kernel's event
 * for its socket (no rescan runs during this file, so nothing else can find it; the latency from
 * the plugin's own "listening" record to the handler's register is reported, not judged: a loaded
 * machine stretches it) and told registered=true; unregistered on its socket's removal; 50
 * plugins appearing at once all registered; a refused plugin is told registered=false with the reason; a
 * socket replaced in place is unregistered, then registered again; removing files that are not
 * sockets changes nothing (kubernetes #96827). Everything is awaited with deadlines, never slept.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PluginHandler, RegisteredPlugin } from '../../src/agent/registry/handler.ts';
import { PluginRegistry } from '../../src/agent/registry/registry.ts';
import { EVENT_SOURCE_TYPE, EVENT_SOURCE_VERSIONS, type PluginInfo } from '../../src/api/plugins/wire.ts';
import { RegistrationPluginProcess, type SocketSpec } from '../helpers/registration-plugin.ts';
import { removeDir, tempDir, waitFor } from '../helpers/processes.ts';
import { silentLogger } from '../helpers/logger.ts';

/** Longer than the file runs: a socket registered (or unregistered) was found by its inotify event. */
const NO_RESCAN_MS = 3_600_000;

/** A handler of Warren's event-source type that records when each call came (Date.now()). */
class RecordingHandler implements PluginHandler {
  readonly type = EVENT_SOURCE_TYPE;
  readonly versions = EVENT_SOURCE_VERSIONS;
  readonly log: Array<{
    readonly call: 'register' | 'unregister';
    readonly socket: string;
    readonly name: string;
    readonly at: number;
  }> = [];

  async register(plugin: RegisteredPlugin): Promise<void> {
    this.log.push({ call: 'register', socket: plugin.socket, name: plugin.info.name, at: Date.now() });
  }

  async unregister(plugin: RegisteredPlugin): Promise<void> {
    this.log.push({ call: 'unregister', socket: plugin.socket, name: plugin.info.name, at: Date.now() });
  }

  calls(socket: string): string[] {
    return this.log.filter((l) => l.socket === socket).map((l) => l.call);
  }

  /** When the n-th (from 1) call of this kind for the socket came, once it has. */
  at(call: 'register' | 'unregister', socket: string, n = 1): number | undefined {
    return this.log.filter((l) => l.call === call && l.socket === socket)[n - 1]?.at;
  }
}

const info = (name: string, over: Partial<PluginInfo> = {}): PluginInfo => ({
  type: EVENT_SOURCE_TYPE,
  name,
  endpoint: '',
  supportedVersions: ['v1'],
  ...over,
});

describe('plugin registry with real plugin processes', () => {
  const dir = tempDir('warren-plugins-');
  const handler = new RecordingHandler();
  const abort = new AbortController();
  const registry = new PluginRegistry({ dir, handlers: [handler], logger: silentLogger, rescanMs: NO_RESCAN_MS });
  const plugins: RegistrationPluginProcess[] = [];
  const start = async (specs: readonly SocketSpec[]): Promise<RegistrationPluginProcess> => {
    const plugin = await RegistrationPluginProcess.start(specs);
    plugins.push(plugin);
    return plugin;
  };

  before(async () => {
    registry.start(abort.signal);
    await waitFor('the watcher to list the empty directory', () =>
      registry.status().watcher === 'watching' ? true : undefined,
    );
  });

  after(async () => {
    await Promise.all(plugins.map((p) => p.stop()));
    abort.abort();
    await registry.stopped();
    removeDir(dir);
  });

  /** Waits until the handler registered `socket`; the latency from the plugin's listening record. */
  async function registered(plugin: RegistrationPluginProcess, socket: string, n = 1): Promise<number> {
    const at = await waitFor(`${socket} registered`, () => handler.at('register', socket, n));
    return at - plugin.listeningAt(socket);
  }

  it('registers each plugin on its socket appearing, in nested directories made after start, and tells it registered=true', async (t) => {
    const sockets = [join(dir, 'a.sock'), join(dir, 'nested', 'b.sock'), join(dir, 'deeper', 'still', 'c.sock')];
    const plugin = await start(sockets.map((socket, i) => ({ socket, info: info(`first-${i}`) })));
    for (const socket of sockets)
      t.diagnostic(`${socket} registered ${await registered(plugin, socket)} ms after it appeared`);
    await plugin.until('every plugin told', () => sockets.every((s) => plugin.notified(s).length === 1));
    for (const socket of sockets)
      assert.deepEqual(
        plugin.notified(socket).map((n) => [n.registered, n.error]),
        [[true, '']],
      );
    // The plugin hears registered=true just before the registry records it: wait for the record.
    const entries = await waitFor('all three registered in status', () => {
      const found = registry.status().plugins.filter((p) => sockets.includes(p.socket));
      return found.every((e) => e.state === 'registered') ? found : undefined;
    });
    assert.deepEqual(
      entries.map((e) => [e.state, e.endpoint, e.version]),
      [...sockets].sort().map((s) => ['registered', s, 'v1']),
    );
  });

  it('unregisters a plugin on its socket’s removal, and all of a plugin process’s sockets when it stops', async (t) => {
    const sockets = [join(dir, 'gone-1.sock'), join(dir, 'sub', 'gone-2.sock')];
    const plugin = await start(sockets.map((socket, i) => ({ socket, info: info(`gone-${i}`) })));
    for (const socket of sockets) await registered(plugin, socket);
    const removedAt = Date.now();
    rmSync(sockets[0] as string);
    const unregisteredAt = await waitFor('the removed socket unregistered', () =>
      handler.at('unregister', sockets[0] as string),
    );
    t.diagnostic(`unregistered ${unregisteredAt - removedAt} ms after removal`);
    await plugin.stop();
    await waitFor('the stopped plugin unregistered', () => handler.at('unregister', sockets[1] as string));
    assert.equal(
      registry.status().plugins.some((p) => sockets.includes(p.socket)),
      false,
    );
  });

  it('registers 50 plugins appearing at once', async (t) => {
    const sockets = Array.from({ length: 50 }, (_, i) => join(dir, `burst-${i % 5}`, `p${i}.sock`));
    const plugin = await start(sockets.map((socket, i) => ({ socket, info: info(`burst-${i}`) })));
    await waitFor('all 50 registered', () =>
      sockets.every((s) => handler.at('register', s) !== undefined) ? true : undefined,
    );
    const latencies = await Promise.all(sockets.map((s) => registered(plugin, s)));
    t.diagnostic(`slowest registered ${Math.max(...latencies)} ms after it appeared`);
    await plugin.until('all 50 told registered=true', () =>
      sockets.every((s) => plugin.notified(s).some((n) => n.registered)),
    );
    await plugin.stop();
    await waitFor('all 50 unregistered', () =>
      sockets.every((s) => handler.at('unregister', s) !== undefined) ? true : undefined,
    );
  });

  it('refuses a plugin of an unknown type or no common version, telling it registered=false with the reason', async () => {
    const unknown = join(dir, 'refused', 'csi.sock');
    const old = join(dir, 'refused', 'old.sock');
    const plugin = await start([
      { socket: unknown, info: info('csi', { type: 'kubelet.csi' }) },
      { socket: old, info: info('old', { supportedVersions: ['v0'] }) },
    ]);
    await plugin.until('both told', () => plugin.notified(unknown).length === 1 && plugin.notified(old).length === 1);
    assert.deepEqual(
      plugin.notified(unknown).map((n) => [n.registered, n.error]),
      [[false, 'unknown plugin type "kubelet.csi" (Warren knows "warren.event-source")']],
    );
    assert.equal(plugin.notified(old)[0]?.registered, false);
    assert.match(plugin.notified(old)[0]?.error ?? '', /no version in common/);
    const entries = registry.status().plugins.filter((p) => p.socket === unknown || p.socket === old);
    assert.deepEqual(
      entries.map((e) => e.state),
      ['refused', 'refused'],
    );
    assert.deepEqual(handler.calls(unknown), []);
    assert.deepEqual(handler.calls(old), []);
  });

  it('a socket replaced in place by another plugin process is unregistered, then registered again', async () => {
    const socket = join(dir, 'replaced.sock');
    const first = await start([{ socket, info: info('replaced') }]);
    await registered(first, socket);
    const second = await start([{ socket, info: info('replaced') }]);
    await registered(second, socket, 2);
    assert.deepEqual(handler.calls(socket), ['register', 'unregister', 'register']);
    await second.until('the new plugin told registered=true', () => second.notified(socket).some((n) => n.registered));
    assert.deepEqual(
      first.notified(socket).map((n) => n.registered),
      [true],
    );
  });

  it('removing a regular file, a FIFO or a dot-file in the plugins directory unregisters nothing (kubernetes #96827)', async () => {
    const keep = join(dir, 'kept.sock');
    const sentinel = join(dir, 'sentinel.sock');
    const plugin = await start([
      { socket: keep, info: info('kept') },
      { socket: sentinel, info: info('sentinel') },
    ]);
    await registered(plugin, keep);
    await registered(plugin, sentinel);
    mkdirSync(join(dir, 'junk'));
    const file = join(dir, 'junk', 'notes.txt');
    const fifo = join(dir, 'fifo');
    const dot = join(dir, '.hidden.sock');
    writeFileSync(file, 'not a socket');
    writeFileSync(dot, 'a dot-file');
    execFileSync('mkfifo', [fifo]);
    rmSync(file);
    rmSync(fifo);
    rmSync(dot);
    rmSync(join(dir, 'junk'), { recursive: true });
    // One directory's events come in order: once the sentinel's removal is handled, the removals
    // before it in the same directory were too.
    rmSync(sentinel);
    await waitFor('the sentinel unregistered', () => handler.at('unregister', sentinel));
    assert.deepEqual(handler.calls(keep), ['register'], 'the kept plugin is untouched');
    assert.equal(registry.status().plugins.find((p) => p.socket === keep)?.state, 'registered');
    assert.equal(
      registry.status().plugins.some((p) => [file, fifo, dot].includes(p.socket)),
      false,
    );
  });
});
