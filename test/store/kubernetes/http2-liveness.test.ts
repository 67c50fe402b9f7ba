/**
 * When the cluster tier's HTTP/2 session (src/store/kubernetes/http2-session.ts) is judged dead after
 * a request missed its deadline: only when nothing at all came from it within the PING timeout of
 * its PING. At 2,500 simulated nodes (load 14) 1,599 sessions were PINGed after a missed deadline and
 * their answers took up to 7.7 s; a session re-made for a late answer costs the API server a TLS
 * handshake and every watch of the node listed again, at the moment it is busiest.
 *
 * The server runs in a worker thread, so this thread can be busy while the server answers: a TLS
 * relay in front of an HTTP/2 server without TLS, which passes every frame, or (`dropPings`) every
 * frame but the client's PINGs, so the server never answers them, and tells this thread of each.
 * Its paths: `/ok` answers at once, `/hang` never, `/watch` sends a line every 50 ms.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import type { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import { openKubeClientOf } from '../../helpers/kube-tls-client.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { issueServerCertificate } from '../../helpers/tls.ts';

const SERVER = `
const { parentPort, workerData } = require('node:worker_threads');
const http2 = require('node:http2');
const net = require('node:net');
const tls = require('node:tls');
const PREFACE = 24;
const inner = http2.createServer();
inner.on('session', (s) => s.on('error', () => {}));
inner.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  const path = headers[':path'];
  if (path === '/hang') return;
  stream.respond({ ':status': 200, 'content-type': 'application/json' });
  if (path === '/ok') return stream.end('{"ok":true}');
  const t = setInterval(() => stream.write('{"type":"BOOKMARK"}\\n'), 50);
  stream.on('close', () => clearInterval(t));
});
inner.listen(0, '127.0.0.1', () => {
  const relay = tls.createServer({ key: workerData.key, cert: workerData.cert, ALPNProtocols: ['h2'] }, (client) => {
    parentPort.postMessage('connection');
    const server = net.connect(inner.address().port, '127.0.0.1');
    client.on('error', () => server.destroy());
    server.on('error', () => client.destroy());
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
    server.pipe(client);
    // The client's frames, one by one after the preface; a PING (type 6, not an ACK) noted, dropped if asked.
    let buffered = Buffer.alloc(0);
    let prefaced = false;
    client.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!prefaced) {
        if (buffered.length < PREFACE) return;
        server.write(buffered.subarray(0, PREFACE));
        buffered = buffered.subarray(PREFACE);
        prefaced = true;
      }
      while (buffered.length >= 9) {
        const size = 9 + buffered.readUIntBE(0, 3);
        if (buffered.length < size) return;
        const frame = buffered.subarray(0, size);
        buffered = buffered.subarray(size);
        const ping = frame[3] === 6 && (frame[4] & 1) === 0;
        if (ping) parentPort.postMessage('ping');
        if (!ping) server.write(frame);
        else if (!workerData.dropPings) setTimeout(() => server.write(frame), workerData.delayPingsMs);
      }
    });
  });
  relay.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: relay.address().port }));
});
`;

interface WorkerServer {
  readonly url: string;
  readonly caPem: string;
  connections(): number;
  pings(): number;
  /** `fn` is called as soon as this thread hears of a PING at the server. */
  onPing(fn: () => void): void;
}

const ended: Array<() => unknown> = [];
afterEach(async () => {
  for (const end of ended.splice(0).reverse()) await end();
});

