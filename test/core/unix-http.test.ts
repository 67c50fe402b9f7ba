/**
 * The hand-written HTTP client of unix-http.ts against a tiny node:net server in the same process
 * that answers byte for byte what each test scripts: heads split across many writes, answers past
 * the limits, malformed heads, bodies ended by the connection closing. Every failure is a rejected
 * promise with a code that says whether the peer was unreachable (the caller's code) or answered
 * nonsense, and a message that starts with the caller's name for the peer.
 */
import assert from 'node:assert/strict';
import { type Server, type Socket, createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isWarrenError } from '../../src/core/errors.ts';
import { MAX_HEAD_BYTES, type Peer, parseResponseHead, requestJson } from '../../src/core/unix-http.ts';
import { agentPeer } from '../../src/api/cni-call.ts';
import { tempDir } from '../helpers/processes.ts';
import { flush } from '../helpers/event-loop.ts';

/** The peer as the API's clients name the agent (api/cni-call.ts), so codes and messages are theirs. */
const agent = (socket: string): Peer => ({ label: `Warren agent at ${socket}`, unreachableCode: 'AGENT_UNREACHABLE' });

interface Received {
  readonly head: string;
  readonly body: string;
}

/**
 * A server that reads one request (head, then Content-Length bytes of body) and hands it with the
 * connection to `answer`. Resolves with the server and its socket path once it listens.
 */
async function scripted(
  answer: (socket: Socket, request: Received) => Promise<void> | void,
): Promise<{ server: Server; socket: string; requests: Received[] }> {
  const path = join(tempDir('warren-http-'), 's.sock');
  const requests: Received[] = [];
  const server = createServer((socket) => {
    let buffer = Buffer.alloc(0);
    let done = false;
    socket.on('error', () => undefined); // the client may hang up first; that is what some tests check
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString('latin1');
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < end + 4 + length) return;
      done = true;
      const request = { head, body: buffer.subarray(end + 4, end + 4 + length).toString('utf8') };
      requests.push(request);
      void answer(socket, request);
    });
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  servers.push(server);
  return { server, socket: path, requests };
}

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** Writes each piece as its own write, each flushed before the next. */
async function writeInPieces(socket: Socket, pieces: ReadonlyArray<string | Buffer>): Promise<void> {
  for (const piece of pieces) {
    await new Promise<void>((resolve) => socket.write(piece, () => resolve()));
    await flush();
  }
}

function response(
  status: string,
  body: string,
  headers: string[] = [`Content-Length: ${Buffer.byteLength(body)}`],
): string {
  return `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${body}`;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  assert.fail('expected the call to fail');
}

describe('parseResponseHead', () => {
  it('needs the whole head: every proper prefix of a head is "more bytes needed", never an error', () => {
    const text = response('200 OK', '{"a":1}');
    const whole = Buffer.from(text);
    const headEnd = text.indexOf('\r\n\r\n') + 4;
    for (let n = 0; n < headEnd; n++)
      assert.equal(parseResponseHead(whole.subarray(0, n)), undefined, `prefix of ${n} bytes`);
    assert.deepEqual(parseResponseHead(whole), { status: 200, length: 7, bodyStart: headEnd });
  });

  it('reads Content-Length in any letter case and without it leaves the length open', () => {
    assert.equal(parseResponseHead(Buffer.from('HTTP/1.1 404 Not Found\r\ncOnTeNt-LeNgTh:  12 \r\n\r\n'))?.length, 12);
    assert.equal(parseResponseHead(Buffer.from('HTTP/1.0 200 OK\r\n\r\n'))?.length, undefined);
  });

  it('refuses a malformed status line or Content-Length', () => {
    assert.throws(() => parseResponseHead(Buffer.from('SMTP ready\r\n\r\n')), /malformed status line "SMTP ready"/);
    assert.throws(
      () => parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n')),
      /malformed Content-Length "-3"/,
    );
    assert.throws(
      () => parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n')),
      /malformed Content-Length/,
    );
  });
});

