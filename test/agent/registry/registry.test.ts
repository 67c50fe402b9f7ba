/**
 * The plugin registry with synthetic watcher events, a fake handshake and a manual clock: the
 * reconciler's order (unregister before register, one operation per socket), replaced and renamed
 * sockets, kubelet's delete bug (kubernetes #96827) not repeated, timeouts and backoff stepped on
 * the clock, every refusal told to the plugin, status() and shutdown. Nothing sleeps: the clock is
 * advanced, and the registry's work is awaited with a deadline.
 */
import assert from 'node:assert/strict';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { OWNER_TRUST } from '../../../src/agent/registry/trust.ts';
import { PluginRegistry, type PluginRegistryOptions } from '../../../src/agent/registry/registry.ts';
import type { PluginHandler, RegisteredPlugin } from '../../../src/agent/registry/handler.ts';
import type { PluginInfo, RegistrationStatus } from '../../../src/api/plugins/wire.ts';
import type { PluginEntry } from '../../../src/api/status.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { RegistrationClientLike } from '../../../src/sources/plugins/registration-client.ts';
import type { SocketEvent } from '../../../src/sources/plugins/socket-watcher.ts';
import { HANG_BOUND_MS, removeDir, tempDir } from '../../helpers/processes.ts';
import { flush } from '../../helpers/event-loop.ts';
import { silentLogger } from '../../helpers/logger.ts';

const TYPE = 'warren.event-source';
const START = Date.parse('2026-11-22T10:00:00Z');

/** How a fake plugin answers one call. */
type Answer<T> = { readonly value: T } | { readonly error: string } | 'hang';

/** One plugin behind a socket, as the fake handshake plays it. */
interface FakePlugin {
  info: Answer<PluginInfo>;
  notify: Answer<undefined>;
  infoCalls: number;
  readonly notified: RegistrationStatus[];
  closed: number;
}

class FakeHandshake {
  readonly plugins = new Map<string, FakePlugin>();

  /** Serves `info` at `socket` (a fresh record of calls). */
  serve(socket: string, info: Answer<PluginInfo>, notify: Answer<undefined> = { value: undefined }): FakePlugin {
    const plugin: FakePlugin = { info, notify, infoCalls: 0, notified: [], closed: 0 };
    this.plugins.set(socket, plugin);
    return plugin;
  }

  readonly connect = (socket: string): RegistrationClientLike => {
    const plugin = this.plugins.get(socket);
    const answer = <T>(a: Answer<T> | undefined): Promise<T> => {
      if (a === undefined) return Promise.reject(new Error(`connect ${socket}: ECONNREFUSED`));
      if (a === 'hang') return new Promise<T>(() => undefined);
      return 'error' in a ? Promise.reject(new Error(a.error)) : Promise.resolve(a.value);
    };
    return {
      getInfo: () => {
        if (plugin !== undefined) plugin.infoCalls++;
        return answer(plugin?.info);
      },
      notify: (status) => {
        plugin?.notified.push(status);
        return answer(plugin?.notify);
      },
      close: () => {
        if (plugin !== undefined) plugin.closed++;
      },
    };
  };
}

/** A handler that records every call, in order, into a shared log. */
class RecordingHandler implements PluginHandler {
  readonly type: string;
  readonly versions: readonly string[];
  readonly log: string[];
  /** While set, register waits for it. */
  gate: Promise<void> | undefined;
  /** How many registers still throw. */
  failRegisters = 0;
  refuse: ((info: PluginInfo) => string | undefined) | undefined;
  readonly registered = new Set<RegisteredPlugin>();

  constructor(log: string[], type = TYPE, versions: readonly string[] = ['v1']) {
    this.log = log;
    this.type = type;
    this.versions = versions;
  }

  validate(info: PluginInfo): string | undefined {
    return this.refuse?.(info);
  }

  async register(plugin: RegisteredPlugin): Promise<void> {
    this.log.push(`register ${plugin.socket}`);
    if (this.gate !== undefined) await this.gate;
    if (this.failRegisters > 0) {
      this.failRegisters--;
      throw new Error('the stream would not open');
    }
    this.registered.add(plugin);
  }

