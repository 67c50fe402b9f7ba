/**
 * The metrics address: what it serves and refuses, the headers that keep the dashboard from
 * loading anything from elsewhere, the health endpoints, the Host check against DNS rebinding, the
 * bounds that keep its connections from starving the agent (real TCP clients), and an agent whose
 * metrics port is taken serving CNI calls anyway (a node must not lose its IPAM over its metrics
 * port).
 */
import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../../src/api/client.ts';
import type { DashboardData } from '../../../src/api/dashboard.ts';
import {
  type MetricsServerOptions,
  createMetricsServer,
  listenMetrics,
} from '../../../src/agent/metrics/http-server.ts';
import { CHECK_EVERY_MS, METRICS_CONNECTION_BOUNDS } from '../../../src/agent/metrics/connection-budget.ts';
import { readinessProblem } from '../../../src/agent/node/cni-config-manager.ts';
import { WarrenError } from '../../../src/core/errors.ts';
import { HANG_BOUND_MS, waitFor } from '../../helpers/processes.ts';
import { startAgent } from '../../helpers/agent.ts';

const DATA = { generatedAt: '2026-01-01T00:00:00.000Z' } as unknown as DashboardData;

describe('the metrics server', () => {
  let server: Server;
  let base: string;
  let failing = false;
  let notReady: string | undefined;
  let readinessAsked = 0;
  const errors: string[] = [];

  before(async () => {
    server = createMetricsServer({
      exposition: async () => {
        if (failing) throw new Error('the store is locked');
        return { contentType: 'text/plain; version=0.0.4; charset=utf-8', text: 'warren_up 1\n' };
      },
      dashboard: async () => DATA,
      page: (d) => `<!doctype html><title>page</title>${d.generatedAt}`,
      fragment: (d) => `<main>${d.generatedAt}</main>`,
      assets: new Map([['/dashboard.js', { contentType: 'text/javascript; charset=utf-8', body: 'void 0;' }]]),
      readiness: async () => {
        readinessAsked++;
        if (notReady !== undefined) throw new WarrenError('NOT_READY', notReady);
      },
      hostNames: ['warren-node-7.example'],
      onError: (error, path) => errors.push(`${path}: ${(error as Error).message}`),
    });
    base = `http://${await listenMetrics(server, { host: '127.0.0.1', port: 0 })}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('serves /metrics, /, /fragment and /dashboard.json, each with its content type', async () => {
    const metrics = await fetch(`${base}/metrics`);
    assert.equal(await metrics.text(), 'warren_up 1\n');
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const page = await fetch(`${base}/`);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await page.text(), /^<!doctype html>/);
    assert.equal(await (await fetch(`${base}/fragment`)).text(), '<main>2026-01-01T00:00:00.000Z</main>');
    assert.deepEqual(await (await fetch(`${base}/dashboard.json`)).json(), DATA);
  });

  it('forbids loading, connecting to or framing anything outside the agent', async () => {
    const res = await fetch(`${base}/`);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /connect-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline/, 'no inline script or style: injected markup cannot run');
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /style-src 'self'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  it('answers HEAD without a body, another method 405 naming GET and HEAD, another path 404', async () => {
    const head = await fetch(`${base}/metrics`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
    const post = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
    const missing = await fetch(`${base}/admin`);
    assert.equal(missing.status, 404);
    assert.match(await missing.text(), /not found: \/admin/);
  });

  it("serves the page's own resources with their content type", async () => {
    const script = await fetch(`${base}/dashboard.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.equal(await script.text(), 'void 0;');
  });

  it('/healthz and /livez answer at once without asking readiness, while a readiness problem makes /readyz 503 with the reason', async () => {
    notReady = 'the readiness indicator /run/flannel/subnet.env is missing';
    try {
      const asked = readinessAsked;
      for (const path of ['/healthz', '/livez']) {
        const live = await fetch(`${base}${path}`);
        assert.equal(live.status, 200, path);
        assert.equal(await live.text(), 'ok\n');
      }
      assert.equal(readinessAsked, asked, 'liveness touches nothing');
      const ready = await fetch(`${base}/readyz`);
      assert.equal(ready.status, 503);
      assert.match(ready.headers.get('content-type') ?? '', /^text\/plain/);
      assert.equal(await ready.text(), 'not ready: the readiness indicator /run/flannel/subnet.env is missing\n');
    } finally {
      notReady = undefined;
    }
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(await ready.text(), 'ok\n');
  });

  it('says "not ready" once on /readyz when the reason says it already (the readiness indicator)', async () => {
    notReady = readinessProblem('/run/flannel/subnet.env');
    try {
      const ready = await fetch(`${base}/readyz`);
      assert.equal(ready.status, 503);
      assert.equal(await ready.text(), 'not ready: readiness indicator /run/flannel/subnet.env is missing\n');
    } finally {
      notReady = undefined;
    }
  });

  it('refuses a request with a foreign Host header (DNS rebinding) with 421, and accepts IP literals, localhost and its own name', async () => {
    const port = new URL(base).port;
    const status = async (host: string) =>
      (
        await rawRequest(Number(port), `GET /dashboard.json HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)
      ).split(' ')[1];
    assert.equal(await status(`attacker.example:${port}`), '421');
    assert.equal(await status('attacker.example'), '421');
    assert.equal(await status(`127.0.0.1.attacker.example:${port}`), '421');
    assert.equal(await status(`127.0.0.1:${port}`), '200');
    assert.equal(await status(`[::1]:${port}`), '200');
    assert.equal(await status(`10.1.2.3:${port}`), '200');
    assert.equal(await status(`localhost:${port}`), '200');
    assert.equal(await status(`Warren-Node-7.example.:${port}`), '200');
  });

  it('answers a failing read 500 with its message, reports it, and keeps serving', async () => {
    failing = true;
    const res = await fetch(`${base}/metrics`);
    failing = false;
    assert.equal(res.status, 500);
    assert.match(await res.text(), /the store is locked/);
    assert.deepEqual(errors, ['/metrics: the store is locked']);
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
  });
});

/** Sends `text` on a fresh TCP connection and resolves with what comes back until the server closes. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (c: Buffer) => (got += c.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
    socket.write(text);
  });
}

/** A server as the agent makes it, on a free loopback port. */
async function serverWith(
  extra: Partial<MetricsServerOptions> = {},
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createMetricsServer({
    exposition: async () => ({ contentType: 'text/plain', text: 'warren_up 1\n' }),
    dashboard: async () => DATA,
    page: () => 'page',
    fragment: () => 'fragment',
    readiness: async () => undefined,
    onError: () => undefined,
    ...extra,
  });
  const bound = await listenMetrics(server, { host: '127.0.0.1', port: 0 });
  return {
    server,
    port: Number(bound.split(':').at(-1)),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Opens a TCP connection and resolves once it is connected; `closedAt` is set when the server closes it. */
function openConnection(port: number): Promise<Socket & { closedAt?: number }> {
  return new Promise((resolve, reject) => {
    const socket: Socket & { closedAt?: number } = connect(port, '127.0.0.1');
    socket.on('close', () => (socket.closedAt = Date.now()));
    socket.once('error', () => undefined);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('the bounds of the metrics port', () => {
  it('closes a connection that trickles its headers once the header bound has passed, not half a minute later', async () => {
    const s = await serverWith();
    const socket = await openConnection(s.port);
    const openedAt = Date.now();
    socket.write('GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    // A byte now and then keeps the connection from ever being idle: only the header bound ends it.
    const trickle = setInterval(() => socket.writable && socket.write('x'), 200);
    try {
      await waitFor('the server to close the slow-header connection', () => socket.closedAt, HANG_BOUND_MS);
      const lived = (socket.closedAt as number) - openedAt;
      const bound = METRICS_CONNECTION_BOUNDS.headersMs + CHECK_EVERY_MS;
      assert.ok(lived >= METRICS_CONNECTION_BOUNDS.headersMs - 100, `closed after ${lived} ms, before the bound`);
      // Slack for a loaded machine, but far below Node's default check every 30 s.
      assert.ok(lived <= bound + 5_000, `closed after ${lived} ms; the bound is ${bound} ms`);
    } finally {
      clearInterval(trickle);
      socket.destroy();
      await s.close();
    }
  });

  it('closes a connection that never sends anything after the idle bound', async () => {
    const s = await serverWith({
      bounds: { ...METRICS_CONNECTION_BOUNDS, headersMs: 60_000, requestMs: 60_000, idleMs: 1_000 },
    });
    const socket = await openConnection(s.port);
    try {
      await waitFor('the server to close the silent connection', () => socket.closedAt, HANG_BOUND_MS);
    } finally {
      socket.destroy();
      await s.close();
    }
  });

  it('a flood of idle connections beyond the bound holds no more descriptors than the bound and never locks out a probe', async () => {
    const max = 8;
    const s = await serverWith({ bounds: { ...METRICS_CONNECTION_BOUNDS, max } });
    const flood: Socket[] = [];
    try {
      for (let i = 0; i < 40; i++) flood.push(await openConnection(s.port));
      const open = await waitFor(`the server to hold at most ${max} connections`, async () => {
        const n = await new Promise<number>((resolve, reject) =>
          s.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
        );
        return n <= max ? n : undefined;
      });
      assert.ok(open <= max);
      const live = await fetch(`http://127.0.0.1:${s.port}/livez`);
      assert.equal(live.status, 200, 'a probe gets through: the longest-idle connection gave way');
      assert.equal(await live.text(), 'ok\n');
    } finally {
      for (const socket of flood) socket.destroy();
      await s.close();
    }
  });
});

describe('an agent whose metrics address cannot be bound', () => {
  let holder: Server;
  let taken: string;

  before(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    taken = `127.0.0.1:${(holder.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it('still serves CNI calls, and says in status that metrics are not served and why', async () => {
    const agent = await startAgent({ args: ['--metrics-address', taken] });
    try {
      const client = new ApiClient({ socket: agent.socket });
      const outcome = await client.cni({
        command: 'ADD',
        containerID: 'c1',
        netns: '/var/run/netns/x',
        ifname: 'eth0',
        config: { cniVersion: '1.0.0', name: 'n', ipam: { type: 'warren', range: '10.81.0.0/24' } },
      });
      assert.equal(outcome.kind, 'result');
      const metrics = (await client.status()).metrics;
      assert.equal(metrics?.address, taken);
      assert.match(metrics?.error ?? '', /cannot listen on 127\.0\.0\.1:\d+: .*EADDRINUSE/);
      assert.deepEqual((await client.doctor()).metrics, metrics);
    } finally {
      await agent.stop();
    }
  });

  it('serves neither metrics nor the dashboard with an empty address, and status says nothing of them', async () => {
    const agent = await startAgent({ args: ['--metrics-address', ''] });
    try {
      const status = await new ApiClient({ socket: agent.socket }).status();
      assert.equal(status.metrics, undefined);
      assert.doesNotMatch(agent.log(), /metrics and dashboard served/);
    } finally {
      await agent.stop();
    }
  });
});
