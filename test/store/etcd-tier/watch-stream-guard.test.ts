/**
 * The guard on etcd3's shared watch stream (src/store/etcd-tier/watch-stream-guard.ts): an answer the
 * client's WatchManager cannot place (an event for a watch id no watcher holds, a creation answer with
 * no watcher waiting) breaks the stream, as a stream error does, instead of throwing out of the
 * stream's `data` handler, where nothing catches it and the agent ends. The manager is driven
 * through a stream that stands in for etcd's (the answers etcd sent, in the order that broke it);
 * the guarded etcd client against a real etcd is exercised by every etcd tier test.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { guardWatchStreams } from '../../../src/store/etcd-tier/watch-stream-guard.ts';

/** A gRPC watch stream as the manager uses it: it writes requests, listens for answers, cancels. */
class Stream extends EventEmitter {
  readonly written: unknown[] = [];
  cancelled = 0;
  write(request: unknown): void {
    this.written.push(request);
  }
  cancel(): void {
    this.cancelled += 1;
  }
}

/** A backoff of no wait: the manager makes its stream again on the next timer turn. */
const noWait = { next: () => ({ duration: 0, next: () => undefined }) };

async function connected() {
  const { WatchManager } = await import('etcd3/lib/watch.js');
  const streams: Stream[] = [];
  const made = new EventEmitter();
  const client = {
    watch: () => {
      const s = new Stream();
      streams.push(s);
      made.emit('stream');
      return Promise.resolve(s);
    },
  };
  // biome-ignore lint/suspicious/noExplicitAny: the manager's client and backoff are etcd3's internal types
  const manager = new WatchManager(client as any, noWait as any);
  const watcher = Object.assign(new EventEmitter(), { id: null as string | null, request: { key: Buffer.from('k') } });
  // biome-ignore lint/suspicious/noExplicitAny: a watcher as the manager reads one (id, request, events)
  manager.attach(watcher as any);
  await new Promise((resolve) => setImmediate(resolve)); // the stream made, the creation asked
  const [stream] = streams;
  assert.ok(stream !== undefined && stream.written.length === 1, 'the creation of the watch asked');
  stream.emit('data', { created: true, watch_id: '1', canceled: false, events: [] });
  assert.equal(watcher.id, '1');
  return { stream, streams, watcher, made };
}

describe("etcd3's watch stream, guarded", () => {
  it('does not end the agent on an event for a watch id no watcher holds: the stream is made again', async () => {
    await guardWatchStreams();
    const { stream, streams, watcher, made } = await connected();
    const disconnected = new Promise((resolve) => watcher.once('disconnected', resolve));
    const again = new Promise((resolve) => made.once('stream', resolve));
    assert.doesNotThrow(() => stream.emit('data', { created: false, watch_id: '7', canceled: false, events: [] }));
    assert.match(String(((await disconnected) as Error).message), /cannot place .*Failed to find watcher/);
    assert.equal(stream.cancelled, 1, 'the broken stream is cancelled');
    assert.equal(watcher.id, null);
    await again;
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(streams.length, 2, 'a new stream');
    assert.equal(streams[1]?.written.length, 1, 'the watcher attached again');
  });

  it('does not end the agent on a cancelled creation answer with no watcher waiting for one', async () => {
    await guardWatchStreams();
    const { stream, watcher } = await connected();
    const disconnected = new Promise((resolve) => watcher.once('disconnected', resolve));
    assert.doesNotThrow(() => stream.emit('data', { created: true, canceled: true, watch_id: '-1', events: [] }));
    await disconnected;
  });
});
