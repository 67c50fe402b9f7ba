/**
 * The registration handshake client against real gRPC servers on real unix sockets (the test
 * plugin, in-process): GetInfo and NotifyRegistrationStatus on the wire, the timeouts on the
 * injected clock (a plugin that never answers is cancelled when the manual clock passes the bound,
 * not before), and every failure a WarrenError with its code.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { PluginInfo } from '../../../src/api/plugins/wire.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { RegistrationClient } from '../../../src/sources/plugins/registration-client.ts';
import {
  type PluginRecord,
  type Served,
  type SocketSpec,
  serveRegistration,
} from '../../helpers/registration-plugin.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { flush } from '../../helpers/event-loop.ts';

const INFO: PluginInfo = {
  type: 'warren.event-source',
  name: 'podman',
  endpoint: 'events.sock',
  supportedVersions: ['v1', 'v2'],
};

const dir = tempDir('warren-regclient-');
const records: PluginRecord[] = [];
const specs: SocketSpec[] = [
  { socket: join(dir, 'ok.sock'), info: INFO },
  { socket: join(dir, 'mute.sock'), info: INFO, getInfo: 'mute' },
  { socket: join(dir, 'garbage.sock'), info: INFO, getInfo: 'garbage' },
  { socket: join(dir, 'deaf.sock'), info: INFO, notify: 'mute' },
];
let served: Served | undefined;
const clients: RegistrationClient[] = [];
after(async () => {
  for (const client of clients) client.close();
  await served?.close();
  removeDir(dir);
});

async function serve(): Promise<void> {
  served ??= await serveRegistration(specs, (r) => records.push(r));
}

function client(name: string, clock = new ManualClock(0)): RegistrationClient {
  const c = new RegistrationClient(join(dir, name), { clock });
  clients.push(c);
  return c;
}

/** Settles `promise` into a value to assert on, without an unhandled rejection. */
function outcome<T>(promise: Promise<T>): {
  readonly done: () => boolean;
  readonly result: Promise<{ value?: T; error?: unknown }>;
} {
  let done = false;
  const result = promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  void result.then(() => (done = true));
  return { done: () => done, result };
}

const count = (event: PluginRecord['event'], socket: string): number =>
  records.filter((r) => r.event === event && 'socket' in r && r.socket === join(dir, socket)).length;

describe('registration client', () => {
  it('reads the PluginInfo the plugin sends', async () => {
    await serve();
    assert.deepEqual(await client('ok.sock').getInfo(), INFO);
  });

  it('delivers NotifyRegistrationStatus, registered or refused with the reason', async () => {
    await serve();
    const c = client('ok.sock');
    await c.notify({ registered: true, error: '' });
    await c.notify({ registered: false, error: 'no version in common' });
    const got = records
      .filter((r) => r.event === 'notify')
      .map((r) => (r.event === 'notify' ? [r.registered, r.error] : []));
    assert.deepEqual(got, [
      [true, ''],
      [false, 'no version in common'],
    ]);
  });

  it('a plugin that never answers GetInfo is cancelled at 1 s on the injected clock, as TRY_AGAIN', async () => {
    await serve();
    const clock = new ManualClock(0);
    const call = outcome(client('mute.sock', clock).getInfo());
    await waitFor('GetInfo to reach the plugin', () => (count('get-info', 'mute.sock') === 1 ? true : undefined));
    clock.advance(999);
    // A timer fired early would have settled the call by the end of this turn.
    await flush();
    assert.equal(call.done(), false, 'still waiting at 999 ms');
    clock.advance(1);
    const { error } = await call.result;
    assert.ok(isWarrenError(error, 'TRY_AGAIN'), String(error));
    assert.match(error.message, /GetInfo on .*mute\.sock: no answer within 1000 ms/);
    await waitFor('the plugin to see the call cancelled', () =>
      count('cancelled', 'mute.sock') === 1 ? true : undefined,
    );
  });

  it('a NotifyRegistrationStatus that is never answered times out at 5 s on the clock', async () => {
    await serve();
    const clock = new ManualClock(0);
    const call = outcome(client('deaf.sock', clock).notify({ registered: true, error: '' }));
    await waitFor('the notify to reach the plugin', () => (count('notify', 'deaf.sock') === 1 ? true : undefined));
    clock.advance(4_999);
    // A timer fired early would have settled the call by the end of this turn.
    await flush();
    assert.equal(call.done(), false);
    clock.advance(1);
    const { error } = await call.result;
    assert.ok(isWarrenError(error, 'TRY_AGAIN'), String(error));
    assert.match(error.message, /no answer within 5000 ms/);
  });

  it('timeouts are options', async () => {
    await serve();
    const clock = new ManualClock(0);
    const c = new RegistrationClient(join(dir, 'mute.sock'), { clock, infoTimeoutMs: 50 });
    clients.push(c);
    const call = outcome(c.getInfo());
    const before = count('get-info', 'mute.sock');
    await waitFor('GetInfo to reach the plugin', () => (count('get-info', 'mute.sock') > before ? true : undefined));
    clock.advance(50);
    assert.match(String((await call.result).error), /no answer within 50 ms/);
  });

  it('an answer that is no PluginInfo is IO_FAILURE saying it does not decode', async () => {
    await serve();
    const { error } = await outcome(client('garbage.sock').getInfo()).result;
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /PluginInfo does not decode/);
  });

  it('no socket, or a file that is no socket, is IO_FAILURE without waiting for the clock', async () => {
    writeFileSync(join(dir, 'plain-file'), 'not a socket');
    for (const name of ['missing.sock', 'plain-file']) {
      const { error } = await outcome(client(name).getInfo()).result;
      assert.ok(isWarrenError(error, 'IO_FAILURE'), `${name}: ${String(error)}`);
    }
  });

  it('close() cancels a call in flight, and later calls fail at once', async () => {
    await serve();
    const c = client('mute.sock');
    const before = count('get-info', 'mute.sock');
    const call = outcome(c.getInfo());
    await waitFor('GetInfo to reach the plugin', () => (count('get-info', 'mute.sock') > before ? true : undefined));
    c.close();
    const { error } = await call.result;
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /cancelled/);
    assert.match(String((await outcome(c.getInfo()).result).error), /closed/);
    c.close();
  });
});
