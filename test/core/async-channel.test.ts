/**
 * AsyncChannel: what producers push comes out to the one consumer in order, each once, including
 * what was buffered before close; pushes after close are ignored; a second consumer is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AsyncChannel } from '../../src/core/async-channel.ts';
import { flush } from '../helpers/event-loop.ts';

describe('AsyncChannel', () => {
  it('hands items over in order, waits for more, ends after close with nothing lost', async () => {
    const channel = new AsyncChannel<number | undefined>();
    channel.push(1);
    channel.push(undefined);
    const seen: Array<number | undefined> = [];
    const consuming = (async () => {
      for await (const item of channel) seen.push(item);
    })();
    await flush();
    assert.deepEqual(seen, [1, undefined]);
    channel.push(3);
    channel.push(4);
    channel.close();
    channel.push(5);
    await consuming;
    assert.deepEqual(seen, [1, undefined, 3, 4]);
    assert.equal(channel.closed, true);
  });

  it('has one consumer', async () => {
    const channel = new AsyncChannel<number>();
    const first = channel[Symbol.asyncIterator]();
    void first.next();
    await assert.rejects(channel[Symbol.asyncIterator]().next(), /iterated once/);
    channel.close();
  });
});
