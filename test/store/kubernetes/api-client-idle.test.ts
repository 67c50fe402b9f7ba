/**
 * The cluster tier's HTTP layer (src/store/kubernetes/api-client.ts) against a server that closes
 * kept-alive connections: a request sent on a reused connection the server closed before reading
 * it is sent again once, on a new connection made for it (never another kept one, which the server
 * may have closed alike), so an ADD does not fail with "socket hang up"; a failure on a fresh
 * connection is not sent again (the server may have handled it).
 *
 * The server speaks HTTP/1.1 by hand on a TCP socket, so each connection's fate is decided, not
 * left to a timer: it answers the first request of a connection and keeps the connection open,
 * then ends the connection on the next request without reading or answering it (what a server
 * whose idle timeout fires as the request arrives does).
 */
import assert from 'node:assert/strict';
import { type Server, type Socket, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { isWarrenError } from '../../../src/core/errors.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';

/** How the server treats each request: by the connection's request count. */
type Policy = 'answer-first-only' | 'close-every';

describe('KubeApiClient on connections the server closed while idle', () => {
  let server: Server;
  let url: string;
  let policy: Policy = 'answer-first-only';
  let connections = 0;
  /** Requests answered, and requests the server dropped by closing. */
  const tally = { answered: 0, dropped: 0 };
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer((socket) => {
      connections += 1;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      let requests = 0;
      let buffered = '';
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1');
        // One request per head (the client sends GETs without a body).
        while (buffered.includes('\r\n\r\n')) {
          buffered = buffered.slice(buffered.indexOf('\r\n\r\n') + 4);
          requests += 1;
          if (policy === 'close-every' || requests > 1) {
            tally.dropped += 1;
            socket.destroy();
            return;
          }
          tally.answered += 1;
          const body = JSON.stringify({ ok: true });
          socket.write(
            `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
              `Connection: keep-alive\r\n\r\n${body}`,
          );
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const client = async () => {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return KubeApiClient.open({ kubeConfig: config, requestTimeoutMs: 5_000 });
  };

  it('sends a request again, once, when the reused connection it went on was closed unread', async () => {
    policy = 'answer-first-only';
    const api = await client();
    try {
      const before = { ...tally, connections };
      const first = await api.send('first', { method: 'GET', path: '/a' });
      assert.deepEqual(first.body, { ok: true });
      // The same kept-alive connection is reused; the server closes it unread; a new one answers.
      const second = await api.send('second', { method: 'GET', path: '/b' });
      assert.equal(second.status, 200);
      assert.deepEqual(second.body, { ok: true });
      assert.deepEqual(
        [tally.answered - before.answered, tally.dropped - before.dropped, connections - before.connections],
        [2, 1, 2],
        'answered on the first connection, dropped on its reuse, answered again on a second connection',
      );
    } finally {
      api.close();
    }
  });

  it('a request whose kept-alive connection was closed is resent on a fresh connection, never on another kept one', async () => {
    policy = 'answer-first-only';
    const api = await client();
    try {
      // Two requests at once: two connections, each answered once and kept in the pool.
      const opened = connections;
      await Promise.all([
        api.send('one', { method: 'GET', path: '/a' }),
        api.send('two', { method: 'GET', path: '/b' }),
      ]);
      const before = { ...tally, connections };
      assert.equal(connections - opened, 2, 'two kept connections');
      // The server closes both unread on reuse; the resend must not draw the second one.
      const third = await api.send('third', { method: 'GET', path: '/c' });
      assert.equal(third.status, 200);
      assert.deepEqual(
        [tally.answered - before.answered, tally.dropped - before.dropped, connections - before.connections],
        [1, 1, 1],
        'dropped on one kept connection, answered on a new one',
      );
    } finally {
      api.close();
    }
  });

  it('does not send again a request whose fresh connection failed: TRY_AGAIN naming the server', async () => {
    policy = 'close-every';
    const api = await client();
    try {
      const before = { ...tally };
      await assert.rejects(api.send('create a thing', { method: 'POST', path: '/c', body: {} }), (e) => {
        assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
        assert.ok(e.message.includes(url) && e.message.includes('create a thing'), e.message);
        return true;
      });
      assert.equal(tally.dropped - before.dropped, 1, 'sent once');
    } finally {
      api.close();
    }
  });
});