  async unregister(plugin: RegisteredPlugin): Promise<void> {
    this.log.push(`unregister ${plugin.socket}`);
    assert.ok(this.registered.delete(plugin), 'unregister is given the very object register was');
  }

  describe(plugin: RegisteredPlugin): Readonly<Record<string, unknown>> {
    return { served: plugin.info.name };
  }
}

interface Rig {
  readonly dir: string;
  readonly clock: ManualClock;
  readonly events: AsyncChannel<SocketEvent>;
  readonly handshake: FakeHandshake;
  readonly handler: RecordingHandler;
  readonly log: string[];
  readonly registry: PluginRegistry;
  readonly abort: AbortController;
  /** A socket reported by the "watcher", served by a fake plugin answering `info`. */
  socket(name: string, info?: Answer<PluginInfo> | Partial<PluginInfo>, ino?: number): FakePlugin;
  gone(name: string): void;
  path(name: string): string;
  entry(name: string): PluginEntry | undefined;
  /** Waits (real time, with a deadline) until the registry's status satisfies `done`. */
  until(what: string, done: () => boolean): Promise<void>;
  /** Waits until the events are taken and no operation is queued or running (none may hang). */
  settle(): Promise<void>;
}

const rigs: Rig[] = [];
afterEach(async () => {
  for (const rig of rigs.splice(0)) {
    rig.abort.abort();
    rig.events.close();
    await rig.registry.stopped();
    removeDir(rig.dir);
  }
});

function rig(overrides: Partial<PluginRegistryOptions> = {}, handlers?: (log: string[]) => PluginHandler[]): Rig {
  const dir = tempDir('warren-registry-');
  const clock = new ManualClock(START);
  const events = new AsyncChannel<SocketEvent>();
  const handshake = new FakeHandshake();
  const log: string[] = [];
  const handler = new RecordingHandler(log);
  const registry = new PluginRegistry({
    dir,
    handlers: handlers?.(log) ?? [handler],
    logger: silentLogger,
    clock,
    events,
    connect: handshake.connect,
    // The handshake is a fake: its sockets are paths without files, so only the directory is judged.
    trust: { dir: OWNER_TRUST.dir, socket: () => undefined },
    ...overrides,
  });
  const abort = new AbortController();
  registry.start(abort.signal);
  let nextIno = 100;
  const path = (name: string): string => join(dir, name);
  const r: Rig = {
    dir,
    clock,
    events,
    handshake,
    handler,
    log,
    registry,
    abort,
    path,
    socket(name, info = {}, ino = nextIno++) {
      const answer: Answer<PluginInfo> =
        info === 'hang' || 'value' in info || 'error' in info
          ? (info as Answer<PluginInfo>)
          : { value: { type: TYPE, name, endpoint: '', supportedVersions: ['v1'], ...(info as Partial<PluginInfo>) } };
      const plugin = handshake.serve(path(name), answer);
      events.push({ kind: 'socket', path: path(name), ino });
      return plugin;
    },
    gone(name) {
      events.push({ kind: 'gone', path: path(name) });
    },
    entry: (name) => registry.status().plugins.find((p) => p.socket === path(name)),
    async until(what, done) {
      const end = Date.now() + HANG_BOUND_MS;
      while (!done()) {
        if (Date.now() > end)
          throw new Error(
            `timed out waiting for ${what}: ${JSON.stringify(registry.status(), null, 1)}\nlog: ${log.join(', ')}`,
          );
        await flush();
      }
    },
    async settle() {
      await flush();
      await registry.idle();
      await flush();
    },
  };
  rigs.push(r);
  return r;
}

