/**
 * The metrics address: what it serves and refuses, the headers that keep the dashboard from
 * loading anything from elsewhere, and an agent whose metrics port is taken serving CNI calls
 * anyway (a node must not lose its IPAM over its metrics port).
 */
import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../../src/api/client.ts';
import type { DashboardData } from '../../../src/api/dashboard.ts';
import { createMetricsServer, listenMetrics } from '../../../src/agent/metrics/http-server.ts';
import { startAgent } from '../../helpers/agent.ts';

const DATA = { generatedAt: '2026-01-01T00:00:00.000Z' } as unknown as DashboardData;

describe('the metrics server', () => {
  let server: Server;
  let base: string;
  let failing = false;
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
      const outcome = await client.cni({ command: 'ADD', containerID: 'c1', netns: '/var/run/netns/x', ifname: 'eth0', config: { cniVersion: '1.0.0', name: 'n', ipam: { type: 'warren', range: '10.81.0.0/24' } } });
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
