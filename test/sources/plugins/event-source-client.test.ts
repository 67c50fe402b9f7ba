/**
 * The `warren.event-source` client against a real gRPC server on a temporary unix socket: a
 * scripted adapter that writes whatever bytes a test wants, answers List when told to, and can
 * stall or restart. Time (stall, List timeout, backoff) moves only with a ManualClock; tests wait
 * on items and conditions with a deadline, never for a while.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { type TestContext, describe, it } from 'node:test';
import { encodeEvent, encodeListing } from '../../../src/api/plugins/event-codec.ts';
import { EVENT_KIND, MESSAGES, type RuntimeEvent } from '../../../src/api/plugins/wire.ts';
import { ExponentialBackoff } from '../../../src/core/backoff.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import {
  EventSourceClient,
  type EventSourceClientOptions,
  type RuntimeItem,
} from '../../../src/sources/plugins/event-source-client.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { Puller } from '../../helpers/puller.ts';
import { LISTING, ScriptedAdapter } from '../../helpers/scripted-adapter.ts';
import { silentLogger } from '../../helpers/logger.ts';

interface Fixture {
  readonly adapter: ScriptedAdapter;
  readonly client: EventSourceClient;
  readonly clock: ManualClock;
  readonly abort: AbortController;
  /** The next item, or a failure after 10 s. */
  next(): Promise<RuntimeItem>;
  /** The next item, which must be a resync. */
  resync(): Promise<Extract<RuntimeItem, { kind: 'resync' }>>;
}

async function fixture(
  t: TestContext,
  options: Partial<EventSourceClientOptions> = {},
  setup?: (a: ScriptedAdapter) => void,
): Promise<Fixture> {
  const dir = tempDir('warren-esc-');
  t.after(() => removeDir(dir));
  const adapter = new ScriptedAdapter(join(dir, 'adapter.sock'));
  setup?.(adapter);
  await adapter.start();
  t.after(() => adapter.stop());
  const clock = new ManualClock(Date.now());
  const client = new EventSourceClient({
    endpoint: adapter.socket,
    name: 'scripted',
    clock,
    backoff: new ExponentialBackoff({ initialMs: 100, maxMs: 100 }),
    logger: silentLogger,
    heartbeatMs: 1_000,
    ...options,
  });
  const abort = new AbortController();
  const items = client.events(abort.signal);
  // A generator starts when first pulled: pull at once, as a consumer does, so the client connects.
  const puller = new Puller(items, () => `client: ${JSON.stringify(client.status())}`);
  puller.prefetch();
  t.after(async () => {
    abort.abort();
    await items.return(undefined);
  });
  const next = (): Promise<RuntimeItem> => puller.take('the next item');
  const resync = async () => {
    const item = await next();
    assert.equal(item.kind, 'resync', JSON.stringify(item));
    return item as Extract<RuntimeItem, { kind: 'resync' }>;
  };
  return { adapter, client, clock, abort, next, resync };
}

const event = (id: string, kind: RuntimeEvent['kind'] = 'deleted'): RuntimeEvent => ({
  id,
  kind,
  netns: `/run/netns/netns-${id}`,
  time: 1_700_000_000_000,
});
const state = (f: Fixture, s: string) => waitFor(`state ${s}`, () => (f.client.state === s ? true : undefined));