describe('plugin registry: registering', () => {
  it('registers a reported socket: GetInfo, the handler, then NotifyRegistrationStatus(true)', async () => {
    const r = rig();
    const plugin = r.socket('podman.sock', { endpoint: 'podman-events.sock' });
    await r.settle();
    assert.deepEqual(r.log, [`register ${r.path('podman.sock')}`]);
    assert.deepEqual(plugin.notified, [{ registered: true, error: '' }]);
    assert.equal(plugin.closed > 0, true, 'the handshake client is closed once the attempt is over');
    const [registered] = r.handler.registered;
    assert.deepEqual(registered, {
      socket: r.path('podman.sock'),
      info: { type: TYPE, name: 'podman.sock', endpoint: 'podman-events.sock', supportedVersions: ['v1'] },
      endpoint: r.path('podman-events.sock'),
      version: 'v1',
    });
  });

  it('chooses the first of the handler’s versions the plugin supports, in the handler’s order', async () => {
    const log: string[] = [];
    const handler = new RecordingHandler(log, TYPE, ['v2', 'v1']);
    const r = rig({}, () => [handler]);
    r.socket('a.sock', { supportedVersions: ['v1', 'v2', 'v3'] });
    await r.settle();
    assert.equal([...handler.registered][0]?.version, 'v2');
    assert.equal(r.entry('a.sock')?.version, 'v2');
  });

  it('registers sockets in nested directories and many at once, each once', async () => {
    const r = rig();
    const names = Array.from({ length: 50 }, (_, i) => `node-${i % 5}/plugin-${i}.sock`);
    for (const name of names) r.socket(name);
    await r.settle();
    assert.equal(r.handler.registered.size, 50);
    assert.equal(r.log.length, 50);
    assert.equal(r.registry.status().registered, 50);
  });
});

describe('plugin registry: unregister before register', () => {
  it('a socket replaced in place (new inode) is unregistered, then registered again', async () => {
    const r = rig();
    const first = r.socket('a.sock', {}, 7);
    await r.settle();
    const second = r.socket('a.sock', {}, 8);
    await r.settle();
    assert.deepEqual(r.log, [
      `register ${r.path('a.sock')}`,
      `unregister ${r.path('a.sock')}`,
      `register ${r.path('a.sock')}`,
    ]);
    assert.deepEqual(first.notified, [{ registered: true, error: '' }]);
    assert.deepEqual(second.notified, [{ registered: true, error: '' }]);
    assert.equal(r.handler.registered.size, 1);
  });

  it('a socket replaced with the inode number just freed (ext4 reuses it) is registered again too', async () => {
    const r = rig();
    r.socket('a.sock', {}, 7);
    await r.settle();
    r.socket('a.sock', {}, 7);
    await r.settle();
    assert.deepEqual(r.log, [
      `register ${r.path('a.sock')}`,
      `unregister ${r.path('a.sock')}`,
      `register ${r.path('a.sock')}`,
    ]);
  });

  it('a gone then a new socket at the same path, reported together, is unregistered before it registers', async () => {
    const r = rig();
    r.socket('a.sock');
    await r.settle();
    r.gone('a.sock');
    r.socket('a.sock');
    await r.settle();
    assert.deepEqual(r.log, [
      `register ${r.path('a.sock')}`,
      `unregister ${r.path('a.sock')}`,
      `register ${r.path('a.sock')}`,
    ]);
    assert.equal(r.entry('a.sock')?.state, 'registered');
  });

  it('a renamed socket is unregistered at its old path and registered at its new one, its name not refused as taken', async () => {
    const r = rig();
    r.socket('old.sock', { name: 'podman' });
    await r.settle();
    r.gone('old.sock');
    const moved = r.socket('new.sock', { name: 'podman' });
    await r.settle();
    assert.deepEqual(r.log, [
      `register ${r.path('old.sock')}`,
      `unregister ${r.path('old.sock')}`,
      `register ${r.path('new.sock')}`,
    ]);
    assert.deepEqual(moved.notified, [{ registered: true, error: '' }]);
    assert.equal(r.entry('old.sock'), undefined);
    assert.equal(r.entry('new.sock')?.state, 'registered');
  });

  it('one operation per socket at a time: a gone during a slow register waits for it, then unregisters', async () => {
    const r = rig();
    let open!: () => void;
    r.handler.gate = new Promise((resolve) => (open = resolve));
    r.socket('slow.sock');
    await r.until('the register to start', () => r.log.length === 1);
    r.gone('slow.sock');
    await flush(20);
    assert.deepEqual(r.log, [`register ${r.path('slow.sock')}`], 'no unregister while the register runs');
    assert.equal(r.entry('slow.sock')?.state, 'registering');
    open();
    await r.settle();
    assert.deepEqual(r.log, [`register ${r.path('slow.sock')}`, `unregister ${r.path('slow.sock')}`]);
    assert.equal(r.handler.registered.size, 0);
    assert.equal(r.entry('slow.sock'), undefined);
  });
});

