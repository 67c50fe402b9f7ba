/**
 * The server a runtime adapter uses to serve Warren, over a real socket in a temporary directory,
 * with an in-memory feed, and Warren's own EventSourceClient (and a raw gRPC client for the
 * registration handshake) on the other side. Heartbeats run on a ManualClock.
 */
import assert from 'node:assert/strict';
import { linkSync, lstatSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { type TestContext, describe, it } from 'node:test';
import { Client, Metadata, credentials } from '@grpc/grpc-js';
import {
  EVENT_SOURCE_TYPE,
  METHODS,
  type PluginInfo,
  type RegistrationStatus,
  type RuntimeEvent,
  decodeInfo,
  encodeStatus,
  EMPTY,
} from '../../../src/api/plugins/wire.ts';
import {
  type EventFeed,
  type PluginServer,
  heartbeatInterval,
  servePlugin,
} from '../../../src/cli/adapters/plugin-server.ts';
import { ExponentialBackoff } from '../../../src/core/backoff.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { EventSourceClient, type RuntimeItem } from '../../../src/sources/plugins/event-source-client.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { Puller } from '../../helpers/puller.ts';
import { silentLogger } from '../../helpers/logger.ts';

const PREFIXES = ['/run/netns/netns-'];

/** A runtime in memory: containers that exist, and listeners told of each event. */
class MemoryFeed implements EventFeed {
  readonly containers = new Set<string>();
  readonly listeners = new Set<(event: RuntimeEvent) => void>();
  /** While set, List waits for it. */
  hold: Promise<void> | undefined;
  failList: Error | undefined;

  async list(): Promise<readonly string[]> {
    await this.hold;
    if (this.failList) throw this.failList;
    return [...this.containers];
  }

  subscribe(listener: (event: RuntimeEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: RuntimeEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

interface Setup {
  readonly dir: string;
  readonly feed: MemoryFeed;
  readonly clock: ManualClock;
  readonly server: PluginServer;
  readonly statuses: RegistrationStatus[];
}

async function setup(t: TestContext): Promise<Setup> {
  const dir = tempDir('warren-ps-');
  t.after(() => removeDir(dir));
  const feed = new MemoryFeed();
  const clock = new ManualClock(Date.now());
  const statuses: RegistrationStatus[] = [];
  const server = await servePlugin({
    socket: join(dir, 'podman.sock'),
    name: 'podman',
    netnsPrefixes: PREFIXES,
    feed,
    logger: silentLogger,
    clock,
    onRegistrationStatus: (s) => statuses.push(s),
  });
  t.after(() => server.close());
  return { dir, feed, clock, server, statuses };
}

/** Warren's client on the server's socket, with a pull-with-deadline. */
function watcher(t: TestContext, socket: string, heartbeatMs = 1_000) {
  const client = new EventSourceClient({
    endpoint: socket,
    name: 'podman',
    clock: new ManualClock(Date.now()),
    backoff: new ExponentialBackoff({ initialMs: 100, maxMs: 100 }),
    logger: silentLogger,
    heartbeatMs,
  });
  const abort = new AbortController();
  const items = client.events(abort.signal);
  const puller = new Puller(items, () => `client: ${JSON.stringify(client.status())}`);
  puller.prefetch();
  t.after(async () => {
    abort.abort();
    await items.return(undefined);
  });
  const next = (): Promise<RuntimeItem> => puller.take('the next item');
  return { client, abort, next };
}

function unary(socket: string, path: string, request: Buffer): Promise<Buffer> {
  const client = new Client(`unix://${socket}`, credentials.createInsecure());
  return new Promise<Buffer>((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      request,
      new Metadata(),
      { deadline: Date.now() + 10_000 },
      (error, bytes) => (error || !bytes ? reject(error) : resolve(bytes)),
    );
  }).finally(() => client.close());
}

const event = (id: string, kind: RuntimeEvent['kind'] = 'deleted'): RuntimeEvent => ({
  id,
  kind,
  netns: `/run/netns/netns-${id}`,
  time: 1_700_000_000_000,
});

describe('servePlugin', () => {
  it('answers GetInfo as a warren.event-source v1 plugin on its own socket', async (t) => {
    const { server } = await setup(t);
    const info = decodeInfo(await unary(server.socket, METHODS.getInfo, EMPTY));
    assert.deepEqual(info, {
      type: EVENT_SOURCE_TYPE,
      name: 'podman',
      endpoint: '',
      supportedVersions: ['v1'],
    } satisfies PluginInfo);
  });

  it('passes NotifyRegistrationStatus to onRegistrationStatus and nextRegistration', async (t) => {
    const { server, statuses } = await setup(t);
    const next = server.nextRegistration();
    await unary(
      server.socket,
      METHODS.notifyRegistrationStatus,
      encodeStatus({ registered: false, error: 'name taken' }),
    );
    assert.deepEqual(await next, { registered: false, error: 'name taken' });
    const again = server.nextRegistration();
    await unary(server.socket, METHODS.notifyRegistrationStatus, encodeStatus({ registered: true, error: '' }));
    assert.deepEqual(await again, { registered: true, error: '' });
    assert.deepEqual(statuses, [
      { registered: false, error: 'name taken' },
      { registered: true, error: '' },
    ]);
  });

  it('lists after subscribing, then streams the events in order, an event during List after the listing', async (t) => {
    const { server, feed } = await setup(t);
    feed.containers.add('c1').add('c2');
    let release: () => void = () => undefined;
    feed.hold = new Promise((resolve) => (release = resolve));
    const w = watcher(t, server.socket);
    await waitFor('the watcher to subscribe', () => (feed.listeners.size === 1 ? true : undefined));
    feed.emit(event('during', 'created'));
    await waitFor('the event to reach the client', () => (w.client.status().events === 1 ? true : undefined));
    release();
    const resync = await w.next();
    assert.equal(resync.kind, 'resync');
    if (resync.kind === 'resync') {
      assert.deepEqual(resync.listing, { ids: ['c1', 'c2'], netnsPrefixes: PREFIXES });
      resync.ack();
    }
    assert.deepEqual(await w.next(), { kind: 'event', event: event('during', 'created') });
    const sent = [event('a', 'created'), event('a', 'exited'), event('a', 'deleted'), event('b', 'exited')];
    for (const e of sent) feed.emit(e);
    for (const e of sent) assert.deepEqual(await w.next(), { kind: 'event', event: e });
    assert.equal(w.client.state, 'watching');
  });

  it('sends heartbeats on its clock at the interval asked, clamped to 1 s..60 s', async (t) => {
    const { server, feed, clock } = await setup(t);
    const w = watcher(t, server.socket, 1_000);
    const resync = await w.next();
    if (resync.kind === 'resync') resync.ack();
    assert.equal(feed.listeners.size, 1);
    clock.advance(1_000);
    await waitFor('a heartbeat', () => (w.client.status().heartbeats === 1 ? true : undefined));
    clock.advance(2_000);
    await waitFor('two more', () => (w.client.status().heartbeats === 3 ? true : undefined));
    assert.equal(heartbeatInterval(0), 10_000);
    assert.equal(heartbeatInterval(10), 1_000);
    assert.equal(heartbeatInterval(5_000), 5_000);
    assert.equal(heartbeatInterval(3_600_000), 60_000);
  });

  it('serves two watchers at once, and unsubscribes one that goes away', async (t) => {
    const { server, feed } = await setup(t);
    const one = watcher(t, server.socket);
    const two = watcher(t, server.socket);
    for (const w of [one, two]) {
      const r = await w.next();
      if (r.kind === 'resync') r.ack();
    }
    assert.equal(feed.listeners.size, 2);
    feed.emit(event('x'));
    assert.deepEqual(await one.next(), { kind: 'event', event: event('x') });
    assert.deepEqual(await two.next(), { kind: 'event', event: event('x') });
    one.abort.abort();
    await waitFor('the first watcher to be unsubscribed', () => (feed.listeners.size === 1 ? true : undefined));
    feed.emit(event('y'));
    assert.deepEqual(await two.next(), { kind: 'event', event: event('y') });
  });

  it('does not send an event Warren would refuse, and fails List with the reason when the runtime cannot list', async (t) => {
    const { server, feed } = await setup(t);
    const w = watcher(t, server.socket);
    const r = await w.next();
    if (r.kind === 'resync') r.ack();
    feed.emit({ id: 'has space', kind: 'deleted', time: 1 });
    feed.emit({ id: 'x', kind: 'paused' as RuntimeEvent['kind'], time: 1 });
    feed.emit({ id: 'x', kind: 'deleted', time: 'soon' as unknown as number });
    feed.emit(event('good'));
    assert.deepEqual(await w.next(), { kind: 'event', event: event('good') });
    assert.equal(w.client.status().malformed, 0);

    feed.failList = new Error('podman is down');
    const other = watcher(t, server.socket);
    await waitFor('the refused listing', () =>
      /could not list the runtime: podman is down/.test(other.client.status().lastError ?? '') ? true : undefined,
    );
  });

  it('refuses netns prefixes Warren would refuse, and a path that is not a socket', async (t) => {
    const dir = tempDir('warren-ps-');
    t.after(() => removeDir(dir));
    const feed = new MemoryFeed();
    await assert.rejects(
      servePlugin({ socket: join(dir, 'a.sock'), name: 'a', netnsPrefixes: ['/run'], feed, logger: silentLogger }),
      (e) => isWarrenError(e, 'INVALID_CONFIG') && /fewer than two components/.test(e.message),
    );
    writeFileSync(join(dir, 'file.sock'), 'not a socket');
    await assert.rejects(
      servePlugin({ socket: join(dir, 'file.sock'), name: 'a', netnsPrefixes: PREFIXES, feed, logger: silentLogger }),
      (e) => isWarrenError(e, 'INVALID_CONFIG') && /not a socket/.test(e.message),
    );
    assert.ok(lstatSync(join(dir, 'file.sock')).isFile(), 'left alone');
  });

  it('replaces a stale socket, leaves no temporary file, and close removes its socket', async (t) => {
    const dir = tempDir('warren-ps-');
    t.after(() => removeDir(dir));
    // A stale socket: a second name for a listener's socket, which outlives the listener.
    const listener = createServer();
    await new Promise<void>((resolve) => listener.listen(join(dir, 'old'), resolve));
    linkSync(join(dir, 'old'), join(dir, 'podman.sock'));
    await new Promise<void>((resolve) => listener.close(() => resolve()));
    assert.ok(lstatSync(join(dir, 'podman.sock')).isSocket());
    const server = await servePlugin({
      socket: join(dir, 'podman.sock'),
      name: 'podman',
      netnsPrefixes: PREFIXES,
      feed: new MemoryFeed(),
      logger: silentLogger,
    });
    t.after(() => server.close());
    assert.deepEqual(readdirSync(dir), ['podman.sock'], 'renamed into place: no dot-file left');
    assert.equal(typeof decodeInfo(await unary(server.socket, METHODS.getInfo, EMPTY)), 'object', 'it answers');
    await server.close();
    assert.deepEqual(readdirSync(dir), []);
    await server.close(); // twice is fine
  });

  it("makes the socket's directory when it is missing (the adapter may start before Warren)", async (t) => {
    const dir = tempDir('warren-ps-');
    t.after(() => removeDir(dir));
    const server = await servePlugin({
      socket: join(dir, 'plugins', 'podman.sock'),
      name: 'podman',
      netnsPrefixes: PREFIXES,
      feed: new MemoryFeed(),
      logger: silentLogger,
    });
    t.after(() => server.close());
    assert.ok(lstatSync(join(dir, 'plugins', 'podman.sock')).isSocket());
  });

  it('ends its watchers on close, and leaves a socket that is no longer its own', async (t) => {
    const { dir, server, feed } = await setup(t);
    const w = watcher(t, server.socket);
    const r = await w.next();
    if (r.kind === 'resync') r.ack();
    // A newer adapter took the path: ours is moved aside, theirs put in place.
    const newer = await servePlugin({
      socket: join(dir, 'newer.sock'),
      name: 'podman',
      netnsPrefixes: PREFIXES,
      feed: new MemoryFeed(),
      logger: silentLogger,
    });
    t.after(() => newer.close());
    renameSync(server.socket, join(dir, 'moved.sock'));
    renameSync(newer.socket, server.socket);
    await server.close();
    assert.equal(feed.listeners.size, 0, 'unsubscribed');
    await waitFor('the watcher to see the stream end', () => (w.client.state === 'reconnecting' ? true : undefined));
    assert.ok(lstatSync(server.socket).isSocket(), 'the newer socket is left in place');
  });
});
