/**
 * The registry's two caches: desired state (every report of a socket is a new generation, seen at
 * the injected clock's time; removing an unknown path is a no-op that says so) and actual state.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ActualState } from '../../../src/agent/registry/actual-state.ts';
import { DesiredState } from '../../../src/agent/registry/desired-state.ts';
import type { PluginHandler } from '../../../src/agent/registry/handler.ts';
import { ManualClock } from '../../../src/core/clock.ts';

describe('desired state', () => {
  it('records each socket with its inode and when it was seen, on the injected clock', () => {
    const clock = new ManualClock(1_000);
    const desired = new DesiredState(clock);
    assert.equal(desired.add('/p/a.sock', 7), 'added');
    clock.advance(5);
    assert.equal(desired.add('/p/b.sock', 8), 'added');
    assert.deepEqual(desired.get('/p/a.sock'), { generation: 1, ino: 7, seenAt: 1_000 });
    assert.deepEqual(desired.get('/p/b.sock'), { generation: 2, ino: 8, seenAt: 1_005 });
    assert.deepEqual(desired.paths(), ['/p/a.sock', '/p/b.sock']);
  });

  it('a socket reported again at a known path is a replacement with a new generation, even with the same inode', () => {
    const clock = new ManualClock(0);
    const desired = new DesiredState(clock);
    desired.add('/p/a.sock', 7);
    clock.advance(10);
    assert.equal(desired.add('/p/a.sock', 7), 'replaced');
    assert.deepEqual(desired.get('/p/a.sock'), { generation: 2, ino: 7, seenAt: 10 });
    assert.equal(desired.size, 1);
  });

  it('removing a path that is not a desired socket is a no-op and says so (kubernetes #96827)', () => {
    const desired = new DesiredState(new ManualClock(0));
    desired.add('/p/a.sock', 7);
    assert.equal(desired.remove('/p/not-a-socket'), false);
    assert.equal(desired.remove('/p'), false);
    assert.equal(desired.size, 1);
    assert.equal(desired.remove('/p/a.sock'), true);
    assert.equal(desired.remove('/p/a.sock'), false);
    assert.equal(desired.size, 0);
  });
});

describe('actual state', () => {
  const handler: PluginHandler = {
    type: 't',
    versions: ['v1'],
    register: async () => undefined,
    unregister: async () => undefined,
  };
  const plugin = (socket: string) => ({
    socket,
    generation: 1,
    ino: 7,
    plugin: {
      socket,
      info: { type: 't', name: 'n', endpoint: '', supportedVersions: ['v1'] },
      endpoint: socket,
      version: 'v1',
    },
    handler,
    registeredAt: 0,
  });

  it('holds one plugin per socket; removing an unregistered socket is a no-op', () => {
    const actual = new ActualState();
    actual.add(plugin('/p/a.sock'));
    assert.throws(() => actual.add(plugin('/p/a.sock')), /registered already/);
    assert.equal(actual.remove('/p/b.sock'), undefined);
    assert.equal(actual.remove('/p/a.sock')?.socket, '/p/a.sock');
    assert.equal(actual.size, 0);
  });
});
