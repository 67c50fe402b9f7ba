/**
 * The cluster tier's API client (src/store/kubernetes/api-client.ts, http2-session.ts) over HTTP/2:
 * against the fake API server offering h2 by ALPN, every request and watch of a client goes over one
 * connection, the fake counts them as over HTTP/1.1, a watch cut with its connection is watched
 * again (and a 410 then relists), a deadline is TRY_AGAIN without losing the session, a graceful
 * GOAWAY lets the request in flight finish; against a bare HTTP/2 server, a stream the server
 * provably never handled (REFUSED_STREAM, above a GOAWAY's last stream) is sent once more, and one
 * it may have handled is not. HTTP/1.1 stays where the server offers only that, or `http2: false`.
 */
import assert from 'node:assert/strict';
import { type Http2SecureServer, type ServerHttp2Stream, constants, createSecureServer } from 'node:http2';
import { afterEach, describe, it } from 'node:test';
import { ManualClock, systemClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { loadKubeConfig } from '../../../src/sources/kubernetes/kubeconfig.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import { ApiRequestCounter } from '../../../src/store/kubernetes/api-requests.ts';
import { KubeCollectionWatch } from '../../../src/store/kubernetes/collection-watch.ts';
import { Resource, leaseKind } from '../../../src/store/kubernetes/resources.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { type TlsServerAddress, openKubeClientOf } from '../../helpers/kube-tls-client.ts';
import { issueServerCertificate } from '../../helpers/tls.ts';

const NS = 'h2-test';

function lease(name: string, holder: string) {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace: NS, labels: { kind: 'x' } },
    spec: { holderIdentity: holder },
  };
}

const ended: Array<() => unknown> = [];
afterEach(async () => {
  for (const end of ended.splice(0).reverse()) await end();
});

async function fakeWith(http2: boolean): Promise<FakeKubeApi> {
  const api = await startFakeKubeApi({ crds: [], http2 });
  ended.push(() => api.stop());
  return api;
}

async function clientOf(
  api: FakeKubeApi,
  options: { http2?: boolean; requestTimeoutMs?: number; requests?: ApiRequestCounter } = {},
): Promise<KubeApiClient> {
  const client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath), ...options });
  ended.push(() => client.close());
  return client;
}

describe('KubeApiClient over HTTP/2, against the fake API server', () => {
  it('sends requests as streams of one connection, each recorded and counted once, credentials on each', async () => {
    const api = await fakeWith(true);
    const counter = new ApiRequestCounter(new ManualClock(0));
    const client = await clientOf(api, { requests: counter });
    const leases = new Resource(client, leaseKind(NS));
    await leases.create('make a', lease('a', 'n1'));
    await Promise.all(['b', 'c', 'd'].map((n) => leases.create(`make ${n}`, lease(n, 'n1'))));
    assert.equal(((await leases.get('read a', 'a')) as { spec: { holderIdentity: string } }).spec.holderIdentity, 'n1');
    assert.equal(client.http2, true);
    assert.equal(api.requestCounts()['create leases'], 4);
    assert.equal(api.requestCounts()['get leases'], 1);
    assert.deepEqual(
      counter.totals().map((t) => `${t.verb} ${t.code} ${t.count}`),
      ['create 2xx 4', 'get 2xx 1'],
    );
    assert.deepEqual(api.connectionCounts(), { open: 1, accepted: 1, http2Sessions: 1 });
  });

  it('holds many watches and the requests beside them on the one connection', async () => {
    const api = await fakeWith(true);
    const client = await clientOf(api);
    const stop = new AbortController();
    ended.push(() => stop.abort());
    const path = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
    const watches = Array.from({ length: 20 }, () =>
      client.stream('watch leases', { path, query: { watch: 'true' } }, () => undefined, stop.signal),
    );
    await waitFor('20 watches open at the fake', () => api.watchCount('leases') === 20 || undefined);
    const leases = new Resource(client, leaseKind(NS));
    await leases.create('make a', lease('a', 'n1'));
    await waitFor('the event delivered to every watch', () =>
      api.watchEvents().find((e) => e.type === 'ADDED')?.count === 20 ? true : undefined,
    );
    assert.deepEqual(api.connectionCounts(), { open: 1, accepted: 1, http2Sessions: 1 });
    stop.abort();
    for (const w of await Promise.all(watches)) assert.equal(w.status, 200);
  });

  it('watches again after its connection was cut, and relists on 410 from the new one', async () => {
    const api = await fakeWith(true);
    const client = await clientOf(api);
    const leases = new Resource(client, leaseKind(NS));
    await leases.create('make a', lease('a', 'n1'));
    const w = new KubeCollectionWatch<string>({
      resource: leases,
      what: 'the test leases',
      selectors: { labelSelector: 'kind=x' },
      decode: (o) => (o as { spec: { holderIdentity: string } }).spec.holderIdentity,
      clock: systemClock,
    });
    ended.push(() => w.close());
    w.start();
    await w.synced();
    await waitFor('the watch open', () => api.watchCount('leases') === 1 || undefined);
    // While the connection is down, a is deleted and the history compacted: the watch must relist.
    api.expireNextWatch('status');
    api.cutConnections();
    api.deleteObject('leases', 'a', NS);
    api.compactHistory();
    await waitFor('relisted', () => (w.status().relists === 1 && w.get('a') === undefined) || undefined);
    await leases.create('make b', lease('b', 'n2'));
    await waitFor('b seen by the watch', () => w.get('b') === 'n2' || undefined);
    await waitFor('watching again', () => api.watchCount('leases') === 1 || undefined);
    assert.deepEqual(api.connectionCounts(), { open: 1, accepted: 2, http2Sessions: 1 });
  });

  it('fails a request past its deadline with TRY_AGAIN, counted once, and keeps the live session', async () => {
    const api = await fakeWith(true);
    const counter = new ApiRequestCounter(new ManualClock(0));
    const client = await clientOf(api, { requestTimeoutMs: 300, requests: counter });
    const leases = new Resource(client, leaseKind(NS));
    await leases.get('read none', 'none');
    api.setWriteLatency(2_000);
    await assert.rejects(leases.create('make a', lease('a', 'n1')), (e) => {
      assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
      assert.ok(e.message.includes(api.url) && e.message.includes('no answer within 300 ms'), e.message);
      return true;
    });
    assert.deepEqual(
      counter.totals().map((t) => `${t.verb} ${t.code} ${t.count}`),
      ['get 404 1', 'create unreachable 1'],
    );
    api.setWriteLatency(0);
    await leases.get('read none', 'none');
    assert.equal(api.connectionCounts().accepted, 1, 'the session answered its PING and was kept');
  });

  it('lets the request in flight finish through a graceful GOAWAY and sends the next on a new connection', async () => {
    const api = await fakeWith(true);
    const client = await clientOf(api);
    const leases = new Resource(client, leaseKind(NS));
    await leases.get('read none', 'none');
    api.setWriteLatency(300);
    const made = leases.create('make a', lease('a', 'n1'));
    await waitFor('the create at the fake', () => api.requestCounts()['create leases'] === 1 || undefined);
    api.goAway();
    await made;
    await leases.get('read a', 'a');
    assert.equal(api.requestCounts()['create leases'], 1, 'the create was not sent twice');
    assert.equal(api.connectionCounts().accepted, 2);
  });
});