/** `dropPings`: the server never answers a PING; else it answers `delayPingsMs` after it came. */
async function workerServer(dropPings: boolean, delayPingsMs = 0): Promise<WorkerServer> {
  const dir = tempDir('warren-h2-live-');
  ended.push(() => removeDir(dir));
  const certificate = issueServerCertificate(dir);
  const worker = new Worker(SERVER, {
    eval: true,
    workerData: { key: certificate.keyPem, cert: certificate.certPem, dropPings, delayPingsMs },
  });
  ended.push(() => worker.terminate());
  const seen = { connections: 0, pings: 0 };
  const pinged: Array<() => void> = [];
  worker.on('message', (m: unknown) => {
    if (m === 'connection') seen.connections++;
    if (m !== 'ping') return;
    seen.pings++;
    for (const fn of pinged.splice(0)) fn();
  });
  const [ready] = (await once(worker, 'message')) as [{ port: number }];
  return {
    url: `https://127.0.0.1:${ready.port}`,
    caPem: certificate.caPem,
    connections: () => seen.connections,
    pings: () => seen.pings,
    onPing: (fn) => pinged.push(fn),
  };
}

/** A client whose requests have 300 ms and whose suspected session has 1 s to show it lives. */
async function clientFor(server: WorkerServer): Promise<KubeApiClient> {
  const client = await openKubeClientOf(server, { requestTimeoutMs: 300, pingTimeoutMs: 1_000 });
  ended.push(() => client.close());
  return client;
}

/**
 * The client's first answer, asked again while its 300 ms pass first (a TLS handshake on a loaded
 * machine takes longer: the file failed at load 8 on the first request); what the server counted
 * meanwhile (each missed deadline PINGs a session that answers, and keeps it), to count from.
 */
async function firstAnswer(
  client: KubeApiClient,
  server: WorkerServer,
): Promise<{ pings: number; connections: number }> {
  await waitFor('the first answer within the request deadline', async () => {
    const answer = await client.send('first', { method: 'GET', path: '/ok' }).catch(() => undefined);
    return answer?.status === 200 || undefined;
  });
  return { pings: server.pings(), connections: server.connections() };
}

/** A request the server never answers: TRY_AGAIN at its deadline, which makes the session PING. */
async function missDeadline(client: KubeApiClient): Promise<void> {
  await assert.rejects(client.send('hang', { method: 'GET', path: '/hang' }), (e) => isWarrenError(e, 'TRY_AGAIN'));
}

/** Blocks this thread for `ms`, as a process too busy to turn its event loop does. */
function busyFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('an HTTP/2 session suspected dead after a missed deadline', () => {
  it('is kept when its PING was answered while this process was too busy to read the answer', async () => {
    const server = await workerServer(false, 100);
    const client = await clientFor(server);
    const start = await firstAnswer(client, server);
    // The PING's answer comes 100 ms after it, while this thread turns nothing until its time is past.
    server.onPing(() => busyFor(1_500));
    await missDeadline(client);
    await waitFor('the PING at the server', () => server.pings() > start.pings || undefined);
    assert.equal((await client.send('after', { method: 'GET', path: '/ok' })).status, 200);
    assert.equal(server.connections(), start.connections, 'the session was kept, not re-made');
  });

  it('is kept while answers still come from it, its PING unanswered (a busy server, not a dead one)', async () => {
    const server = await workerServer(true);
    const client = await clientFor(server);
    const watching = new AbortController();
    let lines = 0;
    const watch = client.stream('watch', { path: '/watch' }, () => lines++, watching.signal);
    await waitFor('the watch answering', () => lines > 0 || undefined);
    await missDeadline(client);
    // Once the first PING was judged (1 s), a missed deadline makes the session PING again.
    await waitFor('a second PING', async () => {
      await missDeadline(client);
      return server.pings() >= 2 || undefined;
    });
    assert.equal(server.connections(), 1, 'the session was kept, not re-made');
    const before = lines;
    await waitFor('the watch still answering', () => lines > before || undefined);
    watching.abort();
    await watch;
  });

  it('is destroyed when nothing at all comes from it, and the next request makes a new one', async () => {
    const server = await workerServer(true);
    const client = await clientFor(server);
    const start = await firstAnswer(client, server);
    await missDeadline(client);
    // Nothing is asked meanwhile: an answer would show the session alive.
    await waitFor('the session destroyed', () => !client.http2 || undefined);
    assert.equal((await client.send('again', { method: 'GET', path: '/ok' })).status, 200);
    assert.equal(server.connections(), start.connections + 1);
  });
});