describe('plugin registry: deletes of paths that were never sockets (kubernetes #96827)', () => {
  it('a gone for a path never reported, or not a socket, changes nothing (kubernetes #96827: kubelet unregisters it anyway)', async () => {
    const r = rig();
    r.socket('a.sock');
    await r.settle();
    const before = r.registry.status();
    // A regular file, a FIFO, a directory, a dot-file beside the socket, a never-seen socket name,
    // and the plugins directory itself.
    for (const name of ['notes.txt', 'fifo', 'sub', '.a.sock.tmp', 'b.sock']) r.gone(name);
    r.events.push({ kind: 'gone', path: r.dir });
    await r.settle();
    assert.deepEqual(r.log, [`register ${r.path('a.sock')}`], 'no handler call');
    assert.deepEqual(r.registry.status(), before);
  });

  it('a gone for a socket already gone is a no-op the second time', async () => {
    const r = rig();
    r.socket('a.sock');
    await r.settle();
    r.gone('a.sock');
    r.gone('a.sock');
    await r.settle();
    assert.deepEqual(r.log, [`register ${r.path('a.sock')}`, `unregister ${r.path('a.sock')}`]);
  });
});

describe('plugin registry: timeouts and backoff on the clock', () => {
  it('a plugin that never answers GetInfo times out at 1 s and is retried after 500 ms, 1 s, 2 s … up to 2 min', async () => {
    const r = rig();
    const plugin = r.socket('mute.sock', 'hang');
    await r.until('the first GetInfo', () => plugin.infoCalls === 1);
    const expected = [500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 120_000, 120_000];
    for (const [i, delay] of expected.entries()) {
      r.clock.advance(999);
      await flush(20);
      assert.equal(r.entry('mute.sock')?.state, 'registering', 'still waiting 1 ms before the timeout');
      r.clock.advance(1);
      await r.until(`failure ${i + 1}`, () => r.entry('mute.sock')?.failures === i + 1);
      const entry = r.entry('mute.sock');
      assert.equal(entry?.state, 'retrying');
      assert.match(entry?.error ?? '', /no answer within 1000 ms/);
      assert.equal(entry?.retryAt, new Date(r.clock.now() + delay).toISOString(), `backoff after failure ${i + 1}`);
      r.clock.advance(delay - 1);
      await r.settle();
      assert.equal(plugin.infoCalls, i + 1, 'not asked again before the backoff is over');
      r.clock.advance(1);
      await r.until(`attempt ${i + 2}`, () => plugin.infoCalls === i + 2);
    }
    assert.equal(r.log.length, 0, 'never handed to the handler');
    assert.ok(plugin.closed >= expected.length, 'each timed-out attempt closed its client');
  });

  it('a socket that goes while backing off is forgotten and its retry timer cancelled', async () => {
    const r = rig();
    const plugin = r.socket('mute.sock', { error: 'connection refused' });
    await r.until('the failure', () => r.entry('mute.sock')?.state === 'retrying');
    r.gone('mute.sock');
    await r.settle();
    assert.equal(r.entry('mute.sock'), undefined);
    assert.equal(r.clock.pendingTimers, 0);
    r.clock.advance(600_000);
    await r.settle();
    assert.equal(plugin.infoCalls, 1);
  });

  it('a replaced socket starts its failures again at zero', async () => {
    const r = rig();
    r.socket('a.sock', { error: 'connection refused' });
    await r.until('failure 1', () => r.entry('a.sock')?.failures === 1);
    r.clock.advance(500);
    await r.until('failure 2', () => r.entry('a.sock')?.failures === 2);
    r.socket('a.sock');
    await r.settle();
    assert.equal(r.entry('a.sock')?.state, 'registered');
    assert.equal(r.entry('a.sock')?.failures, 0);
    assert.equal(r.clock.pendingTimers, 0, 'the old retry timer is cancelled');
  });

  it('a handler that cannot start the plugin is a failed attempt, retried with backoff until it can', async () => {
    const r = rig();
    r.handler.failRegisters = 2;
    const plugin = r.socket('a.sock');
    await r.until('failure 1', () => r.entry('a.sock')?.failures === 1);
    assert.match(r.entry('a.sock')?.error ?? '', /could not start it: the stream would not open/);
    assert.deepEqual(plugin.notified, [], 'a failed attempt is not a refusal: nothing told');
    r.clock.advance(500);
    await r.until('failure 2', () => r.entry('a.sock')?.failures === 2);
    r.clock.advance(1_000);
    await r.until('registered', () => r.entry('a.sock')?.state === 'registered');
    assert.equal(r.entry('a.sock')?.failures, 0);
    assert.deepEqual(plugin.notified, [{ registered: true, error: '' }]);
  });

  it('a NotifyRegistrationStatus that fails undoes the handler’s register and counts as a failed attempt', async () => {
    const r = rig();
    const plugin = r.handshake.serve(
      r.path('a.sock'),
      { value: { type: TYPE, name: 'a', endpoint: '', supportedVersions: ['v1'] } },
      { error: 'stream reset' },
    );
    r.events.push({ kind: 'socket', path: r.path('a.sock'), ino: 1 });
    await r.until('failure 1', () => r.entry('a.sock')?.failures === 1);
    assert.deepEqual(r.log, [`register ${r.path('a.sock')}`, `unregister ${r.path('a.sock')}`]);
    assert.equal(r.handler.registered.size, 0);
    plugin.notify = { value: undefined };
    r.clock.advance(500);
    await r.until('registered', () => r.entry('a.sock')?.state === 'registered');
  });

  it('a NotifyRegistrationStatus that never answers times out at 5 s', async () => {
    const r = rig();
    r.handshake.serve(
      r.path('a.sock'),
      { value: { type: TYPE, name: 'a', endpoint: '', supportedVersions: ['v1'] } },
      'hang',
    );
    r.events.push({ kind: 'socket', path: r.path('a.sock'), ino: 1 });
    await r.until('the register', () => r.log.length === 1);
    r.clock.advance(4_999);
    await flush(20);
    assert.equal(r.entry('a.sock')?.state, 'registering');
    r.clock.advance(1);
    await r.until('failure 1', () => r.entry('a.sock')?.failures === 1);
    assert.match(r.entry('a.sock')?.error ?? '', /NotifyRegistrationStatus.*no answer within 5000 ms/);
    assert.deepEqual(r.log, [`register ${r.path('a.sock')}`, `unregister ${r.path('a.sock')}`]);
  });
});

