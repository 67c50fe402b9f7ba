/**
 * The event-source client against a real process whose socket accepts and never answers (issue 24,
 * item 18): every stream it opens stalls, is given up on the manual clock and reopened after its
 * backoff, many times; the descriptors of this process (the client's side) stay bounded. Before
 * the fix each given-up stream left its half-made gRPC connection open for good.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { EventSourceClient } from '../../../src/sources/plugins/event-source-client.ts';
import { type MuteSocket, descriptorsSettled, openDescriptors, startMuteSocket } from '../../helpers/mute-socket.ts';
import { HANG_BOUND_MS, removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

const STREAMS = 120;
const HEARTBEAT_MS = 1_000;
const STALL_MS = 3 * HEARTBEAT_MS;
const BACKOFF_MS = 100;

describe('the event-source client against an adapter that accepts and never answers', () => {
  const dir = tempDir('warren-hung-adapter-');
  const abort = new AbortController();
  let mute: MuteSocket | undefined;
  after(() => {
    abort.abort();
    mute?.stop();
    removeDir(dir);
  });

  it('a stalled stream that is reopened never leaks the connection the adapter did not answer', async () => {
    const socket = join(dir, 'events.sock');
    mute = await startMuteSocket(socket);
    const m = mute;
    const clock = new ManualClock(Date.parse('2026-11-26T10:00:00Z'));
    const client = new EventSourceClient({
      endpoint: socket,
      name: 'mute',
      clock,
      backoff: { delay: () => BACKOFF_MS },
      logger: silentLogger,
      heartbeatMs: HEARTBEAT_MS,
    });
    // Iterated, so it connects; nothing ever comes out (the adapter never answers).
    void (async () => {
      for await (const _item of client.events(abort.signal)) assert.fail('a mute adapter yields nothing');
    })();
    let baseline = 0;
    for (let stream = 1; stream <= STREAMS; stream++) {
      await waitFor(
        `stream ${stream} to reach the adapter`,
        () => (m.accepted() >= stream ? true : undefined),
        HANG_BOUND_MS,
      );
      clock.advance(STALL_MS);
      assert.equal(client.state, 'reconnecting', `stream ${stream} given up as stalled`);
      if (stream === 5) baseline = openDescriptors();
      clock.advance(BACKOFF_MS);
    }
    const bound = baseline + 10;
    const open = await descriptorsSettled(bound);
    assert.ok(
      open <= bound,
      `${open} descriptors open after ${STREAMS} streams, ${baseline} after 5: one leaked per stream`,
    );
  });
});