describe('KubeApiClient stays on HTTP/1.1', () => {
  it('where the server offers only HTTP/1.1', async () => {
    const api = await fakeWith(false);
    const client = await clientOf(api);
    await new Resource(client, leaseKind(NS)).create('make a', lease('a', 'n1'));
    assert.equal(client.http2, false);
  });

  it('where http2 is false, whatever the server offers', async () => {
    const api = await fakeWith(true);
    const client = await clientOf(api, { http2: false });
    const leases = new Resource(client, leaseKind(NS));
    await leases.create('make a', lease('a', 'n1'));
    assert.equal(client.http2, false);
    assert.equal(api.connectionCounts().http2Sessions, 0);
  });

  it('where the environment says WARREN_KUBE_HTTP2=0 and the options say nothing', async () => {
    const api = await fakeWith(true);
    process.env.WARREN_KUBE_HTTP2 = '0';
    ended.push(() => delete process.env.WARREN_KUBE_HTTP2);
    const client = await clientOf(api);
    await new Resource(client, leaseKind(NS)).create('make a', lease('a', 'n1'));
    assert.equal(client.http2, false);
    assert.equal(api.connectionCounts().http2Sessions, 0);
  });
});

describe('KubeApiClient over HTTP/2, against a server that refuses or goes away', () => {
  /** A bare HTTP/2 server: `onStream` is given each stream with its number on its session (from 1). */
  async function bareServer(
    onStream: (stream: ServerHttp2Stream, nth: number, session: number) => void,
  ): Promise<{ url: string; caPem: string; streams: () => number; sessions: () => number; pings: () => number }> {
    const dir = tempDir('warren-h2-');
    ended.push(() => removeDir(dir));
    const certificate = issueServerCertificate(dir);
    const server: Http2SecureServer = createSecureServer({ key: certificate.keyPem, cert: certificate.certPem });
    let streams = 0;
    let sessions = 0;
    let pings = 0;
    server.on('session', (session) => {
      const n = ++sessions;
      session.on('ping', () => {
        pings++;
      });
      let nth = 0;
      session.on('error', () => undefined);
      session.on('stream', (stream) => {
        streams++;
        stream.on('error', () => undefined);
        onStream(stream, ++nth, n);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ended.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const s of open) s.destroy();
        }),
    );
    const open = new Set<import('node:net').Socket>();
    server.on('secureConnection', (s) => {
      open.add(s);
      s.on('close', () => open.delete(s));
    });
    const port = (server.address() as { port: number }).port;
    return {
      url: `https://127.0.0.1:${port}`,
      caPem: certificate.caPem,
      streams: () => streams,
      sessions: () => sessions,
      pings: () => pings,
    };
  }

  async function clientFor(
    server: TlsServerAddress,
    requests: ApiRequestCounter,
    requestTimeoutMs = 2_000,
  ): Promise<KubeApiClient> {
    const client = await openKubeClientOf(server, { requests, requestTimeoutMs });
    ended.push(() => client.close());
    return client;
  }

  const ok = (stream: ServerHttp2Stream): void => {
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end('{"ok":true}');
  };

  it('sends a refused stream (REFUSED_STREAM) once more, and counts it once', async () => {
    const server = await bareServer((stream, nth) =>
      nth === 1 ? stream.close(constants.NGHTTP2_REFUSED_STREAM) : ok(stream),
    );
    const counter = new ApiRequestCounter(new ManualClock(0));
    const client = await clientFor(server, counter);
    const answer = await client.send('post x', { method: 'POST', path: '/x', body: { a: 1 } });
    assert.equal(answer.status, 200);
    assert.equal(server.streams(), 2);
    assert.deepEqual(
      counter.totals().map((t) => `${t.code} ${t.count}`),
      ['2xx 1'],
    );
  });

  it('sends a stream above the last one a GOAWAY named once more, on a new connection', async () => {
    const server = await bareServer((stream, nth, session) => {
      if (session === 1 && nth === 2) stream.session?.goaway(constants.NGHTTP2_NO_ERROR, 1);
      else ok(stream);
    });
    const counter = new ApiRequestCounter(new ManualClock(0));
    const client = await clientFor(server, counter);
    assert.equal((await client.send('first', { method: 'GET', path: '/a' })).status, 200);
    assert.equal((await client.send('post x', { method: 'POST', path: '/x', body: { a: 1 } })).status, 200);
    assert.equal(server.sessions(), 2);
    assert.equal(server.streams(), 3);
    assert.deepEqual(
      counter.totals().map((t) => `${t.verb} ${t.code} ${t.count}`),
      ['get 2xx 1', 'create 2xx 1'],
    );
  });

  it('does not send again a stream the GOAWAY said may have been handled: TRY_AGAIN', async () => {
    const server = await bareServer((stream, nth) => {
      if (nth === 1) {
        stream.session?.goaway(constants.NGHTTP2_INTERNAL_ERROR, 1);
        stream.session?.destroy();
      } else ok(stream);
    });
    const counter = new ApiRequestCounter(new ManualClock(0));
    const client = await clientFor(server, counter);
    await assert.rejects(client.send('post x', { method: 'POST', path: '/x', body: { a: 1 } }), (e) => {
      assert.ok(isWarrenError(e, 'TRY_AGAIN'), String(e));
      assert.ok(e.message.includes(server.url) && e.message.includes('post x'), e.message);
      return true;
    });
    assert.equal(server.streams(), 1);
    assert.deepEqual(
      counter.totals().map((t) => `${t.code} ${t.count}`),
      ['unreachable 1'],
    );
  });

  it('makes the session answer one PING after a deadline, and keeps it when it does', async () => {
    const server = await bareServer((stream, nth) => {
      if (nth !== 2 && nth !== 3) ok(stream); // the second and third are never answered
    });
    const client = await clientFor(server, new ApiRequestCounter(new ManualClock(0)), 500);
    assert.equal((await client.send('first', { method: 'GET', path: '/a' })).status, 200);
    const late = [
      client.send('second', { method: 'GET', path: '/b' }),
      client.send('third', { method: 'GET', path: '/c' }),
    ];
    for (const request of late) await assert.rejects(request, (e) => isWarrenError(e, 'TRY_AGAIN'));
    await waitFor('the PING', () => server.pings() === 1 || undefined);
    assert.equal((await client.send('fourth', { method: 'GET', path: '/d' })).status, 200);
    assert.equal(server.sessions(), 1);
    // Never more than one PING a deadline passed: two deadlines passing while one PING is out cost
    // one, and on a loaded machine the second may pass after the first PING was answered (then a
    // second PING is right: the session is asked again).
    assert.ok(server.pings() <= late.length, `${server.pings()} PINGs for ${late.length} deadlines passed`);
  });

  it('sends no PING for requests answered within their deadline (regression: their deadline fired later)', async () => {
    const server = await bareServer((stream) => ok(stream));
    const client = await clientFor(server, new ApiRequestCounter(new ManualClock(0)), 100);
    for (const path of ['/a', '/b', '/c'])
      assert.equal((await client.send('read', { method: 'GET', path })).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 300)); // past every deadline: nothing may happen
    assert.equal(server.pings(), 0);
  });
});