describe('requestJson', () => {
  it('sends method, path, Content-Length and the JSON body, and reads the JSON answer', async () => {
    const { socket, requests } = await scripted((s) => void s.end(response('200 OK', '{"ok":true}')));
    const body = { address: '10.0.0.1', note: 'é' };
    const answer = await requestJson({ socket, peer: agent(socket), method: 'POST', path: '/v1/release', body });
    assert.deepEqual(answer, { status: 200, body: { ok: true } });
    const [request] = requests;
    assert.match(request?.head ?? '', /^POST \/v1\/release HTTP\/1\.1\r\n/);
    const bytes = Buffer.byteLength(JSON.stringify(body));
    assert.notEqual(bytes, JSON.stringify(body).length);
    assert.match(request?.head ?? '', new RegExp(`\r\nContent-Length: ${bytes}(\r\n|$)`), 'bytes, not characters');
    assert.deepEqual(JSON.parse(request?.body ?? ''), { address: '10.0.0.1', note: 'é' });
  });

  it('sends the Host its caller names (the API client: warren), and localhost when it names none', async () => {
    const { socket, requests } = await scripted((s) => void s.end(response('200 OK', '{}')));
    await requestJson({ socket, peer: agentPeer(socket), method: 'GET', path: '/v1/status' });
    await requestJson({ socket, peer: { ...agent(socket), host: 'registry.example' }, method: 'GET', path: '/' });
    await requestJson({ socket, method: 'GET', path: '/' });
    assert.deepEqual(
      requests.map((r) => /\r\nHost: ([^\r]*)\r\n/.exec(r.head)?.[1]),
      ['warren', 'registry.example', 'localhost'],
    );
  });

  it('sends bodyText as it is', async () => {
    const { socket, requests } = await scripted((s) => void s.end(response('200 OK', '{}')));
    await requestJson({
      socket,
      peer: agent(socket),
      method: 'POST',
      path: '/v1/cni',
      bodyText: '{"command":"ADD","config":{"name":"x"}}',
    });
    assert.equal(requests[0]?.body, '{"command":"ADD","config":{"name":"x"}}');
  });

  it('reads an answer whose head arrives a byte at a time and whose body arrives in pieces', async () => {
    const body = JSON.stringify({ items: Array.from({ length: 50 }, (_, i) => `item-${i}`) });
    const text = response('200 OK', body);
    const headEnd = text.indexOf('\r\n\r\n') + 4;
    const pieces = [...text.slice(0, headEnd)].concat(text.slice(headEnd).match(/.{1,7}/gs) ?? []);
    const { socket } = await scripted((s) => writeInPieces(s, pieces));
    const answer = await requestJson({ socket, peer: agent(socket), method: 'GET', path: '/v1/pools' });
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, JSON.parse(body));
  });

  it('reads a non-200 answer as an answer, not a failure: what it means is the caller’s to say', async () => {
    const { socket } = await scripted(
      (s) => void s.end(response('400 Bad Request', '{"error":{"code":"BAD_REQUEST","message":"no"}}')),
    );
    assert.deepEqual(await requestJson({ socket, peer: agent(socket), method: 'GET', path: '/x' }), {
      status: 400,
      body: { error: { code: 'BAD_REQUEST', message: 'no' } },
    });
  });

  it('reads a body without Content-Length up to the connection closing', async () => {
    const { socket } = await scripted((s) =>
      writeInPieces(s, ['HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n', '{"closed":', 'true}']).then(
        () => void s.end(),
      ),
    );
    assert.deepEqual(await requestJson({ socket, peer: agent(socket), method: 'GET', path: '/v1/status' }), {
      status: 200,
      body: { closed: true },
    });
  });

  it('an empty body is undefined', async () => {
    const { socket } = await scripted((s) => void s.end('HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n'));
    assert.deepEqual(await requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }), {
      status: 204,
      body: undefined,
    });
  });

  it('calls an answer cut short of its Content-Length "broke off", AGENT_UNREACHABLE', async () => {
    const { socket } = await scripted((s) => void s.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half":'));
    const error = await rejection(requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }));
    assert.ok(isWarrenError(error, 'AGENT_UNREACHABLE'), String(error));
    assert.match(error.message, /broke off its answer/);
  });

  it('refuses a malformed status line as IO_FAILURE, naming it', async () => {
    const { socket } = await scripted((s) => void s.end('HTTP/2 200\r\n\r\n{}'));
    const error = await rejection(requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }));
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /answered malformed HTTP: malformed status line "HTTP\/2 200"/);
  });

  it('refuses an answer that is not JSON as IO_FAILURE', async () => {
    const { socket } = await scripted((s) => void s.end(response('200 OK', '<html>')));
    const error = await rejection(requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }));
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /invalid JSON/);
  });

  it('refuses a head that never ends once it passes MAX_HEAD_BYTES, and hangs up instead of holding more', async () => {
    let closed!: Promise<void>;
    const { socket } = await scripted(async (s) => {
      closed = new Promise((resolve) => s.once('close', () => resolve()));
      const line = `X-Filler: ${'f'.repeat(1000)}\r\n`;
      await writeInPieces(s, [
        'HTTP/1.1 200 OK\r\n',
        ...Array.from({ length: Math.ceil(MAX_HEAD_BYTES / line.length) + 1 }, () => line),
      ]);
    });
    const error = await rejection(requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }));
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, new RegExp(`HTTP head larger than ${MAX_HEAD_BYTES} bytes`));
    await closed;
  });

  it('refuses an answer whose Content-Length is past the limit before reading its body', async () => {
    const { socket } = await scripted((s) => void s.write('HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n'));
    const error = await rejection(
      requestJson({ socket, peer: agent(socket), method: 'GET', path: '/', maxResponseBytes: 1000 }),
    );
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /announced an answer of 5000 bytes, more than 1000/);
  });

  it('refuses an answer without Content-Length once it streams past the limit', async () => {
    const { socket } = await scripted((s) =>
      writeInPieces(s, ['HTTP/1.1 200 OK\r\n\r\n[', ...Array.from({ length: 20 }, () => `${'1,'.repeat(50)}`)]),
    );
    const error = await rejection(
      requestJson({ socket, peer: agent(socket), method: 'GET', path: '/', maxResponseBytes: 1000 }),
    );
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /answered more than 1000 bytes/);
  });

  it('calls a socket nobody listens on AGENT_UNREACHABLE, naming the path and the errno', async () => {
    const socket = join(tempDir(), 'nobody.sock');
    const error = await rejection(requestJson({ socket, peer: agent(socket), method: 'GET', path: '/' }));
    assert.ok(isWarrenError(error, 'AGENT_UNREACHABLE'), String(error));
    assert.equal(error.message, `Warren agent at ${socket} is not reachable (ENOENT)`);
  });

  it('gives up on an agent that does not answer within the timeout', async () => {
    const { socket } = await scripted(() => undefined);
    const error = await rejection(
      requestJson({ socket, peer: agent(socket), method: 'GET', path: '/', timeoutMs: 30 }),
    );
    assert.ok(isWarrenError(error, 'AGENT_UNREACHABLE'), String(error));
    assert.match(error.message, /did not answer within 30 ms/);
  });

  it('rejects a body that cannot be written as JSON instead of throwing', async () => {
    const call = requestJson({
      socket: '/nonexistent',
      peer: agent('/nonexistent'),
      method: 'POST',
      path: '/',
      body: { n: 1n },
    });
    const error = await rejection(call);
    assert.ok(isWarrenError(error, 'IO_FAILURE'), String(error));
    assert.match(error.message, /cannot be written as JSON/);
    assert.match(error.message, /^request to Warren agent at \/nonexistent cannot be written as JSON: /);
  });

  it('names the peer as its caller does, and without a name calls it "peer at <socket>", unreachable as IO_FAILURE', async () => {
    const socket = join(tempDir(), 'nobody.sock');
    const named = await rejection(
      requestJson({
        socket,
        peer: { label: 'the registry on /x', unreachableCode: 'REGISTRY_DOWN' },
        method: 'GET',
        path: '/',
      }),
    );
    assert.ok(isWarrenError(named, 'REGISTRY_DOWN'), String(named));
    assert.equal(named.message, 'the registry on /x is not reachable (ENOENT)');
    const unnamed = await rejection(requestJson({ socket, method: 'GET', path: '/' }));
    assert.ok(isWarrenError(unnamed, 'IO_FAILURE'), String(unnamed));
    assert.equal(unnamed.message, `peer at ${socket} is not reachable (ENOENT)`);
  });
});
