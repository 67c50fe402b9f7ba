/**
 * The agent's socket serves a bounded number of connections at once (connection-gate.ts): a herd
 * of CNI calls waits unread, first come first served, and is answered late rather than failed; a
 * caller that gives up while served leaves no slot held.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { gateConnections } from '../../../src/agent/server/connection-gate.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A server whose handler holds every response until `release()` answers the oldest. */
async function heldServer(limit: number) {
  const dir = mkdtempSync(join(tmpdir(), 'warren-gate-'));
  const socket = join(dir, 's.sock');
  const held: { id: string; answer: () => void }[] = [];
  const server = createServer((req, res) => {
    held.push({ id: req.url ?? '', answer: () => res.end(req.url) });
  });
  const gate = gateConnections(server, limit);
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return {
    socket,
    gate,
    served: () => held.map((h) => h.id),
    release: () => held.shift()?.answer(),
  };
}

/** One call on its own connection, as the forwarder makes it; resolves with the body. */
function call(socket: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, method: 'POST', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('no more connections than the limit are served at once; the rest wait and are answered in order', async () => {
  const s = await heldServer(2);
  const answers = ['/a', '/b', '/c', '/d'].map((path) => call(s.socket, path));
  await until('two are served and two wait', () => s.served().length === 2 && s.gate().waiting === 2);
  // Given time, a waiting call is still not read: the limit holds.
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(s.served(), ['/a', '/b']);
  assert.deepEqual(s.gate(), { served: 2, waiting: 2 });

  s.release();
  assert.equal(await answers[0], '/a');
  await until('the first waiting call is served', () => s.served().length === 2 && s.gate().waiting === 1);
  assert.deepEqual(s.served(), ['/b', '/c']);

  s.release();
  s.release();
  await until('the last call is served', () => s.served().length === 1);
  s.release();
  assert.deepEqual(await Promise.all(answers), ['/a', '/b', '/c', '/d']);
  await until('every slot is free', () => s.gate().served === 0);
});

test('a caller that gives up while served frees its slot for the next one waiting', async () => {
  const s = await heldServer(1);
  const quitter = connect(s.socket);
  quitter.write('POST /quitter HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n');
  await until('the quitter is served', () => s.served().length === 1);
  const next = call(s.socket, '/next');
  await until('the next call waits', () => s.gate().waiting === 1);
  quitter.destroy();
  await until('the next call is served', () => s.served().includes('/next'));
  assert.deepEqual(s.gate(), { served: 1, waiting: 0 });
  s.release(); // the quitter's response, to a closed connection
  s.release();
  assert.equal(await next, '/next');
});

test('a limit below one is refused', () => {
  assert.throws(() => gateConnections(createServer(), 0), RangeError);
});
