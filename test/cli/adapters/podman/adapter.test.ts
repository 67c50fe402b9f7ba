/**
 * `runPodmanAdapter` with Debian's podman 4.3: it creates a missing plugins directory, serves a
 * socket there that answers GetInfo as the `warren.event-source` plugin named `podman`, lists the
 * containers podman has with podman's netns prefix, streams their lifecycle, and on abort removes
 * the socket and stops following podman. A socket path it must not replace fails the run, with
 * nothing left running. Waits are polls with deadlines.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Client, credentials } from '@grpc/grpc-js';
import { decodeEvent, decodeListing } from '../../../../src/api/plugins/event-codec.ts';
import { EMPTY, METHODS, MESSAGES, type RuntimeEvent, encode } from '../../../../src/api/plugins/wire.ts';
import { ManualClock, systemClock } from '../../../../src/core/clock.ts';
import { isWarrenError } from '../../../../src/core/errors.ts';
import {
  DEFAULT_PODMAN_NETNS_PREFIXES,
  DEFAULT_PODMAN_SOCKET_NAME,
  runPodmanAdapter,
} from '../../../../src/cli/adapters/podman/adapter.ts';
import { RegistrationClient } from '../../../../src/sources/plugins/registration-client.ts';
import { BUSYBOX_IMAGE, startPodman } from '../../../helpers/podman.ts';
import { tempDir, waitFor } from '../../../helpers/processes.ts';
import { silentLogger } from '../../../helpers/logger.ts';

const raw = (b: Buffer): Buffer => b;

function listOver(client: Client): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(METHODS.list, raw, raw, EMPTY, (error, value) =>
      error ? reject(error) : resolve(value ?? EMPTY),
    );
  });
}

describe('the podman adapter', () => {
  it('serves the podman event source in a plugins dir it creates, and goes away on abort', async (t) => {
    const podman = await startPodman();
    const pluginsDir = join(tempDir('warren-podman-plugins-'), 'run', 'warren', 'plugins');
    const stop = new AbortController();
    const clients: Client[] = [];
    t.after(async () => {
      for (const c of clients) c.close();
      stop.abort();
      await running.catch(() => undefined);
      await podman.close();
    });
    const running = runPodmanAdapter({
      pluginsDir,
      podman: podman.bin,
      env: podman.env,
      logger: silentLogger,
      clock: systemClock,
      signal: stop.signal,
    });
    const socket = join(pluginsDir, DEFAULT_PODMAN_SOCKET_NAME);
    await waitFor(`the socket ${socket}`, () => (existsSync(socket) && statSync(socket).isSocket() ? true : undefined));

    const registration = new RegistrationClient(socket);
    try {
      assert.deepEqual(await registration.getInfo(), {
        type: 'warren.event-source',
        name: 'podman',
        endpoint: '',
        supportedVersions: ['v1'],
      });
    } finally {
      registration.close();
    }

    const client = new Client(`unix://${socket}`, credentials.createInsecure());
    clients.push(client);
    const got: RuntimeEvent[] = [];
    const stream = client.makeServerStreamRequest(
      METHODS.watch,
      raw,
      raw,
      encode(MESSAGES.WatchRequest, { heartbeat_interval_ms: 1_000 }),
    );
    stream.on('data', (bytes: Buffer) => {
      const decoded = decodeEvent(bytes);
      if (decoded.kind === 'event') got.push(decoded.event);
    });
    stream.on('error', () => undefined); // cancelled at the end
    await new Promise((resolve) => stream.once('metadata', resolve));

    const id = await podman.ok(['create', '--network', 'none', BUSYBOX_IMAGE, 'true']);
    await waitFor('created on the stream', () => got.find((e) => e.id === id && e.kind === 'created'));
    assert.deepEqual(decodeListing(await listOver(client)), {
      ids: [id],
      netnsPrefixes: [...DEFAULT_PODMAN_NETNS_PREFIXES],
    });
    await podman.ok(['rm', id]);
    await waitFor('deleted on the stream', () => got.find((e) => e.id === id && e.kind === 'deleted'));
    stream.cancel();

    stop.abort();
    await running;
    assert.equal(existsSync(socket), false, 'the socket is gone');
  });

  it('fails when its socket path holds something that is not a socket, and leaves nothing running', async () => {
    const pluginsDir = tempDir('warren-podman-plugins-');
    mkdirSync(pluginsDir, { recursive: true });
    writeFileSync(join(pluginsDir, 'not-a-socket'), 'keep me');
    const stop = new AbortController();
    const clock = new ManualClock(Date.now());
    // No podman is needed to fail: the follower runs a binary that is not there and is stopped.
    await assert.rejects(
      runPodmanAdapter({
        pluginsDir,
        socketName: 'not-a-socket',
        podman: join(pluginsDir, 'no-podman'),
        logger: silentLogger,
        clock,
        signal: stop.signal,
      }),
      (e: unknown) => isWarrenError(e, 'INVALID_CONFIG'),
    );
    assert.ok(existsSync(join(pluginsDir, 'not-a-socket')), 'what was there is kept');
    assert.equal(clock.pendingTimers, 0, 'no restart of the follower is pending');
  });

  it('returns at once when aborted before it starts', async () => {
    const pluginsDir = join(tempDir('warren-podman-plugins-'), 'never');
    await runPodmanAdapter({ pluginsDir, logger: silentLogger, clock: systemClock, signal: AbortSignal.abort() });
    assert.equal(existsSync(pluginsDir), false);
  });
});