describe('EventSourceClient', () => {
  it('asks for its heartbeat, yields the listing first and the events in order, and is watching once the resync is acked', async (t) => {
    let answerList: (() => void) | undefined;
    const f = await fixture(t, {}, (a) => {
      a.answer = () => new Promise((resolve) => (answerList = () => resolve(encodeListing(LISTING))));
    });
    const watch = await f.adapter.watch(1);
    assert.equal(watch.heartbeatMs, 1_000);
    await waitFor('List to be called', () => (f.adapter.lists === 1 ? true : undefined));
    // Events that arrive while List runs wait behind its resync.
    f.adapter.write(encodeEvent(event('a', 'created')));
    f.adapter.write(encodeEvent({ kind: 'heartbeat' }));
    f.adapter.write(encodeEvent(event('b', 'exited')));
    await waitFor('both events to arrive', () => (f.client.status().events === 2 ? true : undefined));
    answerList?.();
    const resync = await f.resync();
    assert.deepEqual(resync.listing, LISTING);
    assert.deepEqual(await f.next(), { kind: 'event', event: event('a', 'created') });
    assert.deepEqual(await f.next(), { kind: 'event', event: event('b', 'exited') });
    assert.equal(f.client.state, 'connecting', 'not watching before the consumer applied the resync');
    resync.ack();
    assert.equal(f.client.state, 'watching');
    f.adapter.write(encodeEvent(event('c')));
    assert.deepEqual(await f.next(), { kind: 'event', event: event('c') });
    const s = f.client.status();
    assert.equal(s.streams, 1);
    assert.equal(s.events, 3);
    assert.equal(s.heartbeats, 1);
    assert.deepEqual(s.lastResync?.containers, 2);
  });

  it('skips garbage, unknown kinds and bad ids while the stream goes on', async (t) => {
    const f = await fixture(t);
    (await f.resync()).ack();
    f.adapter.write(new Uint8Array([0x0a, 0xff, 0xff, 0xff]));
    f.adapter.write(MESSAGES.Event.encode(MESSAGES.Event.create({ id: 'x', kind: 9, time_unix_ms: 1 })).finish());
    f.adapter.write(encodeEvent({ id: 'has space', kind: 'deleted', time: 1 }));
    f.adapter.write(new Uint8Array(0));
    f.adapter.write(encodeEvent(event('ok')));
    assert.deepEqual(await f.next(), { kind: 'event', event: event('ok') });
    const s = f.client.status();
    assert.equal(s.malformed, 4);
    assert.equal(s.lastMalformed, 'kind is unspecified (0)');
    assert.equal(s.state, 'watching');
    assert.equal(f.adapter.watches.length, 1, 'the same stream');
  });

  it('lists only once an adapter that sends no headers has sent its first message', async (t) => {
    const f = await fixture(t, {}, (a) => {
      a.headers = false;
    });
    await f.adapter.watch(1);
    assert.equal(f.adapter.lists, 0);
    f.adapter.write(encodeEvent({ kind: 'heartbeat' }));
    (await f.resync()).ack();
    assert.equal(f.adapter.lists, 1);
    assert.equal(f.client.status().streams, 1);
  });

  it('reopens and resyncs a stream silent for stallAfterMs on the clock; heartbeats keep it open', async (t) => {
    const f = await fixture(t); // heartbeat 1 s: stalled after 3 s
    (await f.resync()).ack();
    f.clock.advance(2_000);
    f.adapter.write(encodeEvent({ kind: 'heartbeat' }));
    await waitFor('the heartbeat', () => (f.client.status().heartbeats === 1 ? true : undefined));
    f.clock.advance(2_000);
    assert.equal(f.client.state, 'watching', 'the heartbeat restarted the stall timer');
    f.clock.advance(1_000);
    assert.equal(f.client.state, 'reconnecting');
    assert.match(f.client.status().lastError ?? '', /no message for 3000 ms/);
    const first = await f.adapter.watch(1);
    await waitFor('the stalled stream to be cancelled', () => (first.cancelled ? true : undefined));
    f.clock.advance(100);
    await f.adapter.watch(2);
    (await f.resync()).ack();
    assert.equal(f.adapter.lists, 2);
    assert.equal(f.client.state, 'watching');
  });

  it('reconnects with backoff after the adapter restarts, and lists again', async (t) => {
    const f = await fixture(t);
    (await f.resync()).ack();
    f.adapter.stop();
    await state(f, 'reconnecting');
    await f.adapter.start();
    // Attempts made while it was down failed and backed off again: step the clock over each backoff
    // until one lands, and only while it backs off. A step while an attempt connects would run its
    // stall timeout (3 s of the clock) down as fast as the machine is slow to connect.
    await waitFor('a new stream', () => {
      if (f.client.state === 'reconnecting') f.clock.advance(100);
      return f.adapter.watches.length >= 2 ? true : undefined;
    });
    (await f.resync()).ack();
    f.adapter.write(encodeEvent(event('after')));
    assert.deepEqual(await f.next(), { kind: 'event', event: event('after') });
    assert.equal(f.client.status().streams, 2);
  });

  it('reopens and lists again when the consumer could not apply a resync', async (t) => {
    const f = await fixture(t);
    (await f.resync()).ack(new Error('store away'));
    assert.equal(f.client.state, 'reconnecting');
    assert.match(f.client.status().lastError ?? '', /store away/);
    f.clock.advance(100);
    const second = await f.resync();
    assert.equal(f.adapter.lists, 2);
    assert.ok(f.adapter.watches[0]?.cancelled || f.adapter.watches.length === 2, 'a new stream');
    second.ack();
    assert.equal(f.client.state, 'watching');
  });

  it('ignores a second ack and an ack of a resync from a stream given up since', async (t) => {
    const f = await fixture(t);
    const first = await f.resync();
    first.ack(new Error('no'));
    first.ack();
    assert.equal(f.client.state, 'reconnecting');
    f.clock.advance(100);
    const second = await f.resync();
    first.ack();
    assert.equal(f.client.state, 'connecting');
    second.ack();
    assert.equal(f.client.state, 'watching');
  });

  it('refuses a listing that does not decode and tries again after a backoff', async (t) => {
    let bad = true;
    const f = await fixture(t, {}, (a) => {
      a.answer = async () => encodeListing({ ids: ['c1'], netnsPrefixes: bad ? ['/'] : ['/run/netns/netns-'] });
    });
    await state(f, 'reconnecting');
    assert.match(f.client.status().lastError ?? '', /netns_prefixes\[0\] "\/" has fewer than two components/);
    bad = false;
    f.clock.advance(100);
    const resync = await f.resync();
    assert.deepEqual(resync.listing.netnsPrefixes, ['/run/netns/netns-']);
  });

  it('gives up on a List that does not answer within listTimeoutMs', async (t) => {
    let hang = true;
    const f = await fixture(t, { heartbeatMs: 10_000, listTimeoutMs: 5_000 }, (a) => {
      a.answer = () => (hang ? new Promise(() => undefined) : Promise.resolve(encodeListing(LISTING)));
    });
    await waitFor('List to be called', () => (f.adapter.lists === 1 ? true : undefined));
    f.clock.advance(4_999);
    assert.equal(f.client.state, 'connecting');
    f.clock.advance(1);
    assert.equal(f.client.state, 'reconnecting');
    assert.match(f.client.status().lastError ?? '', /List did not answer within 5000 ms/);
    hang = false;
    f.clock.advance(100);
    (await f.resync()).ack();
  });

  it('stops when the signal aborts: the items end and the stream is cancelled', async (t) => {
    const f = await fixture(t);
    (await f.resync()).ack();
    const watch = await f.adapter.watch(1);
    const pending = f.next().then(
      () => 'item',
      (error: Error) => error.message,
    );
    f.abort.abort();
    assert.match(await pending, /the iteration ended/);
    assert.equal(f.client.state, 'stopped');
    await waitFor('the stream to be cancelled', () => (watch.cancelled ? true : undefined));
    assert.equal(f.clock.pendingTimers, 0, 'no timer left behind');
  });

  it('reconnects when the adapter ends the stream', async (t) => {
    const f = await fixture(t);
    (await f.resync()).ack();
    (await f.adapter.watch(1)).call.end();
    await state(f, 'reconnecting');
    assert.match(f.client.status().lastError ?? '', /ended the Watch stream/);
    f.clock.advance(100);
    (await f.resync()).ack();
    assert.equal(f.adapter.watches.length, 2);
  });
});

// The enum numbers the scripted adapter writes by hand must be the protocol's.
assert.equal(EVENT_KIND.HEARTBEAT, 4);