describe('plugin registry: refusals', () => {
  const cases: ReadonlyArray<{
    readonly why: string;
    readonly info: (r: Rig) => Partial<PluginInfo>;
    readonly reason: RegExp;
    readonly prepare?: (r: Rig) => void;
  }> = [
    {
      why: 'an unknown type',
      info: () => ({ type: 'csi.storage' }),
      reason: /unknown plugin type "csi.storage" \(Warren knows "warren.event-source"\)/,
    },
    {
      why: 'no version in common',
      info: () => ({ supportedVersions: ['v2', 'v3'] }),
      reason: /no version in common.*supports \[v2, v3\], Warren speaks \[v1\]/,
    },
    { why: 'no versions at all', info: () => ({ supportedVersions: [] }), reason: /no version in common/ },
    { why: 'an empty name', info: () => ({ name: '' }), reason: /empty name/ },
    {
      why: 'an endpoint escaping with ..',
      info: () => ({ endpoint: '../outside.sock' }),
      reason: /outside the plugins directory/,
    },
    {
      why: 'an absolute endpoint elsewhere',
      info: () => ({ endpoint: '/run/containerd/containerd.sock' }),
      reason: /outside the plugins directory/,
    },
    {
      why: 'an endpoint that is the plugins directory itself',
      info: (r) => ({ endpoint: r.dir }),
      reason: /outside the plugins directory/,
    },
    {
      why: 'an endpoint in a directory whose name only starts like the plugins directory',
      info: (r) => ({ endpoint: `${r.dir}-evil/x.sock` }),
      reason: /outside the plugins directory/,
    },
    {
      why: 'an endpoint through a symlink that leads out',
      prepare: (r) => {
        const outside = tempDir('warren-registry-outside-');
        symlinkSync(outside, join(r.dir, 'link'));
      },
      info: () => ({ endpoint: 'link/events.sock' }),
      reason: /outside the plugins directory/,
    },
    {
      why: 'an endpoint too long for a unix socket',
      info: () => ({ endpoint: `${'d'.repeat(60)}/${'e'.repeat(60)}.sock` }),
      reason: /longer than 107 bytes/,
    },
    { why: 'the handler’s own check', info: () => ({ name: 'bad name' }), reason: /names may not hold spaces/ },
  ];
  for (const c of cases) {
    it(`${c.why}: refused, told why with NotifyRegistrationStatus(false), not asked again until replaced`, async () => {
      const r = rig();
      r.handler.refuse = (info) => (info.name.includes(' ') ? 'names may not hold spaces' : undefined);
      c.prepare?.(r);
      const plugin = r.socket('p.sock', c.info(r));
      await r.until('the refusal', () => r.entry('p.sock')?.state === 'refused');
      await r.settle();
      const entry = r.entry('p.sock');
      assert.match(entry?.error ?? '', c.reason);
      assert.equal(plugin.notified.length, 1);
      assert.equal(plugin.notified[0]?.registered, false);
      assert.equal(plugin.notified[0]?.error, entry?.error, 'the plugin is told the reason shown in status');
      assert.deepEqual(r.log, [], 'the handler never sees it');
      assert.equal(r.registry.status().refused, 1);
      r.clock.advance(600_000);
      await r.settle();
      assert.equal(plugin.infoCalls, 1, 'a refusal is not retried');
      const again = r.socket('p.sock', {});
      await r.settle();
      assert.equal(again.infoCalls, 1, 'a replaced socket is asked again');
      assert.equal(r.entry('p.sock')?.state, 'registered');
    });
  }

  it('never leaves a refused plugin unanswered: a refusal whose NotifyRegistrationStatus failed is told again after the backoff', async () => {
    const r = rig();
    const plugin = r.handshake.serve(
      r.path('p.sock'),
      { value: { type: 'csi.storage', name: 'p', endpoint: '', supportedVersions: ['v1'] } },
      { error: 'deadline exceeded' },
    );
    r.events.push({ kind: 'socket', path: r.path('p.sock'), ino: 1 });
    await r.until('the first refusal', () => plugin.notified.length === 1);
    await r.settle();
    assert.equal(r.entry('p.sock')?.state, 'refused');
    assert.equal(r.entry('p.sock')?.failures, 1);
    plugin.notify = { value: undefined };
    r.clock.advance(499);
    await r.settle();
    assert.equal(plugin.notified.length, 1, 'not before its backoff is over');
    r.clock.advance(1);
    await r.until('told again', () => plugin.notified.length === 2);
    await r.settle();
    assert.equal(plugin.notified[1]?.registered, false);
    assert.match(plugin.notified[1]?.error ?? '', /unknown plugin type "csi.storage"/);
    r.clock.advance(600_000);
    await r.settle();
    assert.equal(plugin.notified.length, 2, 'once it heard why, it is not asked again until replaced');
    assert.equal(r.entry('p.sock')?.state, 'refused');
  });

  it('a name already registered for the type by another socket: the newcomer is refused, naming the holder', async () => {
    const r = rig();
    r.socket('first.sock', { name: 'podman' });
    await r.settle();
    const second = r.socket('second.sock', { name: 'podman' });
    await r.settle();
    const entry = r.entry('second.sock');
    assert.equal(entry?.state, 'refused');
    assert.match(entry?.error ?? '', new RegExp(`"podman" is registered already, from ${r.path('first.sock')}`));
    assert.deepEqual(second.notified, [{ registered: false, error: entry?.error }]);
    assert.equal(r.entry('first.sock')?.state, 'registered', 'the holder keeps it');
    assert.deepEqual(r.log, [`register ${r.path('first.sock')}`]);
  });

  it('a newcomer refused for a taken name is asked again once the holder goes', async () => {
    const r = rig();
    r.socket('first.sock', { name: 'podman' });
    await r.settle();
    const second = r.socket('second.sock', { name: 'podman' });
    await r.settle();
    r.gone('first.sock');
    await r.settle();
    assert.equal(r.entry('second.sock')?.state, 'registered');
    assert.deepEqual(
      second.notified.map((s) => s.registered),
      [false, true],
    );
    assert.deepEqual(r.log, [
      `register ${r.path('first.sock')}`,
      `unregister ${r.path('first.sock')}`,
      `register ${r.path('second.sock')}`,
    ]);
  });

  it('the same name under two types is two plugins', async () => {
    const r = rig({}, (log) => [new RecordingHandler(log), new RecordingHandler(log, 'example.other')]);
    r.socket('a.sock', { name: 'same' });
    r.socket('b.sock', { name: 'same', type: 'example.other' });
    await r.settle();
    assert.equal(r.registry.status().registered, 2);
  });
});

