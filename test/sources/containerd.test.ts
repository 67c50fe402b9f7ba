/**
 * The containerd event source against a real containerd, in process: its items (an AsyncIterable)
 * go through the per-container ordered retry queue on an injected clock, a failing container does
 * not hold up another, and malformed events are skipped while the stream keeps going. (The resync
 * grace of the pipeline is in test/agent/release/pipeline.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { ExponentialBackoff } from '../../src/core/backoff.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { OrderedRetryQueue } from '../../src/core/ordered-retry-queue.ts';
import { type ContainerEvent, decodeEvent, encodeAny, encodeMessage } from '../../src/sources/containerd/client.ts';
import { ContainerdEventSource } from '../../src/sources/containerd/event-source.ts';
import { type Containerd, haveContainerd, startContainerd } from '../helpers/containerd.ts';
import { isRoot, waitFor } from '../helpers/processes.ts';
import { silentLogger } from '../helpers/logger.ts';

const NS = `warren-s${process.pid}`;
const skip = !isRoot() || !haveContainerd() ? 'needs root and containerd' : false;

describe('containerd event source', { skip }, () => {
  let containerd: Containerd;
  before(async () => {
    containerd = await startContainerd();
  });
  after(async () => {
    await containerd?.stop([NS]);
  });

  it('queues per container: a failing container backs off and replays in order, others go on; bad events are skipped', async () => {
    const clock = new ManualClock(Date.now());
    const attempts: string[] = [];
    let failX = true;
    const queue = new OrderedRetryQueue<ContainerEvent>({
      clock,
      backoff: new ExponentialBackoff({ initialMs: 1_000 }),
      handle: async (key, event) => {
        const pid = event.kind === 'container-delete' ? 0 : event.pid;
        attempts.push(`${key}:${pid}`);
        if (key === 'x' && failX) {
          failX = false;
          throw new Error('store away');
        }
      },
    });
    const abort = new AbortController();
    const source = new ContainerdEventSource({
      socket: containerd.socket,
      namespaces: [NS],
      clock,
      backoff: new ExponentialBackoff(),
      logger: silentLogger,
    });
    const running = (async () => {
      for await (const item of source.events(abort.signal)) {
        if (item.kind === 'event') queue.push(item.event.containerID, item.event);
        else item.ack();
      }
    })();
    try {
      await source.subscribed();
      const exit = (container: string, pid: number) =>
        containerd.publish(
          NS,
          '/tasks/exit',
          encodeAny(
            'containerd.events.TaskExit',
            encodeMessage('TaskExit', { container_id: container, id: container, pid, exit_status: 1 }),
          ),
        );
      assert.equal((await exit('x', 1)).code, 0);
      await waitFor('x to fail once', () => (attempts.includes('x:1') ? true : undefined));
      assert.equal((await exit('y', 2)).code, 0);
      assert.equal((await exit('x', 3)).code, 0);
      // Malformed: an unknown type, a payload that is not protobuf, an exec's exit (not the task's).
      assert.equal(
        (await containerd.publish(NS, '/tasks/exit', encodeAny('warren.test.Unknown', new Uint8Array([1, 2, 3])))).code,
        0,
      );
      assert.equal(
        (
          await containerd.publish(
            NS,
            '/tasks/exit',
            encodeAny('containerd.events.TaskExit', new Uint8Array([0x0a, 0xff, 0xff, 0xff])),
          )
        ).code,
        0,
      );
      assert.equal(
        (
          await containerd.publish(
            NS,
            '/tasks/exit',
            encodeAny(
              'containerd.events.TaskExit',
              encodeMessage('TaskExit', { container_id: 'y', id: 'exec-1', pid: 9 }),
            ),
          )
        ).code,
        0,
      );
      assert.equal((await exit('y', 4)).code, 0);
      await waitFor('y to be handled while x backs off', () => (attempts.includes('y:4') ? true : undefined));
      assert.deepEqual(attempts, ['x:1', 'y:2', 'y:4'], 'x:3 waits behind the failed x:1; y is not delayed');
      const s = source.status();
      assert.equal(s.malformed, 1);
      assert.equal(s.skipped, 2);
      assert.equal(s.state, 'subscribed', 'the stream keeps going');
      clock.advance(1_000);
      await queue.idle();
      assert.deepEqual(attempts, ['x:1', 'y:2', 'y:4', 'x:1', 'x:3']);
    } finally {
      abort.abort();
      await running;
      queue.stop();
    }
  });
  it('is subscribed only once its resync is acknowledged, and lists again when the consumer could not apply one', async () => {
    const clock = new ManualClock(Date.now());
    const source = new ContainerdEventSource({
      socket: containerd.socket,
      namespaces: [NS],
      clock,
      backoff: new ExponentialBackoff({ initialMs: 1_000 }),
      logger: silentLogger,
    });
    const abort = new AbortController();
    const items = source.events(abort.signal)[Symbol.asyncIterator]();
    try {
      const first = await items.next();
      assert.equal(first.value?.kind, 'resync');
      assert.equal(source.state, 'connecting', 'not subscribed before the consumer has applied the resync');
      if (first.value?.kind === 'resync') first.value.ack(new Error('store away'));
      assert.equal(source.state, 'reconnecting');
      clock.advance(1_000);
      const second = await items.next();
      assert.equal(second.value?.kind, 'resync', 'listed again after the backoff');
      if (second.value?.kind === 'resync') second.value.ack();
      assert.equal(source.state, 'subscribed');
      assert.equal(source.status().subscriptions, 1);
      assert.equal(source.status().lastError, 'store away');
    } finally {
      abort.abort();
      await items.return?.(undefined);
    }
  });
});

describe('decodeEvent', () => {
  it('never throws on garbage and names what it skipped', () => {
    const garbage = [new Uint8Array([0xff]), new Uint8Array([0x0a, 0x05, 0x61]), new Uint8Array(0)];
    for (const value of garbage) {
      for (const typeUrl of [
        'containerd.events.TaskExit',
        'containerd.events.TaskDelete',
        'containerd.events.ContainerDelete',
        '',
        'x',
      ]) {
        const d = decodeEvent({ namespace: 'ns', topic: '/tasks/exit', typeUrl, value });
        assert.ok(d.kind === 'malformed' || d.kind === 'ignored', `${typeUrl}: ${JSON.stringify(d)}`);
      }
    }
    fc.assert(
      fc.property(
        fc.constantFrom(
          'containerd.events.TaskExit',
          'containerd.events.TaskDelete',
          'containerd.events.ContainerDelete',
          'types.containerd.io/containerd.events.TaskExit',
          'other',
        ),
        fc.uint8Array({ maxLength: 64 }),
        (typeUrl, value) => {
          const d = decodeEvent({ namespace: 'ns', topic: '/tasks/exit', typeUrl, value });
          assert.ok(['event', 'ignored', 'malformed'].includes(d.kind));
          if (d.kind === 'event') assert.ok(d.event.containerID.length > 0);
        },
      ),
      { numRuns: 2000 },
    );
    const ok = decodeEvent({
      namespace: 'ns',
      topic: '/containers/delete',
      typeUrl: 'types.containerd.io/containerd.events.ContainerDelete',
      value: encodeMessage('ContainerDelete', { id: 'abc' }),
    });
    assert.deepEqual(ok, { kind: 'event', event: { kind: 'container-delete', namespace: 'ns', containerID: 'abc' } });
  });
});
