/**
 * The cluster tier's HTTP layer (src/store/kubernetes/api-client.ts) against a plain HTTPS server:
 * connections are kept alive between requests, the kubeconfig's credentials go with each request,
 * what the server answers comes back as a value, Status parsed, and watches held open never keep a
 * request waiting for a connection.
 */
import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { isWarrenError } from '../../../src/core/errors.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { issueServerCertificate } from '../../helpers/tls.ts';

describe('KubeApiClient', () => {
  const dir = tempDir('warren-api-client-');
  let server: Server;
  let url: string;
  let connections = 0;
  const seen: Array<{ method: string; path: string; auth: string | undefined; body: string }> = [];

  before(async () => {
    const certificate = issueServerCertificate(dir);
    server = createServer({ key: certificate.keyPem, cert: certificate.certPem }, (req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        seen.push({ method: req.method ?? '', path: req.url ?? '', auth: req.headers.authorization, body });
        if (req.url?.startsWith('/conflict')) {
          const status = {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            message: 'x "a" already exists',
            reason: 'AlreadyExists',
            code: 409,
          };
          res.writeHead(409, { 'Content-Type': 'application/json' }).end(JSON.stringify(status));
          return;
        }
        if (req.url?.startsWith('/watch')) {
          res.writeHead(200, { 'Content-Type': 'application/json' }); // held open: a watch with nothing to tell
          res.write('');
          return;
        }
        if (req.url?.startsWith('/missing')) {
          res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
          return;
        }
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ok: true }));
      });
    });
    server.on('secureConnection', () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [
        { name: 'c', server: url, caData: Buffer.from(certificate.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    client = await KubeApiClient.open({ kubeConfig: config });
  });
  let client: KubeApiClient;
  after(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    removeDir(dir);
  });

  it('keeps one connection alive for requests one after another, each with the credentials', async () => {
    const before = connections;
    for (let i = 0; i < 10; i++) {
      const answer = await client.send('test', { method: 'POST', path: `/ok/${i}`, body: { i }, query: { limit: 5 } });
      assert.equal(answer.status, 200);
      assert.deepEqual(answer.body, { ok: true });
    }
    assert.equal(connections - before, 1);
    const last = seen.at(-1);
    assert.equal(last?.auth, 'Bearer secret-token');
    assert.equal(last?.path, '/ok/9?limit=5');
    assert.equal(last?.body, '{"i":9}');
  });

  it('answers a request while more watches are open than the request pool has connections', async () => {
    const stop = new AbortController();
    const answered: number[] = [];
    const streams = Array.from({ length: 12 }, (_, i) =>
      client.stream(
        'watch',
        { path: `/watch/${i}` },
        () => {},
        stop.signal,
        (status) => answered.push(status),
      ),
    );
    // With one pool of 8 the last 4 watches are never answered: the wait is bounded only against a hang.
    await waitFor('every watch answered, each on a connection of its own', () =>
      answered.length === streams.length ? true : undefined,
    );
    const answer = await client.send('test', { method: 'GET', path: '/ok/beside-watches' });
    assert.equal(answer.status, 200, 'a request beside 12 open watches is answered');
    stop.abort();
    await Promise.all(streams);
  });

  it('answers a Status as a failure with its reason, and tells an unknown path (text 404) apart', async () => {
    const conflict = await client.send('test', { method: 'POST', path: '/conflict', body: {} });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.failure.reason, 'AlreadyExists');
    const missing = await client.send('test', { method: 'GET', path: '/missing' });
    assert.equal(missing.json, false);
    const refusal = client.refusal('read x', missing, 'get', 'warrenblocks.warren.dev');
    assert.ok(isWarrenError(refusal, 'IO_FAILURE'));
    assert.match(refusal.message, /CustomResourceDefinitions of warren\.dev/);
    const busy = client.refusal('read x', { ...missing, status: 503, json: true }, 'get', 'warrenblocks.warren.dev');
    assert.ok(isWarrenError(busy, 'TRY_AGAIN'));
    assert.ok(busy.message.includes(url));
  });

  it('fails requests with TRY_AGAIN naming the server once closed', async () => {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const closed = await KubeApiClient.open({ kubeConfig: config });
    closed.close();
    await assert.rejects(closed.send('read x', { method: 'GET', path: '/ok' }), (e) => {
      assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
      assert.ok(e.message.includes(url) && e.message.includes('read x'), e.message);
      return true;
    });
  });
});