describe('plugin registry: status and shutdown', () => {
  it('status() lists every known socket with its state, what it said, and the counts', async () => {
    const r = rig();
    assert.equal(r.registry.status().watcher, 'listing');
    r.socket('ok.sock', { name: 'podman', endpoint: 'sub/events.sock' });
    r.socket('bad.sock', { type: 'nope' });
    r.socket('down.sock', { error: 'connection refused' });
    r.events.push({ kind: 'listed' });
    await r.settle();
    const status = r.registry.status();
    const at = new Date(START).toISOString();
    assert.deepEqual(status, {
      dir: r.dir,
      watcher: 'watching',
      registered: 1,
      refused: 1,
      retrying: 1,
      plugins: [
        {
          socket: r.path('bad.sock'),
          state: 'refused',
          type: 'nope',
          name: 'bad.sock',
          since: at,
          error: 'unknown plugin type "nope" (Warren knows "warren.event-source")',
          failures: 0,
        },
        {
          socket: r.path('down.sock'),
          state: 'retrying',
          since: at,
          error: 'connection refused',
          failures: 1,
          retryAt: new Date(START + 500).toISOString(),
        },
        {
          socket: r.path('ok.sock'),
          state: 'registered',
          type: TYPE,
          name: 'podman',
          endpoint: r.path('sub/events.sock'),
          version: 'v1',
          since: at,
          failures: 0,
          detail: { served: 'podman' },
        },
      ],
    });
  });

  it('stopped() unregisters every plugin, after an operation in flight, and nothing registers after', async () => {
    const r = rig();
    r.socket('a.sock');
    r.socket('b.sock');
    await r.settle();
    let open!: () => void;
    r.handler.gate = new Promise((resolve) => (open = resolve));
    r.socket('c.sock');
    await r.until('c to start registering', () => r.log.length === 3);
    r.abort.abort();
    const stopped = r.registry.stopped();
    r.socket('d.sock');
    open();
    await stopped;
    assert.equal(r.handler.registered.size, 0, 'nothing left registered');
    assert.deepEqual(r.log.filter((l) => l.startsWith('register')).length, 3, 'd was never registered');
    assert.deepEqual(
      new Set(r.log.filter((l) => l.startsWith('unregister'))),
      new Set(['a.sock', 'b.sock', 'c.sock'].map((n) => `unregister ${r.path(n)}`)),
    );
    assert.equal(r.clock.pendingTimers, 0);
  });
});
