/**
 * The plugin registry against a real process whose socket accepts and never answers (issue 24,
 * item 18): the registry retries it many times — its GetInfo timeout and its backoff stepped on a
 * manual clock — and the descriptors of this process (the registry's side) stay bounded. Before the
 * fix every attempt left its half-made gRPC connection open for good.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PluginRegistry } from '../../../src/agent/registry/registry.ts';
import type { PluginHandler } from '../../../src/agent/registry/handler.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { type MuteSocket, descriptorsSettled, openDescriptors, startMuteSocket } from '../../helpers/mute-socket.ts';
import { HANG_BOUND_MS, removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

const ATTEMPTS = 150;
const INFO_TIMEOUT_MS = 1_000;
const BACKOFF_MS = 500;

const handler: PluginHandler = {
  type: 'warren.event-source',
  versions: ['v1'],
  validate: () => undefined,
  register: async () => undefined,
  unregister: async () => undefined,
  describe: () => ({}),
};

describe('the plugin registry against a plugin that accepts and never answers', () => {
  const dir = tempDir('warren-hung-plugin-');
  const abort = new AbortController();
  let plugin: MuteSocket | undefined;
  let registry: PluginRegistry | undefined;
  after(async () => {
    abort.abort();
    await registry?.stopped();
    plugin?.stop();
    removeDir(dir);
  });

  it('a retried registration never leaks the connection of an attempt the plugin did not answer', async () => {
    const socket = join(dir, 'mute.sock');
    plugin = await startMuteSocket(socket);
    const p = plugin;
    const clock = new ManualClock(Date.parse('2026-11-26T10:00:00Z'));
    registry = new PluginRegistry({
      dir,
      handlers: [handler],
      logger: silentLogger,
      clock,
      infoTimeoutMs: INFO_TIMEOUT_MS,
      // A constant backoff: many attempts in few clock steps.
      backoff: { delay: () => BACKOFF_MS },
    });
    const r = registry;
    r.start(abort.signal);
    const entry = () => r.status().plugins.find((e) => e.socket === socket);
    let baseline = 0;
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      await waitFor(
        `attempt ${attempt} to reach the plugin`,
        () => (p.accepted() >= attempt ? true : undefined),
        HANG_BOUND_MS,
      );
      clock.advance(INFO_TIMEOUT_MS);
      await waitFor(
        `attempt ${attempt} to fail`,
        () => ((entry()?.failures ?? 0) >= attempt && entry()?.state === 'retrying' ? true : undefined),
        HANG_BOUND_MS,
      );
      // After a few attempts everything lazily opened once (gRPC's, the watcher's) is open.
      if (attempt === 5) baseline = openDescriptors();
      clock.advance(BACKOFF_MS);
    }
    const bound = baseline + 10;
    const open = await descriptorsSettled(bound);
    assert.ok(
      open <= bound,
      `${open} descriptors open after ${ATTEMPTS} attempts, ${baseline} after 5: one leaked per attempt`,
    );
  });
});
